import { loadBundledCards } from "../src/models/catalog.ts";
const r = loadBundledCards(); console.log(r.cards.length, r.errors.slice(0,5));
