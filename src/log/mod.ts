/**
 * Logging: one logtape configuration for the process, JSON lines when stderr is not a terminal
 * (or when asked), readable lines on a terminal; the same JSON lines to a rotating file and a log store.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import {
  configure,
  getAnsiColorFormatter,
  getLogger,
  getStreamSink,
  type Logger,
  type LogLevel,
  type LogRecord,
  reset,
  type Sink,
  withContext,
} from "@logtape/logtape";
import { z } from "zod";
import { RotatingFile } from "./file.ts";
import { type IngestFormat, Shipper, type ShipStats } from "./ship.ts";

export const LogLevelSchema = z.enum(["trace", "debug", "info", "warning", "error", "fatal"]);
export const LogFormatSchema = z.enum(["auto", "json", "pretty"]);
export type LogFormat = z.infer<typeof LogFormatSchema>;

/** A message with its values in place: strings bare (no quotes), anything else as JSON. */
export function renderMessage(parts: readonly unknown[]): string {
  return parts.map((p, i) => (i % 2 === 0 || typeof p === "string" ? String(p) : JSON.stringify(p))).join("");
}

/**
 * Fields every line carries: the node's id, known once the daemon has loaded its identity (a few lines
 * before it have none). One per process, as logtape's configuration is.
 */
export const lineFields: { nodeId: string | null } = { nodeId: null };

/**
 * One JSON object per line: time, level, logger, the rendered message, the node's id, then the record's
 * properties (which include the implicit context: the request id of the request being served).
 */
export function jsonLine(r: LogRecord): string {
  return JSON.stringify({
    ts: new Date(r.timestamp).toISOString(),
    level: r.level,
    logger: r.category.join("."),
    msg: renderMessage(r.message),
    ...(lineFields.nodeId ? { nodeId: lineFields.nodeId } : {}),
    ...r.properties,
  }) + "\n";
}

export interface LogFileOptions {
  path: string;
  maxBytes: number;
  /** Files kept in all: the one being written and the rotated ones (`.1` newest). */
  files: number;
}

export interface IngestOptions {
  url: string;
  format: IngestFormat;
  token: string | null;
  bufferLines: number;
  batchLines: number;
  intervalMs: number;
}

export interface LogOutputs {
  /** False: no stderr sink (tests that configure logging twice: disposing closes stderr's stream). */
  stderr?: boolean;
  file?: LogFileOptions | null;
  ingest?: IngestOptions | null;
}

/** The process's outputs besides stderr, as diagnostics and metrics read them. */
let current: { file: LogFileOptions | null; shipper: Shipper | null } = { file: null, shipper: null };

export function logFile(): LogFileOptions | null {
  return current.file;
}

export function shippingStats(): ShipStats | null {
  return current.shipper?.stats() ?? null;
}

/** A sink that hands each record to the shipper as its JSON line; closing it sends what is buffered. */
function shipSink(shipper: Shipper): Sink & AsyncDisposable {
  const sink = (r: LogRecord) => {
    const json = jsonLine(r).trimEnd();
    shipper.push({ json, timeNs: `${Math.round(r.timestamp)}000000`, level: r.level });
  };
  return Object.assign(sink, { [Symbol.asyncDispose]: () => shipper.close() });
}

export async function setupLogging(
  level: LogLevel,
  format: LogFormat,
  outputs: LogOutputs = {},
): Promise<void> {
  const json = format === "json" || (format === "auto" && !Deno.stderr.isTerminal());
  await reset();
  const file = outputs.file ?? null;
  const shipper = outputs.ingest
    ? new Shipper({
      ...outputs.ingest,
      labels: (): Record<string, string> => (lineFields.nodeId ? { nodeId: lineFields.nodeId } : {}),
      onStateChange: (ok, error) => {
        // Logged through the logger like anything else: the line is shipped once the store is back.
        if (ok) getLogger(["skulk", "log"]).info("shipping logs works again");
        else {getLogger(["skulk", "log"]).warn("shipping logs failed: {error}; retrying with backoff", {
            error,
          });}
      },
    })
    : null;
  const sinks: Record<string, Sink> = {};
  if (outputs.stderr !== false) {
    sinks.stderr = getStreamSink(Deno.stderr.writable, {
      formatter: json ? jsonLine : getAnsiColorFormatter({ value: "bare" }),
    });
  }
  if (file) {
    const f = new RotatingFile(file.path, file.maxBytes, file.files);
    sinks.file = Object.assign((r: LogRecord) => f.write(jsonLine(r)), { [Symbol.dispose]: () => f.close() });
  }
  if (shipper) sinks.ship = shipSink(shipper);
  current = { file, shipper };
  await configure({
    sinks,
    contextLocalStorage: new AsyncLocalStorage<Record<string, unknown>>(),
    loggers: [
      { category: ["skulk"], lowestLevel: level, sinks: Object.keys(sinks) },
      { category: ["logtape", "meta"], lowestLevel: "warning", sinks: sinks.stderr ? ["stderr"] : [] },
    ],
  });
}

/** Runs `f` with `fields` on every line logged within it (a request's id, a task's id). */
export function withLogContext<T>(fields: Record<string, unknown>, f: () => T): T {
  return withContext(fields, f);
}

export function logger(...category: string[]): Logger {
  return getLogger(["skulk", ...category]);
}
