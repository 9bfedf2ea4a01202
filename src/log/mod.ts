/**
 * Logging: one logtape configuration for the process, JSON lines when stderr is not a terminal
 * (or when asked), readable lines on a terminal. Modules take a logger with `logger("api")`.
 */
import {
  ansiColorFormatter,
  configure,
  getLogger,
  getStreamSink,
  jsonLinesFormatter,
  type Logger,
  type LogLevel,
  reset,
} from "@logtape/logtape";
import { z } from "zod";

export const LogLevelSchema = z.enum(["trace", "debug", "info", "warning", "error", "fatal"]);
export const LogFormatSchema = z.enum(["auto", "json", "pretty"]);
export type LogFormat = z.infer<typeof LogFormatSchema>;

export async function setupLogging(level: LogLevel, format: LogFormat): Promise<void> {
  const json = format === "json" || (format === "auto" && !Deno.stderr.isTerminal());
  await reset();
  await configure({
    sinks: {
      stderr: getStreamSink(Deno.stderr.writable, {
        formatter: json ? jsonLinesFormatter : ansiColorFormatter,
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
