/** @jsxImportSource hono/jsx/dom */
/**
 * Chat: pick a placed model, stream an answer from `/v1/chat/completions` with Stop, reasoning and
 * tool calls shown apart, conversations kept in localStorage, and errors that say what to do. When speech
 * models are placed: answers spoken on request, and a voice loop (record, transcribe, answer, speak).
 */
import { useEffect, useRef, useState } from "hono/jsx/dom";
import { ApiFailure, failure, headers } from "../api.ts";
import { instanceReady, type InstanceView, instanceView } from "../format.ts";
import type { Live } from "../api.ts";
import { type Answer, emptyAnswer, foldItem, SseParser, type ToolCall } from "../sse.ts";
import { Empty, Notice } from "../ui.tsx";
import { type Recording, startRecording, synthesize, transcribe } from "../voice.ts";
import { notReady, speechAdvice } from "../voice-advice.ts";

interface Message {
  role: "user" | "assistant";
  content: string;
  reasoning?: string;
  toolCalls?: ToolCall[];
  error?: string;
  stopped?: boolean;
}

interface Conversation {
  id: string;
  title: string;
  model: string;
  messages: Message[];
  updatedAt: number;
}

const STORE_KEY = "skulk.chat.conversations.v1";

function loadConversations(): Conversation[] {
  try {
    const v = JSON.parse(localStorage.getItem(STORE_KEY) ?? "[]");
    return Array.isArray(v) ? v : [];
  } catch {
    return [];
  }
}

function saveConversations(list: Conversation[]): void {
  try {
    localStorage.setItem(STORE_KEY, JSON.stringify(list.slice(0, 50)));
  } catch { /* storage full or disabled: the chat still works for this page */ }
}

function newConversation(model: string): Conversation {
  return { id: crypto.randomUUID(), title: "New chat", model, messages: [], updatedAt: Date.now() };
}

/** Turns a failed request into advice the user can act on. */
function explain(status: number, message: string): string {
  if (status === 404 && /no instance|not placed|no route/i.test(message)) {
    return /no route/i.test(message)
      ? `This node does not serve chat yet (${message}).`
      : `The model is no longer placed (${message}). Launch it again from the model store, then retry.`;
  }
  if (status === 0) return `The node did not answer (${message}). Check it is running, then retry.`;
  if (status >= 500) {
    return `The cluster could not answer (${message}). A node may be down; retry in a moment.`;
  }
  return message;
}

/** A picker of placed models; a model that is not ready yet is marked *starting*. */
function ModelPicker(
  props: {
    label: string;
    models: InstanceView[];
    value: string;
    onPick: (id: string) => void;
    disabled?: boolean;
  },
) {
  return (
    <label class="field">
      <span>{props.label}</span>
      <select
        value={props.value}
        onChange={(e: Event) => props.onPick((e.target as HTMLSelectElement).value)}
        disabled={props.disabled}
      >
        {props.models.map((v) => (
          <option value={v.modelId} selected={v.modelId === props.value}>
            {v.modelId}
            {instanceReady(v) ? "" : " (starting)"}
          </option>
        ))}
      </select>
    </label>
  );
}

// Icon outlines (24-unit grid), drawn inline: the page loads no icon font and emoji fonts vary.
const MIC = "M12 3a3 3 0 0 0-3 3v6a3 3 0 0 0 6 0V6a3 3 0 0 0-3-3zM5 11a7 7 0 0 0 14 0M12 18v3M8 21h8";
const STOP = "M7 7h10v10H7z";
const SPEAKER = "M4 9v6h4l5 4V5L8 9zM16 9a4 4 0 0 1 0 6M18.5 6.5a8 8 0 0 1 0 11";

function Icon(props: { d: string }) {
  return (
    <svg
      class="icon"
      viewBox="0 0 24 24"
      aria-hidden="true"
      fill="none"
      stroke="currentColor"
      stroke-width="2"
      stroke-linecap="round"
      stroke-linejoin="round"
    >
      <path d={props.d} />
    </svg>
  );
}

type VoicePhase = "idle" | "listening" | "transcribing" | "answering" | "speaking";
const PHASE_TEXT: Record<VoicePhase, string> = {
  idle: "",
  listening: "Listening… press the microphone again to send.",
  transcribing: "Transcribing…",
  answering: "Answering…",
  speaking: "Speaking the answer…",
};

