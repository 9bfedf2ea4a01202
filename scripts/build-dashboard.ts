/**
 * Builds the dashboard (src/dashboard/app/) into static files with esbuild: one hashed script and
 * stylesheet under /assets/ and an index.html naming them. Deterministic, so `embed.ts --check` can rebuild and compare.
 */
import * as esbuild from "esbuild";

const root = new URL("..", import.meta.url).pathname;
const app = `${root}src/dashboard/app`;

export interface BuiltFile {
  path: string;
  bytes: Uint8Array;
}

/** Builds in memory; `scripts/embed.ts` embeds the result, and `--out` also writes it (src/dashboard/dist). */
export async function buildDashboard(): Promise<BuiltFile[]> {
  try {
    const result = await esbuild.build({
      absWorkingDir: root,
      entryPoints: { app: `${app}/main.tsx` },
      bundle: true,
      minify: Deno.env.get("SKULK_DASHBOARD_DEBUG") !== "1",
      format: "esm",
      target: ["es2022", "chrome110", "firefox115", "safari16"],
      jsx: "automatic",
      jsxImportSource: "hono/jsx/dom",
      entryNames: "assets/[name]-[hash]",
      outdir: "/out",
      write: false,
      legalComments: "none",
      logLevel: "error",
      loader: { ".css": "css" },
    });
    const files: BuiltFile[] = result.outputFiles.map((f) => ({
      path: f.path.slice("/out".length),
      bytes: f.contents,
    }));
    const js = files.find((f) => f.path.endsWith(".js"))?.path;
    const css = files.find((f) => f.path.endsWith(".css"))?.path;
    if (!js) throw new Error("build-dashboard: esbuild produced no script");
    const html = Deno.readTextFileSync(`${app}/index.html`)
      .replace("<!--STYLES-->", css ? `<link rel="stylesheet" href="${css}">` : "")
      .replace("<!--SCRIPT-->", `<script type="module" src="${js}"></script>`);
    files.push({ path: "/index.html", bytes: new TextEncoder().encode(html) });
    for (const name of ["favicon.svg"]) {
      files.push({ path: `/${name}`, bytes: Deno.readFileSync(`${app}/${name}`) });
    }
    return files.sort((a, b) => a.path.localeCompare(b.path));
  } finally {
    await esbuild.stop();
  }
}

if (import.meta.main) {
  const t0 = performance.now();
  const files = await buildDashboard();
  const dir = `${root}src/dashboard/dist`;
  try {
    Deno.removeSync(dir, { recursive: true });
  } catch { /* first build */ }
  for (const f of files) {
    const p = `${dir}${f.path}`;
    Deno.mkdirSync(p.slice(0, p.lastIndexOf("/")), { recursive: true });
    Deno.writeFileSync(p, f.bytes);
  }
  const size = files.reduce((n, f) => n + f.bytes.length, 0);
  console.error(
    `build-dashboard: ${files.length} files, ${(size / 1024).toFixed(1)} KiB in ${
      Math.round(performance.now() - t0)
    } ms -> src/dashboard/dist`,
  );
}
