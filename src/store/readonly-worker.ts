/**
 * Worker entry for `skulk sql` (readonly.ts): opens the state database read-only at the SQLite level, with an
 * authorizer that allows reads only, runs one statement and posts its rows back; readonly.ts bounds its time.
 */
/// <reference lib="deno.worker" />
import { runReadOnly, type WorkerRequest } from "./readonly-conn.ts";

self.onmessage = (e: MessageEvent<WorkerRequest>) => self.postMessage(runReadOnly(e.data));
