/**
 * The apt package ships only the npm packages named in packaging/runtime-imports (scripts/build-deb): every
 * package the program imports at run time must be there, and every name there must be one deno.json pins.
 */
import { describe, expect, it } from "vitest";

const ROOT = new URL("../..", import.meta.url).pathname;

function sources(dir: string): string[] {
  return [...Deno.readDirSync(dir)].flatMap((e) => {
    const path = `${dir}/${e.name}`;
    // The dashboard's browser code is built into src/generated and never loaded by the program itself.
    if (e.isDirectory) return path.endsWith("src/dashboard/app") ? [] : sources(path);
    return /\.tsx?$/.test(e.name) ? [path] : [];
  });
}

/** The npm package of a bare specifier: `hono/cors` -> hono, `@libsql/client/node` -> @libsql/client. */
const packageOf = (spec: string) => spec.split("/").slice(0, spec.startsWith("@") ? 2 : 1).join("/");

describe("packaging/runtime-imports", () => {
  const listed = Deno.readTextFileSync(`${ROOT}packaging/runtime-imports`).split("\n").filter(Boolean);

  it("names every npm package src/ imports", () => {
    const imported = new Set<string>();
    for (const file of sources(`${ROOT}src`)) {
      const text = Deno.readTextFileSync(file);
      for (const m of text.matchAll(/(?:from |import\()\s*"([^".][^"]*)"/g)) {
        if (!m[1].startsWith("node:") && !m[1].startsWith("npm:")) imported.add(packageOf(m[1]));
      }
    }
    expect(imported.size).toBeGreaterThan(5);
    expect([...imported].filter((p) => !listed.includes(p)).sort()).toEqual([]);
  });

  it("names only packages deno.json pins", () => {
    const imports = JSON.parse(Deno.readTextFileSync(`${ROOT}deno.json`)).imports as Record<string, string>;
    expect(listed.filter((p) => !(p in imports))).toEqual([]);
  });
});
