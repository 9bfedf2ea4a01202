/**
 * Readings of the committed fixture machines (tests/fixtures/sysfs/<machine>/): a collector rooted at
 * the tree, typing the addresses recorded in its addresses.json, as a Linux node.
 */
import { type CollectOptions, Collector } from "../../src/telemetry/collect.ts";
import type { Address } from "../../src/telemetry/network.ts";
import type { NodeReading } from "../../src/telemetry/reading.ts";

export const FIXTURE_SYSFS = new URL("../fixtures/sysfs/", import.meta.url).pathname;

export function fixtureAddresses(machine: string): Address[] {
  return JSON.parse(Deno.readTextFileSync(`${FIXTURE_SYSFS}${machine}/addresses.json`)) as Address[];
}

export function fixtureOptions(machine: string, addresses = fixtureAddresses(machine)): CollectOptions {
  const root = `${FIXTURE_SYSFS}${machine}`;
  return {
    nodeId: machine,
    friendlyName: machine,
    apiAddress: null,
    worker: true,
    modelsDir: root,
    root,
    addresses,
    os: "linux",
  };
}

/** One reading; with `twice`, the second of two from the same collector (CPU busy share needs a previous one). */
export async function fixtureReading(
  machine: string,
  twice = false,
  addresses?: Address[],
): Promise<NodeReading> {
  const c = new Collector(fixtureOptions(machine, addresses));
  try {
    if (twice) await c.read();
    return await c.read();
  } finally {
    c.close();
  }
}
