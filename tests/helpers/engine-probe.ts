/**
 * What the client-API tests share: a tool with a schema the tiny model must fill, the official clients pointed
 * at a node, and probes of a node's own llama-server (its port from the engine-process table, whether a slot
 * is generating).
 */
import Anthropic from "@anthropic-ai/sdk";
import { Ollama } from "ollama";
import OpenAI from "openai";
import { expect } from "vitest";
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

/** Arguments (JSON text or parsed) that only a grammar holding the model to WEATHER's schema fills validly. */
export function expectWeatherArgs(given: string | Record<string, unknown>) {
  const args = typeof given === "string" ? JSON.parse(given) : given;
  expect(["Paris", "Oslo"]).toContain(args.city);
  expect(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7).toBe(true);
  expect(Object.keys(args).sort()).toEqual(["city", "days"]);
}

/** WEATHER as a Responses function tool. */
export const WEATHER_FN = {
  type: "function" as const,
  name: WEATHER.function.name,
  description: WEATHER.function.description,
  parameters: WEATHER.function.parameters,
  strict: true,
};

/** The three official clients against a node, without retries (a retry would hide a refusal). */
export function sdkClients(url: string, timeout: number) {
  return {
    openai: new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, timeout }),
    anthropic: new Anthropic({ baseURL: url, apiKey: "unused", maxRetries: 0, timeout }),
    ollama: new Ollama({ host: `${url}/ollama` }),
  };
}

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
