/**
 * What the client-API tests share: a tool with a schema the tiny model must fill, and probes of a node's own
 * llama-server (its loopback port from the engine-process table, whether a slot is generating).
 */
import { type Daemon, skulk } from "./daemon.ts";

/** A function tool whose arguments a forced call must fit (enums and bounds the schema can check). */
export const WEATHER = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "Current weather for a city",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", enum: ["Paris", "Oslo"] },
        days: { type: "integer", minimum: 1, maximum: 7 },
      },
      required: ["city", "days"],
      additionalProperties: false,
    },
  },
};

/** The loopback port of the node's llama-server, from its engine-process table. */
export async function enginePort(node: Daemon): Promise<number> {
  const r = await skulk([
    "sql",
    "--data-dir",
    node.dataDir,
    "--json",
    "SELECT port FROM engine_processes WHERE kind = 'llama-server'",
  ]);
  return Number((JSON.parse(r.stdout) as { port: number }[])[0].port);
}

/** Polls the engine's slots until one is (or none is) generating; false when that never happened. */
export async function engineBusy(port: number, want: boolean): Promise<boolean> {
  for (let i = 0; i < 400; i++) {
    const slots = await (await fetch(`http://127.0.0.1:${port}/slots`)).json() as {
      is_processing: boolean;
    }[];
    if (slots.some((s) => s.is_processing) === want) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}
