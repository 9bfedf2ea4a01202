/**
 * Translates llama-server's OpenAI SSE stream into upstream Skulk's framing: `: command_id`, chunks with
 * `object: "chat.completion"` and the command id, each tool call whole in one delta, usage on the final
 * chunk, `: generation_stats`, then `data: [DONE]`. Pure: feed it data payloads, it returns SSE text.
 */
import { withAcceptance } from "../engines/speculation.ts";
import { newToolCallId, toolCallFromText } from "./forced-tools.ts";

interface ToolCallAcc {
  index: number;
  id: string;
  name: string;
  arguments: string;
}

interface UpstreamChunk {
  choices?: {
    index?: number;
    delta?: {
      content?: string | null;
      reasoning_content?: string | null;
      tool_calls?: { index?: number; id?: string; function?: { name?: string; arguments?: string } }[];
    };
    finish_reason?: string | null;
    logprobs?: unknown;
  }[];
  usage?: Record<string, unknown> | null;
  timings?: {
    prompt_n?: number;
    predicted_n?: number;
    prompt_per_second?: number;
    predicted_per_second?: number;
    /** Speculative decoding: tokens drafted and how many of them the model accepted. */
    draft_n?: number;
    draft_n_accepted?: number;
  };
}

export function sseData(obj: unknown): string {
  return `data: ${JSON.stringify(obj)}\n\n`;
}

/**
 * llama-server's plain content delta, by far its most common chunk: the content's JSON string literal is
 * captured as it is, so it can be spliced into our frame without parsing and re-serialising the chunk.
 */
