import { describe, expect, it } from "vitest";
import {
  fromChatReply,
  outputAsInput,
  type OutputItem,
  ResponsesRequest,
  ResponsesStreamTranslator,
  toChatRequest,
} from "../../src/serving/responses.ts";

const req = (extra: Record<string, unknown>) => ResponsesRequest.parse({ model: "m", input: "hi", ...extra });

function events(text: string): Record<string, unknown>[] {
  return text.split("\n\n").filter(Boolean).map((e) => {
    const [ev, data] = e.split("\n");
    const d = JSON.parse(data.slice("data: ".length));
    expect(ev).toBe(`event: ${d.type}`);
    return d;
  });
}
const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }] });

describe("Responses → Chat Completions", () => {
  it.each([
    ["a string", { instructions: "be brief" }, [{ role: "system", content: "be brief" }, {
      role: "user",
      content: "hi",
    }]],
    [
      "message items, developer as system, text parts joined",
      {
        input: [
          { role: "developer", content: "rules" },
          {
            type: "message",
            role: "user",
            content: [{ type: "input_text", text: "a" }, { type: "input_text", text: "b" }],
          },
          { role: "assistant", content: [{ type: "output_text", text: "c" }] },
        ],
      },
      [{ role: "system", content: "rules" }, { role: "user", content: "ab" }, {
        role: "assistant",
        content: "c",
      }],
    ],
    [
      "an image",
      {
        input: [{ role: "user", content: [{ type: "input_image", image_url: "data:image/png;base64,AA" }] }],
      },
      [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:image/png;base64,AA" } }] }],
    ],
    [
      "function calls (two in one turn) and their outputs",
      {
        input: [
          { role: "user", content: "q" },
          { type: "reasoning", summary: [] },
          { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
          { type: "function_call", call_id: "c2", name: "g", arguments: '{"x":1}' },
          { type: "function_call_output", call_id: "c1", output: "one" },
          { type: "function_call_output", call_id: "c2", output: "two" },
        ],
      },
      [
        { role: "user", content: "q" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "c1", type: "function", function: { name: "f", arguments: "{}" } },
            { id: "c2", type: "function", function: { name: "g", arguments: '{"x":1}' } },
          ],
        },
        { role: "tool", tool_call_id: "c1", content: "one" },
        { role: "tool", tool_call_id: "c2", content: "two" },
      ],
    ],
  ])("translates %s", (_what, extra, messages) => {
    expect(toChatRequest(req(extra), 100).messages).toEqual(messages);
  });

  it("maps tools, tool_choice, limits and sampling", () => {
    const r = toChatRequest(
      req({
        tools: [{ type: "function", name: "f", parameters: { type: "object" }, strict: true }],
        tool_choice: { type: "function", name: "f" },
        max_output_tokens: 7,
        temperature: 0.3,
        stream: true,
      }),
      100,
    );
    expect(r).toMatchObject({
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }],
      tool_choice: { type: "function", function: { name: "f" } },
      max_tokens: 7,
      temperature: 0.3,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(toChatRequest(req({}), 100).max_tokens).toBe(100);
  });

  it.each([
    [{ input: "" }, /input/],
    [{ input: [] }, /input/],
    [{ max_output_tokens: 0 }, /max_output_tokens/],
    [{ tool_choice: { type: "function" } }, /tool_choice/],
  ])("refuses %j", (extra, re) => {
    const r = ResponsesRequest.safeParse({ model: "m", input: "hi", ...extra });
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error?.issues)).toMatch(re);
  });
});

