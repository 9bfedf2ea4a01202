/**
 * docs/configuration.md, rendered from the settings table (pure): the fixed prose around one row per
 * setting. scripts/embed.ts writes it and `--check` fails when the page on disk differs.
 */
import { scopeOf, type Setting, SETTINGS } from "./schema.ts";

const INTRO = `# Configuration

<!-- Generated from SETTINGS in src/config/schema.ts by \`make embed\` (scripts/embed.ts); edit the table, not this page. -->

Every setting is one row of the table in \`src/config/schema.ts\`, and this page is generated from it. A value
comes from its flag (on \`skulk run\`), else its environment variable (where two are named, the first one set
wins), else \`skulk.yaml\` (\`--config\`, \`SKULK_CONFIG\`, default \`./skulk.yaml\`; the dotted key is the YAML path,
\`api.port\` is \`api: {port: …}\`), else the default. A bad value exits with code 2 naming the key, where the
value came from and why; secrets are shown as \`(hidden)\` there and in \`GET /config\`. No part of the program
reads these variables itself: each reaches its user through the resolved config.

The scope column says who holds a value. **node**: this node alone (its flags, environment and \`skulk.yaml\`;
\`PUT /config\` writes this node's file). **cluster**: every node must agree on it, so \`PUT /config\` on any node
makes it a \`ClusterConfigChanged\` event that the master indexes and every node applies over its own flags,
environment and file, and keeps across restarts ([cluster.md](cluster.md#settings)).
`;

const CLUSTER_KEY = `## The cluster key

Which key signs peer requests is decided at start, in this order (details in
[cluster.md](cluster.md#trust-model)):

1. \`cluster.secret\` when set.
2. \`cluster.join\`: the token's secret, kept in \`<data-dir>/cluster.json\` (mode 0600) with its namespace and
   peer, so later starts need no token.
3. A secret kept in \`<data-dir>/cluster.json\` by an earlier start.
4. With \`api.key\` set: a new secret of 32 random bytes, kept there; the log says how other nodes join.
5. Otherwise the namespace-derived key: the zero-config default, which trusts everyone on the LAN.

\`skulk cluster token [--data-dir DIR] [--address host:port]\` prints the join token from the data dir (the
daemon may be running or stopped); with \`cluster.secret\` set it carries that secret.

To leave a cluster joined by token (or to drop a generated secret), stop the node and move
\`<data-dir>/cluster.json\` away; the next start decides again.
`;

const cell = (s: string) => s.replaceAll("|", "\\|");

function flagCell(s: Setting<unknown>): string {
  if (s.flagText) return s.flagText;
  return s.flag ? `\`--${s.flag.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase())}\`` : "";
}

function envCell(s: Setting<unknown>): string {
  const names = [s.env, ...(s.envAliases ?? [])].filter((n): n is string => n !== undefined);
  const list = Array.isArray(s.default) ? " (comma-separated)" : "";
  return names.map((n) => `\`${n}\``).join(", ") + list;
}

/** The default as a reader wants it; a host-dependent default must say in words what it is. */
export function defaultCell(s: Setting<unknown>): string {
  if (s.defaultText) return s.defaultText;
  const d = s.default;
  if (typeof d === "function") {
    throw new Error(`${s.key}: a default computed from the host needs defaultText`);
  }
  if (d === null || (Array.isArray(d) && d.length === 0)) return "none";
  if (typeof d === "string") return `\`${d}\``;
  return String(d);
}

/** The whole page. */
export function configurationDoc(): string {
  const rows = (Object.values(SETTINGS) as Setting<unknown>[]).map((s) => {
    const cells = [
      `\`${s.key}\``,
      scopeOf(s),
      flagCell(s),
      envCell(s),
      cell(defaultCell(s)),
      cell(s.description),
    ];
    return `|${cells.map((c) => (c ? ` ${c} ` : " ")).join("|")}|`;
  });
  const table = [
    "| key | scope | flag | environment | default | what it sets |",
    "|---|---|---|---|---|---|",
    ...rows,
  ].join("\n");
  return `${INTRO}\n${table}\n\n${CLUSTER_KEY}`;
}