export function ChatView(props: { live: Live }) {
  const s = props.live.state;
  const all = s
    ? [
      ...new Map(
        Object.entries(s.instances).map(([id, i]) => instanceView(id, i, s.runners)).map((
          v,
        ) => [v.modelId, v]),
      ).values(),
    ]
    : [];
  const placed = all.filter((v) => v.speech === null);
  const speakers = all.filter((v) => v.speech === "tts");
  const listeners = all.filter((v) => v.speech === "stt");
  const [ttsPick, setTtsModel] = useState("");
  const [sttPick, setSttModel] = useState("");
  const ttsModel = speakers.find((v) => v.modelId === ttsPick) ?? speakers[0];
  const sttModel = listeners.find((v) => v.modelId === sttPick) ?? listeners[0];
  const [phase, setPhase] = useState<VoicePhase>("idle");
  const [voiceError, setVoiceError] = useState<string | null>(null);
  const [audioUrl, setAudioUrl] = useState<string | null>(null);
  const recording = useRef<Recording | null>(null);
  const audioRef = useRef<HTMLAudioElement | null>(null);
  const [convs, setConvs] = useState<Conversation[]>(loadConversations);
  const [activeId, setActiveId] = useState<string | null>(convs[0]?.id ?? null);
  const [draft, setDraft] = useState("");
  const [streaming, setStreaming] = useState(false);
  const abort = useRef<AbortController | null>(null);
  const endRef = useRef<HTMLDivElement | null>(null);
  const active = convs.find((c) => c.id === activeId) ?? null;
  const [model, setModel] = useState<string>(active?.model ?? "");
  const modelOk = placed.some((v) => v.modelId === model);

  useEffect(() => {
    if (!model && placed.length) setModel(placed[0].modelId);
  }, [placed.length]);
  useEffect(() => {
    saveConversations(convs);
  }, [convs]);
  useEffect(() => {
    endRef.current?.scrollIntoView({ block: "end" });
  }, [
    active?.messages.at(-1)?.content,
    active?.messages.length,
  ]);

  const update = (id: string, f: (c: Conversation) => Conversation) =>
    setConvs((list) => list.map((c) => (c.id === id ? f(c) : c)).sort((a, b) => b.updatedAt - a.updatedAt));

  /** Streams the answer into the conversation; gives the answer's text when it completed. */
  const run = async (conv: Conversation, history: Message[]): Promise<string | null> => {
    const ctrl = new AbortController();
    abort.current = ctrl;
    setStreaming(true);
    let answer: Answer = emptyAnswer();
    const put = (m: Partial<Message>) =>
      update(
        conv.id,
        (c) => ({
          ...c,
          updatedAt: Date.now(),
          messages: [...history, {
            role: "assistant",
            content: answer.content,
            reasoning: answer.reasoning,
            toolCalls: answer.toolCalls,
            ...m,
          }],
        }),
      );
    put({});
    try {
      const res = await fetch("/v1/chat/completions", {
        method: "POST",
        headers: headers({ accept: "text/event-stream" }),
        body: JSON.stringify({
          model: conv.model,
          stream: true,
          messages: history.filter((m) => !m.error).map((m) => ({ role: m.role, content: m.content })),
        }),
        signal: ctrl.signal,
      });
      if (!res.ok) {
        const f = await failure(res);
        put({ error: explain(f.status, f.message) });
        return null;
      }
      const parser = new SseParser();
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        for (const item of parser.push(value)) answer = foldItem(answer, item);
        put(answer.error ? { error: explain(500, answer.error) } : {});
        if (answer.done || answer.error) break;
      }
      if (!answer.done && !answer.error) {
        put({ error: explain(500, "the stream ended before the answer was complete") });
      }
      return answer.done && !answer.error ? answer.content : null;
    } catch (e) {
      if ((e as Error).name === "AbortError") {
        put({ stopped: true });
        if (answer.commandId) {
          const url = `/v1/cancel/${encodeURIComponent(answer.commandId)}`;
          fetch(url, { method: "POST", headers: headers() }).catch(() => undefined);
        }
      } else put({ error: explain(0, (e as Error).message) });
      return null;
    } finally {
      abort.current = null;
      setStreaming(false);
    }
  };

  const ask = (text: string): Promise<string | null> | null => {
    if (!text || streaming || !model) return null;
    let conv = active && active.model === model ? active : null;
    if (!conv) {
      conv = newConversation(model);
      setConvs((l) => [conv!, ...l]);
      setActiveId(conv.id);
    }
    const history: Message[] = [...conv.messages.filter((m) => !m.error), { role: "user", content: text }];
    const title = conv.messages.length === 0 ? text.slice(0, 60) : conv.title;
    const next = { ...conv, title, messages: history, updatedAt: Date.now() };
    setConvs((l) => [next, ...l.filter((c) => c.id !== next.id)]);
    return run(next, history);
  };

  const send = (e?: Event) => {
    e?.preventDefault();
    if (ask(draft.trim())) setDraft("");
  };

  /** Speaks `text` with the picked speech model and plays it; false when it could not. */
  const speak = async (text: string): Promise<boolean> => {
    if (!ttsModel) return false;
    if (!instanceReady(ttsModel)) {
      setVoiceError(notReady("speech", ttsModel.modelId));
      return false;
    }
    setVoiceError(null);
    setPhase("speaking");
    try {
      const wav = await synthesize(ttsModel.modelId, text);
      if (audioUrl) URL.revokeObjectURL(audioUrl);
      const url = URL.createObjectURL(wav);
      setAudioUrl(url);
      const el = audioRef.current;
      if (el) {
        el.src = url;
        // Autoplay may be refused when the click that started this is long past: the player stays visible.
        await el.play().catch(() => undefined);
      }
      return true;
    } catch (e) {
      setVoiceError(
        e instanceof ApiFailure ? speechAdvice("speech", ttsModel.modelId, e) : (e as Error).message,
      );
      return false;
    } finally {
      setPhase("idle");
    }
  };

  /** The voice loop: a press listens; the end of speech (or a second press) transcribes, asks and speaks. */
  const toggleMic = async () => {
    if (phase === "listening") await finishListening();
    else await startListening();
  };

  // Read through the ref, not `phase`: the end-of-speech callback runs with the closure of the press
  // that started the recording, whose `phase` is stale.
  const finishListening = async () => {
    const rec = recording.current;
    if (!rec) return;
    recording.current = null;
    setPhase("transcribing");
    try {
      const audio = await rec.stop();
      const text = await transcribe(sttModel!.modelId, audio);
      if (!text) {
        setVoiceError("No words were heard. Speak closer to the microphone, then try again.");
        setPhase("idle");
        return;
      }
      setPhase("answering");
      const answer = await ask(text);
      setPhase("idle");
      if (answer) await speak(answer);
    } catch (e) {
      setVoiceError(
        e instanceof ApiFailure ? speechAdvice("transcription", sttModel!.modelId, e) : (e as Error).message,
      );
      setPhase("idle");
    }
  };

  const startListening = async () => {
    if (phase !== "idle" || !sttModel) return;
    setVoiceError(null);
    if (!model) return setVoiceError("Launch a chat model first: the voice loop needs one to answer.");
    if (!instanceReady(sttModel)) {
      return setVoiceError(notReady("transcription", sttModel.modelId));
    }
    try {
      recording.current = await startRecording(() => void finishListening());
      setPhase("listening");
    } catch (e) {
      setVoiceError((e as Error).message);
    }
  };

  const retry = () => {
    if (!active || streaming) return;
    const history = active.messages.filter((m) =>
      !m.error && !(m.role === "assistant" && m === active.messages.at(-1))
    );
    if (history.at(-1)?.role !== "user") return;
    run({ ...active, model: modelOk ? model : active.model }, history);
  };

  const remove = (id: string) => {
    setConvs((l) => l.filter((c) => c.id !== id));
    if (activeId === id) setActiveId(null);
  };

  return (
    <div class="view chat">
      <aside class="chat-side" aria-label="Conversations">
        <button type="button" class="btn btn-primary wide" onClick={() => setActiveId(null)}>New chat</button>
        <ul class="convs">
          {convs.map((c) => (
            <li key={c.id} class={c.id === activeId ? "active" : ""}>
              <button
                type="button"
                class="conv"
                onClick={() => {
                  setActiveId(c.id);
                  setModel(c.model);
                }}
                aria-current={c.id === activeId ? "true" : undefined}
              >
                <span class="conv-title">{c.title}</span>
                <span class="muted small">{c.model.split("/").at(-1)}</span>
              </button>
              <button
                type="button"
                class="btn btn-icon"
                aria-label={`Delete conversation ${c.title}`}
                onClick={() => remove(c.id)}
              >
                ×
              </button>
            </li>
          ))}
        </ul>
      </aside>
      <section class="chat-main" aria-label="Conversation">
        <div class="chat-bar">
          <label class="field">
            <span>Model</span>
            <select
              value={model}
              onChange={(e: Event) => setModel((e.target as HTMLSelectElement).value)}
              disabled={streaming}
            >
              {placed.length === 0 && <option value="">No model is placed</option>}
              {!modelOk && model && <option value={model} selected>{model} (not placed)</option>}
              {placed.map((v) => (
                <option value={v.modelId} selected={v.modelId === model}>
                  {v.modelId}
                  {instanceReady(v) ? "" : " (starting)"}
                </option>
              ))}
            </select>
          </label>
          {listeners.length > 0 && (
            <ModelPicker
              label="Transcription model"
              models={listeners}
              value={sttModel!.modelId}
              onPick={setSttModel}
              disabled={phase !== "idle"}
            />
          )}
          {speakers.length > 0 && (
            <ModelPicker
              label="Speech model"
              models={speakers}
              value={ttsModel!.modelId}
              onPick={setTtsModel}
              disabled={phase === "speaking"}
            />
          )}
          <audio
            ref={audioRef}
            class="voice-player"
            controls
            hidden={!audioUrl}
            aria-label="Spoken answer"
          />
        </div>
        {placed.length === 0 && (
          <Notice tone="info">
            No model is running yet. Launch one from the <a href="/model-store">model store</a>.
          </Notice>
        )}
        <div class="messages" aria-live="polite">
          {!active || active.messages.length === 0
            ? <Empty>Ask anything. Answers stream in as the model writes them.</Empty>
            : active.messages.map((m, i) => (
              <div key={`${active.id}-${i}`} class={`msg msg-${m.role}`} data-role={m.role}>
                <div class="msg-who">{m.role === "user" ? "You" : active.model.split("/").at(-1)}</div>
                {m.reasoning && (
                  <details
                    class="reasoning"
                    open={streaming && i === active.messages.length - 1 && !m.content}
                  >
                    <summary>Reasoning</summary>
                    <div class="reasoning-text">{m.reasoning}</div>
                  </details>
                )}
                {m.content && <div class="msg-text">{m.content}</div>}
                {m.toolCalls?.map((t) => (
                  <div class="toolcall" role="group" aria-label={`Tool call ${t.name}`}>
                    <div class="toolcall-head">
                      Tool call · <strong class="mono">{t.name}</strong>
                    </div>
                    <pre class="mono">{t.arguments}</pre>
                  </div>
                ))}
                {m.role === "assistant" && !m.content && !m.reasoning && !m.error && !m.toolCalls?.length &&
                  streaming && <div class="typing" aria-label="Waiting for the first token">●●●</div>}
                {m.stopped && <div class="muted small">Stopped.</div>}
                {m.error && (
                  <Notice tone="error" onRetry={i === active.messages.length - 1 ? retry : undefined}>
                    {m.error}
                  </Notice>
                )}
                {ttsModel && m.role === "assistant" && m.content &&
                  !(streaming && i === active.messages.length - 1) && (
                  <button
                    type="button"
                    class="btn btn-small speak"
                    onClick={() => speak(m.content)}
                    disabled={phase !== "idle"}
                  >
                    <Icon d={SPEAKER} /> Speak this answer
                  </button>
                )}
              </div>
            ))}
          <div ref={endRef} />
        </div>
        {(phase !== "idle" || voiceError) && (
          <div class="voice-status">
            {phase !== "idle" && <p role="status" class="muted">{PHASE_TEXT[phase]}</p>}
            {voiceError && <Notice tone="error">{voiceError}</Notice>}
          </div>
        )}
        <form class="composer" onSubmit={send}>
          <label class="sr-only" for="chat-input">Message</label>
          <textarea
            id="chat-input"
            rows={2}
            value={draft}
            placeholder={model ? `Message ${model.split("/").at(-1)}` : "Launch a model first"}
            onInput={(e: Event) => setDraft((e.target as HTMLTextAreaElement).value)}
            onKeyDown={(e: KeyboardEvent) => {
              if (e.key === "Enter" && !e.shiftKey) send(e);
            }}
          />
          {sttModel && (
            <button
              type="button"
              class={`btn mic${phase === "listening" ? " listening" : ""}`}
              aria-label={phase === "listening" ? "Stop recording and send" : "Record a voice message"}
              aria-pressed={phase === "listening" ? "true" : "false"}
              title={phase === "listening" ? "Stop recording and send" : "Record a voice message"}
              onClick={toggleMic}
              disabled={phase !== "idle" && phase !== "listening"}
            >
              <Icon d={phase === "listening" ? STOP : MIC} />
            </button>
          )}
          {streaming
            ? (
              <button type="button" class="btn btn-danger" onClick={() => abort.current?.abort()}>
                Stop
              </button>
            )
            : <button type="submit" class="btn btn-primary" disabled={!draft.trim() || !model}>Send</button>}
        </form>
      </section>
    </div>
  );
}