describe("Chat Completions → Responses", () => {
  it("turns a reply into reasoning, message and function_call items, incomplete when cut at the limit", () => {
    const r = fromChatReply(
      {
        choices: [{
          message: {
            content: "hi",
            reasoning_content: "hmm",
            tool_calls: [{ id: "call_1", function: { name: "f", arguments: "{}" } }],
          },
          finish_reason: "length",
        }],
        usage: { prompt_tokens: 3, completion_tokens: 4 },
      },
      req({}),
      "resp_1",
      5,
    );
    expect(r.output.map((o) => o.type)).toEqual(["reasoning", "message", "function_call"]);
    expect(r.output_text).toBe("hi");
    expect(r.output[2]).toMatchObject({ call_id: "call_1", name: "f", arguments: "{}", status: "completed" });
    expect(r.status).toBe("incomplete");
    expect(r.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(r.usage).toMatchObject({ input_tokens: 3, output_tokens: 4, total_tokens: 7 });
  });

  it("streams text in the Responses event order with increasing sequence numbers", () => {
    const t = new ResponsesStreamTranslator("resp_1", req({}));
    const evs = events(
      t.head() + t.push(chunk({ content: "He" })) + t.push(chunk({ content: "llo" })) +
        t.push(chunk({}, "stop")) +
        t.push(JSON.stringify({ choices: [], usage: { prompt_tokens: 2, completion_tokens: 2 } })) +
        t.push("[DONE]"),
    );
    expect(evs.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(evs.map((e) => e.sequence_number)).toEqual(evs.map((_, i) => i));
    const done = evs.at(-1)!.response as {
      output_text: string;
      status: string;
      usage: { total_tokens: number };
    };
    expect(done).toMatchObject({ output_text: "Hello", status: "completed", usage: { total_tokens: 4 } });
    expect(t.done).toBe(true);
  });

  it("streams a held forced call as one function_call item with its arguments", () => {
    const t = new ResponsesStreamTranslator("resp_1", req({})).holdContentAsToolCall();
    const evs = events(t.push(chunk({ content: '{"name":"f","arguments":{"a":1}}' })) + t.end());
    expect(evs.map((e) => e.type)).toEqual([
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(evs[2]).toMatchObject({ name: "f", arguments: '{"a":1}' });
    expect(events(new ResponsesStreamTranslator("r", req({})).fail("gone"))[0]).toMatchObject({
      type: "error",
      message: "gone",
    });
  });
});

describe("stored responses", () => {
  it("replays a response's output as input items: messages and calls, not reasoning", () => {
    const r = fromChatReply(
      {
        choices: [{
          finish_reason: "tool_calls",
          message: {
            reasoning_content: "hmm",
            content: "Let me look.",
            tool_calls: [{ id: "call_1", function: { name: "f", arguments: '{"a":1}' } }],
          },
        }],
      },
      req({}),
      "resp_1",
      0,
    );
    expect(outputAsInput(r.output)).toEqual([
      { type: "message", role: "assistant", content: "Let me look." },
      { type: "function_call", call_id: "call_1", name: "f", arguments: '{"a":1}' },
    ]);
    // What is replayed is valid input: it parses as a request's items and goes to the engine as chat turns.
    const next = ResponsesRequest.parse({ model: "m", input: outputAsInput(r.output) });
    expect(toChatRequest(next, 8).messages).toEqual([
      { role: "assistant", content: "Let me look." },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_1", type: "function", function: { name: "f", arguments: '{"a":1}' } }],
      },
    ]);
  });

  it("hands a finished stream's output to be kept, and a failed stream's to nobody", () => {
    const kept: OutputItem[][] = [];
    const t = new ResponsesStreamTranslator("resp_1", req({}), (o) => kept.push(structuredClone(o)));
    t.head();
    t.push(chunk({ content: "Hel" }));
    t.push(chunk({ content: "lo" }, "stop"));
    t.push("[DONE]");
    expect(outputAsInput(kept[0])).toEqual([{ type: "message", role: "assistant", content: "Hello" }]);
    const failed = new ResponsesStreamTranslator("resp_2", req({}), (o) => kept.push(o));
    failed.head();
    failed.push(chunk({ content: "Hel" }));
    failed.fail("engine died");
    expect(kept).toHaveLength(1);
  });
});