const PLAIN_CONTENT =
  /^\{"choices":\[\{"finish_reason":null,"index":0,"delta":\{"content":("(?:[^"\\]|\\.)*")\}\}\],"created":\d+,"id":"[^"\\]*","model":"(?:[^"\\]|\\.)*","system_fingerprint":"[^"\\]*","object":"chat\.completion\.chunk"\}$/;

export class ChatStreamTranslator {
  readonly #tools = new Map<number, ToolCallAcc>();
  #finish: string | null = null;
  #usage: Record<string, unknown> | null = null;
  #timings: UpstreamChunk["timings"] | null = null;
  #done = false;
  /** Set for a forced tool call: the content is the call's JSON, held back and sent as one tool call. */
  #forcedText: string | null = null;

  /** The text around a plain content delta's string literal, built once per stream. */
  readonly #plainHead: string;
  readonly #plainTail = `},"logprobs":null,"finish_reason":null}],"usage":null,"service_tier":null}\n\n`;

  constructor(
    readonly commandId: string,
    readonly model: string,
    readonly created = Math.floor(Date.now() / 1000),
  ) {
    this.#plainHead =
      `data: {"id":${JSON.stringify(commandId)},"object":"chat.completion","created":${created},` +
      `"model":${JSON.stringify(model)},"choices":[{"index":0,"delta":{"role":"assistant","content":`;
  }

  /** The engine's text is a forced tool call's JSON (see forced-tools.ts): hold it and send it as the call. */
  holdContentAsToolCall(): this {
    this.#forcedText = "";
    return this;
  }

  /** True once the closing frames were produced: nothing more will be sent. */
  get done(): boolean {
    return this.#done;
  }

  /** The engine's usage and timings, once its last chunks carried them (the node's metrics read them). */
  get usage(): Record<string, unknown> | null {
    return this.#usage;
  }
  get timings(): UpstreamChunk["timings"] | null {
    return this.#timings;
  }

  head(): string {
    return `: keep-alive\n\n: command_id ${this.commandId}\n\n`;
  }

  #chunk(
    delta: Record<string, unknown>,
    finish: string | null,
    logprobs: unknown = null,
    usage: unknown = null,
  ) {
    return sseData({
      id: this.commandId,
      object: "chat.completion",
      created: this.created,
      model: this.model,
      choices: [{ index: 0, delta: { role: "assistant", ...delta }, logprobs, finish_reason: finish }],
      usage,
      service_tier: null,
    });
  }

  /** One upstream `data:` payload (without the prefix); returns the SSE text to send now. */
  push(payload: string): string {
    if (this.#done) return "";
    if (payload.trim() === "[DONE]") return this.end();
    const plain = this.#forcedText === null ? PLAIN_CONTENT.exec(payload) : null;
    if (plain) return plain[1] === '""' ? "" : this.#plainHead + plain[1] + this.#plainTail;
    let chunk: UpstreamChunk & { error?: unknown };
    try {
      chunk = JSON.parse(payload);
    } catch {
      return "";
    }
    if (chunk.error) {
      this.#done = true;
      return sseData({ error: chunk.error }) + "data: [DONE]\n\n";
    }
    if (chunk.usage) this.#usage = chunk.usage;
    if (chunk.timings) this.#timings = chunk.timings;
    let out = "";
    for (const choice of chunk.choices ?? []) {
      const d = choice.delta ?? {};
      for (const tc of d.tool_calls ?? []) {
        const idx = tc.index ?? 0;
        const acc = this.#tools.get(idx) ?? { index: idx, id: "", name: "", arguments: "" };
        if (tc.id) acc.id = tc.id;
        if (tc.function?.name) acc.name += tc.function.name;
        if (tc.function?.arguments) acc.arguments += tc.function.arguments;
        this.#tools.set(idx, acc);
      }
      const delta: Record<string, unknown> = {};
      if (d.content && this.#forcedText !== null) this.#forcedText += d.content;
      else if (d.content) delta.content = d.content;
      if (d.reasoning_content) delta.reasoning_content = d.reasoning_content;
      if (Object.keys(delta).length) out += this.#chunk(delta, null, choice.logprobs ?? null);
      if (choice.finish_reason) this.#finish = choice.finish_reason;
    }
    return out;
  }

  /** The closing frames: tool calls whole, the finish chunk with usage, stats, `[DONE]`. */
  end(): string {
    if (this.#done) return "";
    this.#done = true;
    let out = "";
    const usage = withAcceptance(this.#usage, this.#timings) ?? null;
    const forced = this.#forcedText !== null ? toolCallFromText(this.#forcedText, newToolCallId()) : null;
    if (forced) {
      this.#tools.set(0, {
        index: 0,
        id: forced.id,
        name: forced.function.name,
        arguments: forced.function.arguments,
      });
    } else if (this.#forcedText) {
      // Cut short (max_tokens): the partial JSON goes out as text so the client sees what came.
      out += this.#chunk({ content: this.#forcedText }, null);
    }
    if (this.#tools.size > 0) {
      const calls = [...this.#tools.values()].sort((a, b) => a.index - b.index).map((t) => ({
        id: t.id || `call_${t.index}`,
        index: t.index,
        type: "function",
        function: { id: t.id || `call_${t.index}`, name: t.name, arguments: t.arguments },
      }));
      out += this.#chunk({ tool_calls: calls }, "tool_calls", null, usage);
    } else {
      out += this.#chunk({ content: "" }, this.#finish ?? "stop", null, usage);
    }
    const t = this.#timings;
    if (t) {
      out += `: generation_stats ${
        JSON.stringify({
          prompt_tps: t.prompt_per_second ?? null,
          generation_tps: t.predicted_per_second ?? null,
          prompt_tokens: t.prompt_n ?? null,
          generation_tokens: t.predicted_n ?? null,
          ...(t.draft_n ? { draft_tokens: t.draft_n, draft_accepted: t.draft_n_accepted ?? 0 } : {}),
        })
      }\n\n`;
    }
    return out + "data: [DONE]\n\n";
  }

  /** An error that ends the stream (engine died, stalled): one error event, then `[DONE]`. */
  fail(message: string, code = 503): string {
    if (this.#done) return "";
    this.#done = true;
    return sseErrorEvent(message, code);
  }
}

/** Upstream's SSE error framing: one error event, then `[DONE]`. */
export function sseErrorEvent(message: string, code = 503): string {
  return sseData({ error: { message, type: "ServiceUnavailable", param: null, code } }) + "data: [DONE]\n\n";
}

/** Splits an SSE byte stream into `data:` payloads, across chunk boundaries. */
export class SseLineReader {
  #buf = "";
  readonly #dec = new TextDecoder();

  push(bytes: Uint8Array): string[] {
    this.#buf += this.#dec.decode(bytes, { stream: true });
    const out: string[] = [];
    let nl: number;
    while ((nl = this.#buf.indexOf("\n")) >= 0) {
      const line = this.#buf.slice(0, nl).replace(/\r$/, "");
      this.#buf = this.#buf.slice(nl + 1);
      if (line.startsWith("data:")) out.push(line.slice(5).trimStart());
    }
    return out;
  }
}
