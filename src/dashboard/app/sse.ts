/**
 * Reads an OpenAI-style server-sent event stream: splits it into `data:` payloads and `:` comments,
 * and folds chat chunks into one answer (content, reasoning, tool calls). Pure, so it is unit-tested.
 */

export type SseItem = { kind: "data"; data: string } | { kind: "comment"; text: string };

/** Feeds text as it arrives; returns the complete lines' items and keeps the unfinished tail. */
export class SseParser {
  #buf = "";

  push(text: string): SseItem[] {
    this.#buf += text;
    const out: SseItem[] = [];
    let nl: number;
    while ((nl = this.#buf.indexOf("\n")) >= 0) {
      const line = this.#buf.slice(0, nl).replace(/\r$/, "");
      this.#buf = this.#buf.slice(nl + 1);
      if (line.startsWith(":")) out.push({ kind: "comment", text: line.slice(1).trim() });
      else if (line.startsWith("data:")) out.push({ kind: "data", data: line.slice(5).trim() });
    }
    return out;
  }
}

export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

export interface Answer {
  content: string;
  reasoning: string;
  toolCalls: ToolCall[];
  finishReason: string | null;
  error: string | null;
  done: boolean;
  commandId: string | null;
}

export function emptyAnswer(): Answer {
  return {
    content: "",
    reasoning: "",
    toolCalls: [],
    finishReason: null,
    error: null,
    done: false,
    commandId: null,
  };
}

interface Chunk {
  error?: { message?: string };
  choices?: {
    delta?: {
      content?: string | null;
      reasoning_content?: string | null;
      tool_calls?: { id?: string; index?: number; function?: { name?: string; arguments?: string } }[];
    };
    finish_reason?: string | null;
  }[];
}

/** Folds one stream item into the answer so far. */
export function foldItem(a: Answer, item: SseItem): Answer {
  if (item.kind === "comment") {
    const m = item.text.match(/^command_id\s+(\S+)/);
    return m ? { ...a, commandId: m[1] } : a;
  }
  if (item.data === "[DONE]") return { ...a, done: true };
  let chunk: Chunk;
  try {
    chunk = JSON.parse(item.data);
  } catch {
    return a;
  }
  if (chunk.error) return { ...a, error: chunk.error.message ?? "the model reported an error" };
  const choice = chunk.choices?.[0];
  if (!choice) return a;
  const d = choice.delta ?? {};
  const toolCalls = [...a.toolCalls];
  for (const tc of d.tool_calls ?? []) {
    const i = tc.index ?? toolCalls.length;
    const prev = toolCalls[i] ?? { id: tc.id ?? "", name: "", arguments: "" };
    toolCalls[i] = {
      id: tc.id ?? prev.id,
      name: prev.name + (tc.function?.name ?? ""),
      arguments: prev.arguments + (tc.function?.arguments ?? ""),
    };
  }
  return {
    ...a,
    content: a.content + (d.content ?? ""),
    reasoning: a.reasoning + (d.reasoning_content ?? ""),
    toolCalls,
    finishReason: choice.finish_reason ?? a.finishReason,
  };
}
