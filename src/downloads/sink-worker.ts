/**
 * Worker entry for a download's disk side (disk-writer.ts), driven by sink.ts: buffers arrive transferred, are
 * written and hashed here, and go back for reuse, so the thread reading the socket only copies bytes.
 */
/// <reference lib="deno.worker" />
import { diskServer, type SinkRequest } from "./disk-writer.ts";

const serve = diskServer((r) => self.postMessage(r, r.type === "written" ? [r.buf] : []));
self.onmessage = (e: MessageEvent<SinkRequest>) => serve(e.data);
