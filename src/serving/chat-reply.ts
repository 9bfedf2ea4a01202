/**
 * A whole Chat Completions reply assembled from llama-server's streamed chunks, in the shape its non-streamed
 * answer has (keys in its order: nlohmann's objects sort them). Pure.
 */

interface ToolCallDelta {
  index?: number;
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string };
}

interface Chunk {
  id?: string;
  created?: number;
  model?: string;
  system_fingerprint?: string;
  choices?: {
    index?: number;
    delta?: { content?: string | null; reasoning_content?: string | null; tool_calls?: ToolCallDelta[] };
    finish_reason?: string | null;
    logprobs?: { content?: unknown[] } | null;
  }[];
  usage?: unknown;
  timings?: unknown;
  __verbose?: unknown;
  error?: { message?: string; type?: string; code?: number };
}

interface ChoiceState {
  content: string;
  reasoning: string;
  calls: Map<number, { id: string; name: string; args: string }>;
  finish: string | null;
  logprobs: unknown[] | null;
}

/** What the engine streamed as an error chunk: the caller maps it like an engine's error answer. */
export class StreamedEngineError extends Error {
  constructor(readonly body: { message?: string; type?: string; code?: number }) {
    super(body.message ?? "the engine reported an error");
  }
}

/**
 * Collects `data:` payloads (without the prefix) of one chat stream and gives the reply the engine would have
 * answered unstreamed: per choice the joined content, reasoning and tool calls, the finish reason, and the
 * last usage, timings and verbose record.
 */
export class ChatReplyAssembler {
  #head: Chunk = {};
  #choices = new Map<number, ChoiceState>();
  #usage: unknown = undefined;
  #timings: unknown = undefined;
  #verbose: unknown = undefined;
  #done = false;

  /** True once `[DONE]` was read. Throws StreamedEngineError on an error chunk. */
  get done(): boolean {
    return this.#done;
  }

  push(payload: string): void {
    if (payload.trim() === "[DONE]") {
      this.#done = true;
      return;
    }
    let chunk: Chunk;
    try {
      chunk = JSON.parse(payload);
    } catch {
      return;
    }
    if (chunk.error) throw new StreamedEngineError(chunk.error);
    for (const k of ["id", "created", "model", "system_fingerprint"] as const) {
      if (chunk[k] !== undefined) (this.#head as Record<string, unknown>)[k] = chunk[k];
    }
    if (chunk.usage) this.#usage = chunk.usage;
    if (chunk.timings) this.#timings = chunk.timings;
    if (chunk.__verbose) this.#verbose = chunk.__verbose;
    for (const c of chunk.choices ?? []) {
      const index = c.index ?? 0;
      let s = this.#choices.get(index);
      if (!s) {
        s = { content: "", reasoning: "", calls: new Map(), finish: null, logprobs: null };
        this.#choices.set(index, s);
      }
      const d = c.delta ?? {};
      if (d.content) s.content += d.content;
      if (d.reasoning_content) s.reasoning += d.reasoning_content;
      for (const tc of d.tool_calls ?? []) {
        const at = tc.index ?? 0;
        const call = s.calls.get(at) ?? { id: "", name: "", args: "" };
        call.id ||= tc.id ?? "";
        call.name += tc.function?.name ?? "";
        call.args += tc.function?.arguments ?? "";
        s.calls.set(at, call);
      }
      if (c.logprobs?.content) (s.logprobs ??= []).push(...c.logprobs.content);
      if (c.finish_reason) s.finish = c.finish_reason;
    }
  }

  reply(): Record<string, unknown> {
    const choices = [...this.#choices.entries()].sort(([a], [b]) => a - b).map(([index, s]) => {
      const message: Record<string, unknown> = { content: s.content };
      if (s.reasoning) message.reasoning_content = s.reasoning;
      message.role = "assistant";
      if (s.calls.size) {
        message.tool_calls = [...s.calls.entries()].sort(([a], [b]) => a - b).map(([, c]) => ({
          function: { arguments: c.args, name: c.name },
          ...(c.id ? { id: c.id } : {}),
          type: "function",
        }));
      }
      return {
        finish_reason: s.finish ?? "length",
        index,
        ...(s.logprobs ? { logprobs: { content: s.logprobs } } : {}),
        message,
      };
    });
    const h = this.#head;
    return {
      ...(this.#verbose !== undefined ? { __verbose: this.#verbose } : {}),
      choices,
      created: h.created,
      id: h.id,
      model: h.model,
      object: "chat.completion",
      system_fingerprint: h.system_fingerprint,
      ...(this.#timings !== undefined ? { timings: this.#timings } : {}),
      usage: this.#usage,
    };
  }
}
