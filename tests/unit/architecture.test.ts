/** The module structure's rules, checked on the real import graph of src/: no import cycle through api/, api/
 * imported only by the composition root, `Plane` in a leaf module. */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = normalize(join(import.meta.dirname ?? ".", "..", ".."));
const SRC = join(ROOT, "src");

/** Every .ts/.tsx file under src/, as paths relative to the repository root ("src/api/app.ts"). */
function sourceFiles(dir: string = SRC): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (/\.tsx?$/.test(name) && !name.endsWith(".d.ts")) out.push(relative(ROOT, path));
  }
  return out.sort();
}

// Static `import … from "x"`, `export … from "x"`, side-effect `import "x"` and dynamic `import("x")`. The
// statement forms are anchored at a line start so that a string or comment mentioning "from" is not taken.
// `STATEMENT` captures the keyword, `type ` when the whole statement is type-only, and the specifier.
const STATEMENT = /^\s*(import|export)\s+(type\s+)?[\w$*{}\s,]*?\s*from\s*["']([^"']+)["']/gm;
const SPECIFIERS: [RegExp, number][] = [
  [STATEMENT, 3],
  [/^\s*import\s*["']([^"']+)["']/gm, 1],
  [/\bimport\(\s*["']([^"']+)["']\s*\)/g, 1],
];

/** Relative specifiers of one file, resolved to repository-relative paths. */
function importsOf(file: string, text: string): string[] {
  const found = new Set<string>();
  for (const [pattern, group] of SPECIFIERS) {
    for (const match of text.matchAll(pattern)) {
      const spec = match[group];
      if (!spec.startsWith(".")) continue; // packages and the import map are outside the graph
      found.add(normalize(join(dirname(file), spec)));
    }
  }
  return [...found].sort();
}

type Graph = Map<string, string[]>;

function importGraph(): Graph {
  const graph: Graph = new Map();
  for (const file of sourceFiles()) {
    graph.set(
      file,
      importsOf(file, readFileSync(join(ROOT, file), "utf8")).filter((to) => to.startsWith("src/")),
    );
  }
  return graph;
}

/** Tarjan's strongly connected components, iteratively (no recursion depth limit on a long chain). */
function components(graph: Graph): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const out: string[][] = [];
  for (const start of graph.keys()) {
    if (index.has(start)) continue;
    const work: { node: string; next: number }[] = [{ node: start, next: 0 }];
    index.set(start, counter);
    low.set(start, counter++);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const frame = work[work.length - 1];
      const edges = graph.get(frame.node) ?? [];
      if (frame.next < edges.length) {
        const to = edges[frame.next++];
        if (!graph.has(to)) continue;
        if (!index.has(to)) {
          index.set(to, counter);
          low.set(to, counter++);
          stack.push(to);
          onStack.add(to);
          work.push({ node: to, next: 0 });
        } else if (onStack.has(to)) {
          low.set(frame.node, Math.min(low.get(frame.node)!, index.get(to)!));
        }
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1].node;
        low.set(parent, Math.min(low.get(parent)!, low.get(frame.node)!));
      }
      if (low.get(frame.node) === index.get(frame.node)) {
        const component: string[] = [];
        let member: string;
        do {
          member = stack.pop()!;
          onStack.delete(member);
          component.push(member);
        } while (member !== frame.node);
        out.push(component.sort());
      }
    }
  }
  return out;
}

/** One shortest cycle through `from` inside its component, for a message a person can act on. */
function cycleThrough(graph: Graph, from: string, members: Set<string>): string[] {
  const previous = new Map<string, string>();
  const queue = [from];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const to of graph.get(node) ?? []) {
      if (!members.has(to)) continue;
      if (to === from) {
        const path = [node];
        while (path[0] !== from) path.unshift(previous.get(path[0])!);
        return [...path, from];
      }
      if (!previous.has(to)) {
        previous.set(to, node);
        queue.push(to);
      }
    }
  }
  return [from];
}

const isApi = (file: string) => file.startsWith("src/api/");

/** The composition root: the program, its commands, and the daemon where it assembles a node's API. */
const MAY_IMPORT_API = (file: string) =>
  file === "src/main.ts" || file.startsWith("src/cli/") || file === "src/daemon/node.ts";

/**
 * The dashboard is a client of the HTTP API, bundled apart for the browser: it may name the API's wire shapes
 * by type (erased from its bundle, so no runtime edge), and nothing else of api/.
 */
function dashboardWireType(file: string, to: string): boolean {
  if (!file.startsWith("src/dashboard/") || !to.startsWith("src/api/wire/")) return false;
  const text = readFileSync(join(ROOT, file), "utf8");
  return [...text.matchAll(STATEMENT)]
    .filter((m) => normalize(join(dirname(file), m[3])) === to)
    .every((m) => m[1] === "import" && m[2] !== undefined);
}

describe("the import graph of src/", () => {
  const graph = importGraph();
  const cycles = components(graph).filter((c) => c.length > 1);
  // Printed so that a change in structure shows in the test output.
  console.log(
    `import graph: ${graph.size} modules, ${cycles.length} cycles of more than one module (${
      cycles.map((c) => c.length).join(", ") || "none"
    })`,
  );

  it("is read from every source file, multi-line imports included", () => {
    expect(graph.size).toBeGreaterThan(100);
    expect(graph.get("src/main.ts")?.length).toBeGreaterThan(0);
    const sample =
      'import {\n  a,\n  type B,\n} from "../x/y.ts";\nexport * from "./z.ts";\nconst s = "from \\"./no.ts\\"";\n' +
      'export { c } from "./w.ts";\nimport "./side.ts";\nawait import("../dyn.ts");\nimport zod from "zod";\n';
    expect(importsOf("src/a/b.ts", sample)).toEqual(
      ["src/a/side.ts", "src/a/w.ts", "src/a/z.ts", "src/dyn.ts", "src/x/y.ts"],
    );
  });

  const describeCycle = (c: string[], through: string) =>
    `${c.length} modules in one cycle, e.g. ${cycleThrough(graph, through, new Set(c)).join(" -> ")}\n  ${
      c.join("\n  ")
    }`;

  it("has no import cycle through api/", () => {
    const offending = cycles.filter((c) => c.some(isApi)).map((c) => describeCycle(c, c.find(isApi)!));
    expect(offending, offending.join("\n\n")).toEqual([]);
  });

  it("has no import cycle anywhere", () => {
    // Stricter than the rule about api/: the structure has none today, and a new one is cheaper to break now.
    const offending = cycles.map((c) => describeCycle(c, c[0]));
    expect(offending, offending.join("\n\n")).toEqual([]);
  });

  it("has api/ imported only by the composition root (main.ts, cli/, daemon/node.ts)", () => {
    const offending = [...graph].flatMap(([file, imports]) =>
      isApi(file) || MAY_IMPORT_API(file)
        ? []
        : imports.filter(isApi).filter((to) => !dashboardWireType(file, to)).map(
          (to) => `${file} -> ${to}`,
        )
    );
    expect(offending, offending.join("\n")).toEqual([]);
  });

  it("keeps Plane in a leaf module, one that imports nothing from src/", () => {
    const home = [...graph.keys()].filter((file) =>
      /^export\s+(?:interface|type|class)\s+Plane\b/m.test(readFileSync(join(ROOT, file), "utf8"))
    );
    expect(home, `Plane is declared in ${home.join(", ") || "no module"}`).toHaveLength(1);
    const imports = graph.get(home[0]) ?? [];
    expect(imports, `${home[0]} imports ${imports.join(", ")}`).toEqual([]);
  });
});
