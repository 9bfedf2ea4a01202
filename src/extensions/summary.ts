/**
 * The completed answer of a chat-shaped request, read from what its client is sent: each API's JSON reply,
 * SSE events or NDJSON lines folded into text, reasoning, stop reason and usage (pure), and a body tap that
 * folds a response as it passes and reports once when it ends, without holding a byte back.
 */
import { SseLineReader } from "../serving/chat-stream.ts";
import type { ChatApi, ChatResponse, ChatUsage } from "./api.ts";

/** Text kept per answer; beyond it the answer is reported cut (a bound on what one request may hold). */
export const MAX_TEXT = 4 << 20;
/** A non-streamed reply larger than this is reported without its content. */
export const MAX_JSON_BYTES = 16 << 20;

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? v as Obj : undefined;
const arr = (v: unknown): unknown[] => Array.isArray(v) ? v : [];
const str = (v: unknown): string | undefined => typeof v === "string" ? v : undefined;
const num = (v: unknown): number | undefined => typeof v === "number" && Number.isFinite(v) ? v : undefined;

/** An answer being assembled. */
export interface Fold {
  text: string;
  reasoning: string;
  finishReason: string | null;
  prompt?: number;
  completion?: number;
  error: string | null;
}

export const newFold = (): Fold => ({ text: "", reasoning: "", finishReason: null, error: null });

function add(f: Fold, field: "text" | "reasoning", piece: unknown): void {
  const s = str(piece);
  if (s && f[field].length < MAX_TEXT) f[field] += s.slice(0, MAX_TEXT - f[field].length);
}

function usageOf(f: Fold, u: unknown, prompt: string, completion: string): void {
  const o = obj(u);
  if (!o) return;
  f.prompt = num(o[prompt]) ?? f.prompt;
  f.completion = num(o[completion]) ?? f.completion;
}

/** The error message of any of the APIs' error bodies: `{error: {message}}`, `{error: "..."}`, `{message}`. */
function errorMessage(v: Obj): string | undefined {
  return str(obj(v.error)?.message) ?? str(v.error) ?? str(v.message);
}

/** Folds one streamed payload (an SSE data line's JSON, or an NDJSON line) of `api` into `f`. */
export function foldChunk(api: ChatApi, f: Fold, payload: unknown): void {
  const p = obj(payload);
  if (!p) return;
  switch (api) {
    case "chat_completions": {
      if (p.error) f.error = errorMessage(p) ?? "error";
      const choice = obj(arr(p.choices)[0]);
      const delta = obj(choice?.delta);
      add(f, "text", delta?.content);
      add(f, "reasoning", delta?.reasoning_content);
      f.finishReason = str(choice?.finish_reason) ?? f.finishReason;
      usageOf(f, p.usage, "prompt_tokens", "completion_tokens");
      return;
    }
    case "messages":
      switch (p.type) {
        case "message_start":
          return usageOf(f, obj(p.message)?.usage, "input_tokens", "output_tokens");
        case "content_block_delta": {
          const d = obj(p.delta);
          if (d?.type === "text_delta") add(f, "text", d.text);
          else if (d?.type === "thinking_delta") add(f, "reasoning", d.thinking);
          return;
        }
        case "message_delta":
          f.finishReason = str(obj(p.delta)?.stop_reason) ?? f.finishReason;
          return usageOf(f, p.usage, "input_tokens", "output_tokens");
        case "error":
          f.error = errorMessage(p) ?? "error";
          return;
      }
      return;
    case "responses":
      switch (p.type) {
        case "response.output_text.delta":
          return add(f, "text", p.delta);
        case "response.reasoning_summary_text.delta":
        case "response.reasoning_text.delta":
          return add(f, "reasoning", p.delta);
        case "response.completed":
        case "response.incomplete":
        case "response.failed": {
          const r = obj(p.response);
          f.finishReason = str(obj(r?.incomplete_details)?.reason) ?? str(r?.status) ?? f.finishReason;
          if (p.type === "response.failed") f.error = str(obj(r?.error)?.message) ?? "response failed";
          return usageOf(f, r?.usage, "input_tokens", "output_tokens");
        }
        case "error":
          f.error = errorMessage(p) ?? "error";
          return;
      }
      return;
    case "ollama_chat":
      if (p.error) f.error = errorMessage(p) ?? "error";
      add(f, "text", obj(p.message)?.content);
      add(f, "reasoning", obj(p.message)?.thinking);
      if (p.done === true) {
        f.finishReason = str(p.done_reason) ?? f.finishReason;
        f.prompt = num(p.prompt_eval_count) ?? f.prompt;
        f.completion = num(p.eval_count) ?? f.completion;
      }
      return;
  }
}

