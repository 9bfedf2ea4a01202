/**
 * `skulk cards audit [--live]`: runs the bundled-card audit (the same checks as the unit tests) and, with
 * --live, asks the hub (HF_ENDPOINT) whether every referenced repo and file exists.
 */
import type { Command } from "commander";
import { parse as parseToml } from "smol-toml";
import { BUNDLED_CARDS } from "../generated/cards.gen.ts";
import { auditSources, referencedFiles } from "../models/audit.ts";
import { ModelCardSchema } from "../models/card.ts";
import { hubFileUrl } from "../models/facts.ts";
import { loadConfig } from "../config/load.ts";
import { CliError } from "./common.ts";

interface LiveResult {
  url: string;
  ok: boolean;
  detail: string;
}

async function probe(url: string): Promise<LiveResult> {
  try {
    const res = await fetch(url, { method: "HEAD", redirect: "follow", signal: AbortSignal.timeout(15_000) });
    await res.body?.cancel();
    return { url, ok: res.ok, detail: String(res.status) };
  } catch (e) {
    return { url, ok: false, detail: (e as Error).message.split("\n")[0] };
  }
}

/** Runs probes with bounded concurrency so a hub is not flooded. */
async function probeAll(urls: string[], width = 8): Promise<LiveResult[]> {
  const out: LiveResult[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < urls.length) out.push(await probe(urls[next++]));
  }));
  return out.sort((a, b) => a.url.localeCompare(b.url));
}

export function registerCards(program: Command): Command {
  const cards = program.command("cards").description("model card tools");
  cards.command("audit")
    .description("check every bundled card (schema, ids, cross-field sense, backends, capabilities)")
    .option("--live", "also check that every referenced hub repo and file exists (uses HF_ENDPOINT)")
    .option("--json", "print the report as JSON")
    .action(async (flags) => {
      const report = auditSources(BUNDLED_CARDS);
      const bad = report.cards.filter((c) => c.problems.length > 0);
      const noted = report.cards.filter((c) => c.notes.length > 0);
      let live: LiveResult[] = [];
      if (flags.live) {
        const endpoint = loadConfig({}).config.hubEndpoint;
        const urls = new Set<string>();
        for (const { toml } of BUNDLED_CARDS) {
          const parsed = ModelCardSchema.safeParse(parseToml(toml));
          if (!parsed.success) continue;
          const card = parsed.data;
          const files = referencedFiles(card);
          if (files.length === 0) urls.add(`${endpoint.replace(/\/$/, "")}/api/models/${card.model_id}`);
          for (const f of files) {
            urls.add(hubFileUrl(endpoint, f.repo, f.file, card.source_revision ?? "main"));
          }
        }
        live = await probeAll([...urls]);
      }
      const missing = live.filter((r) => !r.ok);
      if (flags.json) {
        console.log(JSON.stringify({ ...report, live }, null, 2));
      } else {
        for (const c of bad) for (const p of c.problems) console.log(`FAIL ${c.path}: ${p}`);
        for (const d of report.duplicates) console.log(`FAIL duplicate model id: ${d}`);
        for (const c of noted) for (const n of c.notes) console.log(`note ${c.path}: ${n}`);
        for (const m of missing) console.log(`MISSING ${m.url} (${m.detail})`);
        const liveLine = flags.live
          ? `; live: ${live.length - missing.length}/${live.length} hub references found`
          : "";
        console.log(
          `${report.cards.length} cards: ${bad.length} with problems, ${report.duplicates.length} duplicate ids, ` +
            `${noted.length} with notes${liveLine}`,
        );
      }
      if (bad.length || report.duplicates.length || missing.length) {
        throw new CliError("the card audit failed", 1);
      }
    });
  return cards;
}
