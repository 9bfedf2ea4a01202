/**
 * Logging: one logtape configuration for the process, JSON lines when stderr is not a terminal
 * (or when asked), readable lines on a terminal. Modules take a logger with `logger("api")`.
 */
import {
  configure,
  getAnsiColorFormatter,
  getLogger,
  getStreamSink,
  type Logger,
  type LogLevel,
  type LogRecord,
  reset,
} from "@logtape/logtape";
import { z } from "zod";

export const LogLevelSchema = z.enum(["trace", "debug", "info", "warning", "error", "fatal"]);
export const LogFormatSchema = z.enum(["auto", "json", "pretty"]);
export type LogFormat = z.infer<typeof LogFormatSchema>;

/** A message with its values in place: strings bare (no quotes), anything else as JSON. */
export function renderMessage(parts: readonly unknown[]): string {
  return parts.map((p, i) => (i % 2 === 0 || typeof p === "string" ? String(p) : JSON.stringify(p))).join("");
}

/** One JSON object per line: time, level, logger, the rendered message, then the record's properties. */
export function jsonLine(r: LogRecord): string {
  return JSON.stringify({
    ts: new Date(r.timestamp).toISOString(),
    level: r.level,
    logger: r.category.join("."),
    msg: renderMessage(r.message),
    ...r.properties,
  }) + "\n";
}

export async function setupLogging(level: LogLevel, format: LogFormat): Promise<void> {
  const json = format === "json" || (format === "auto" && !Deno.stderr.isTerminal());
  await reset();
  await configure({
    sinks: {
      stderr: getStreamSink(Deno.stderr.writable, {
        formatter: json ? jsonLine : getAnsiColorFormatter({ value: "bare" }),
      }),
    },
    loggers: [
      { category: ["skulk"], lowestLevel: level, sinks: ["stderr"] },
      { category: ["logtape", "meta"], lowestLevel: "warning", sinks: ["stderr"] },
    ],
  });
}

export function logger(...category: string[]): Logger {
  return getLogger(["skulk", ...category]);
}
