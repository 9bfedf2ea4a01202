/**
 * The common reading of llama-server's Chat Completions SSE chunks for translators into other APIs' events
 * (Anthropic, Responses): text, reasoning and tool-call deltas, usage, finish, a held forced call. Pure.
 */
import { newToolCallId, toolCallFromText } from "./forced-tools.ts";

export interface ChatUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
}

/** A non-streamed Chat Completions reply, as far as the translators read it. */
export interface ChatReply {
  choices?: {
    message?: {
      content?: string | null;
      reasoning_content?: string | null;
      tool_calls?: { id?: string; function?: { name?: string; arguments?: string } }[];
    };
    finish_reason?: string | null;
  }[];
  usage?: ChatUsage | null;
  /** llama-server's record when asked for `verbose`: which stop sequence ended generation. */
  __verbose?: { stopping_word?: string } | null;
}

interface ChatChunk {
  choices?: {
    delta?: {
      content?: string | null;
      reasoning_content?: string | null;
      tool_calls?: { index?: number; id?: string; function?: { name?: string; arguments?: string } }[];
    };
    finish_reason?: string | null;
  }[];
  usage?: ChatUsage | null;
  error?: { message?: string };
  /** llama-server's record when asked for `verbose`: which stop sequence ended generation. */
  __verbose?: { stopping_word?: string } | null;
}

export abstract class ChatEventTranslator {
  protected finish: string | null = null;
  /** The engine's usage so far (its last chunk that carried one): read by the framing and the metrics. */
  usage: ChatUsage | null = null;
  protected stopWord: string | null = null;
  #forcedText: string | null = null;
  #done = false;

  /** The engine's text is a forced tool call's JSON (forced-tools.ts): hold it and send it as the call. */
  holdContentAsToolCall(): this {
    this.#forcedText = "";
    return this;
  }

  /** True once the closing events were produced: nothing more will be sent. */
  get done(): boolean {
    return this.#done;
  }

  protected abstract reasoning(text: string): string;
  protected abstract content(text: string): string;
  /** A tool call's start (first sight of `index`) or more of its arguments. */
  protected abstract toolCall(index: number, id: string, name: string, args: string): string;
  /** The closing events, after the last delta. */
  protected abstract close(): string;
  /** The event that ends a failed stream. */
  protected abstract failure(message: string): string;

  /** One upstream `data:` payload (without the prefix); returns the events to send now. */
  push(payload: string): string {
    if (this.#done) return "";
    if (payload.trim() === "[DONE]") return this.end();
    let chunk: ChatChunk;
    try {
      chunk = JSON.parse(payload);
    } catch {
      return "";
    }
    if (chunk.error) return this.fail(chunk.error.message ?? "the engine reported an error");
    this.stopWord = chunk.__verbose?.stopping_word || this.stopWord;
    if (chunk.usage) this.usage = chunk.usage;
    let out = "";
    for (const choice of chunk.choices ?? []) {
      const d = choice.delta ?? {};
      if (d.reasoning_content) out += this.reasoning(d.reasoning_content);
      if (d.content) {
        if (this.#forcedText !== null) this.#forcedText += d.content;
        else out += this.content(d.content);
      }
      for (const tc of d.tool_calls ?? []) {
        out += this.toolCall(
          tc.index ?? 0,
          tc.id ?? "",
          tc.function?.name ?? "",
          tc.function?.arguments ?? "",
        );
      }
      if (choice.finish_reason) this.finish = choice.finish_reason;
    }
    return out;
  }

  end(): string {
    if (this.#done) return "";
    let out = "";
    if (this.#forcedText !== null) {
      const call = toolCallFromText(this.#forcedText, newToolCallId());
      if (call) {
        out += this.toolCall(0, call.id, call.function.name, call.function.arguments);
        this.finish = "tool_calls";
      } else if (this.#forcedText) out += this.content(this.#forcedText);
    }
    this.#done = true;
    return out + this.close();
  }

  fail(message: string): string {
    if (this.#done) return "";
    this.#done = true;
    return this.failure(message);
  }
}