/** Folds a whole (non-streamed) reply of `api` into `f`; an error status's body gives the error. */
export function foldReply(api: ChatApi, f: Fold, status: number, body: unknown): void {
  const b = obj(body);
  if (!b) {
    if (status >= 400) f.error = `status ${status}`;
    return;
  }
  if (status >= 400) {
    f.error = errorMessage(b) ?? `status ${status}`;
    return;
  }
  switch (api) {
    case "chat_completions": {
      const choice = obj(arr(b.choices)[0]);
      const m = obj(choice?.message);
      add(f, "text", m?.content);
      add(f, "reasoning", m?.reasoning_content);
      f.finishReason = str(choice?.finish_reason) ?? null;
      return usageOf(f, b.usage, "prompt_tokens", "completion_tokens");
    }
    case "messages":
      for (const block of arr(b.content).map(obj)) {
        if (block?.type === "text") add(f, "text", block.text);
        else if (block?.type === "thinking") add(f, "reasoning", block.thinking);
      }
      f.finishReason = str(b.stop_reason) ?? null;
      return usageOf(f, b.usage, "input_tokens", "output_tokens");
    case "responses":
      for (const item of arr(b.output).map(obj)) {
        if (item?.type === "message") {
          for (const part of arr(item.content).map(obj)) {
            if (part?.type === "output_text") add(f, "text", part.text);
          }
        } else if (item?.type === "reasoning") {
          for (const part of [...arr(item.content), ...arr(item.summary)].map(obj)) {
            add(f, "reasoning", part?.text);
          }
        }
      }
      f.finishReason = str(obj(b.incomplete_details)?.reason) ?? str(b.status) ?? null;
      return usageOf(f, b.usage, "input_tokens", "output_tokens");
    case "ollama_chat":
      return foldChunk(api, f, b);
  }
}

export function summaryOf(api: ChatApi, stream: boolean, status: number, f: Fold): ChatResponse {
  const usage: ChatUsage | null = f.prompt === undefined && f.completion === undefined ? null : {
    prompt_tokens: f.prompt ?? 0,
    completion_tokens: f.completion ?? 0,
    total_tokens: (f.prompt ?? 0) + (f.completion ?? 0),
  };
  return {
    api,
    stream,
    status,
    text: f.text,
    reasoning: f.reasoning,
    finishReason: f.finishReason,
    usage,
    error: f.error ?? (status >= 400 ? `status ${status}` : null),
  };
}

/** Splits NDJSON bytes into lines as they come. */
class LineReader {
  #buf = "";
  readonly #dec = new TextDecoder();
  push(bytes: Uint8Array): string[] {
    this.#buf += this.#dec.decode(bytes, { stream: true });
    const lines = this.#buf.split("\n");
    this.#buf = lines.pop() ?? "";
    return lines.filter((l) => l.trim() !== "");
  }
  end(): string[] {
    const rest = this.#buf + this.#dec.decode();
    this.#buf = "";
    return rest.trim() ? [rest] : [];
  }
}

/**
 * The same response, its body passed through unchanged while it is folded; `done` is called exactly once,
 * after the last byte went to the client (or the client went away, or the body failed), on a later task.
 */
export function tapResponse(res: Response, api: ChatApi, done: (summary: ChatResponse) => void): Response {
  const type = res.headers.get("content-type") ?? "";
  const mode = type.includes("text/event-stream") ? "sse" : type.includes("ndjson") ? "ndjson" : "json";
  const f = newFold();
  let reported = false;
  const report = (failure?: string) => {
    if (reported) return;
    reported = true;
    if (failure && !f.error) f.error = failure;
    const summary = summaryOf(api, mode !== "json", res.status, f);
    // A later task: whatever the hooks do, the client's last bytes are already on their way.
    setTimeout(() => done(summary), 0);
  };
  if (!res.body) {
    foldReply(api, f, res.status, undefined);
    report();
    return res;
  }
  const sse = new SseLineReader();
  const lines = new LineReader();
  const parts: Uint8Array[] = [];
  let bytes = 0;
  const fold = (payloads: string[]) => {
    for (const p of payloads) {
      if (p === "[DONE]") continue;
      try {
        foldChunk(api, f, JSON.parse(p));
      } catch { /* not JSON (a keep-alive, a comment): nothing to fold */ }
    }
  };
  const feed = (chunk: Uint8Array) => {
    if (mode === "sse") fold(sse.push(chunk));
    else if (mode === "ndjson") fold(lines.push(chunk));
    else if ((bytes += chunk.length) <= MAX_JSON_BYTES) parts.push(chunk);
  };
  const finish = () => {
    if (mode === "ndjson") fold(lines.end());
    if (mode === "json") {
      if (bytes > MAX_JSON_BYTES) return report(`the reply (${bytes} bytes) was too large to read back`);
      const all = new Uint8Array(bytes);
      let at = 0;
      for (const p of parts) (all.set(p, at), at += p.length);
      let body: unknown;
      try {
        body = JSON.parse(new TextDecoder().decode(all));
      } catch { /* not JSON: only the status speaks */ }
      foldReply(api, f, res.status, body);
    }
    report();
  };
  const reader = res.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      let next: ReadableStreamReadResult<Uint8Array>;
      try {
        next = await reader.read();
      } catch (e) {
        report(`the answer failed: ${(e as Error).message}`);
        controller.error(e);
        return;
      }
      if (next.done) {
        controller.close();
        try {
          finish();
        } catch (e) {
          report(`the answer could not be read back: ${(e as Error).message}`);
        }
        return;
      }
      controller.enqueue(next.value);
      try {
        feed(next.value);
      } catch { /* a fold never stops the client's stream */ }
    },
    cancel(reason) {
      report("the client went away before the answer ended");
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
}
