/**
 * The chat's voice loop end to end: a real node with espeak-ng, a tiny random whisper and a tiny llama
 * placed, driven by headless Chromium whose fake microphone plays a WAV espeak-ng made.
 */
import type { Page, Request } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeWav, parseWav } from "../../src/audio/pcm.ts";
import { chromiumInstalled, launchBrowser, type TestBrowser, waitInPage } from "../helpers/browser.ts";
import {
  localCardWire,
  postInstance,
  runnerTag,
  singleNodeInstance,
  waitForState,
  type WireState,
} from "../helpers/cluster.ts";
import { type Daemon, startDaemon, tempDir } from "../helpers/daemon.ts";
import { tinyModel } from "../helpers/models.ts";
import { espeakWav, tinyWhisperModel, whisperCardWire, whisperServerBinary } from "../helpers/speech.ts";

const TTS = "skulk/espeak-ng";
const STT = "skulk-test/tiny-whisper";
const CHAT = "skulk-test/tiny-llama";
const SHOTS = Deno.env.get("SKULK_SCREENSHOTS");

const readyModels = (s: WireState): string[] =>
  Object.values(s.instances).flatMap((i) => {
    // deno-lint-ignore no-explicit-any
    const sa = (Object.values(i as object)[0] as any).shardAssignments;
    return Object.keys(sa.runnerToShard).every((r) => runnerTag(s, r) === "RunnerReady") ? [sa.modelId] : [];
  });

// A small context keeps the tiny model's answers (and so their speech) short on a busy 2-core machine.
async function placeCard(
  node: Daemon,
  card: Record<string, unknown> & { modelId: string },
  contextTokens = 192,
): Promise<void> {
  const instance = singleNodeInstance(node.nodeId, card, contextTokens);
  const res = await postInstance(node, instance);
  expect(res.status).toBe(200);
}

describe.skipIf(!chromiumInstalled())("the chat's voice loop in headless Chromium", () => {
  let dir: string;
  let node: Daemon;
  let browser: TestBrowser;

  beforeAll(async () => {
    dir = tempDir("skulk-dashboard-voice-");
    const wav = `${dir}/question.wav`;
    Deno.writeFileSync(wav, await espeakWav("what is the colour of a fox in winter"));
    node = await startDaemon({
      dataDir: `${dir}/data`,
      env: { SKULK_WHISPER_SERVER_BIN: await whisperServerBinary() },
    });
    // espeak-ng's catalogue card is placed by the planner; the tiny models by a fully specified instance.
    const placed = await fetch(`${node.url}/place_instance`, {
      method: "POST",
      body: JSON.stringify({ model_id: TTS }),
    });
    expect(placed.status).toBe(200);
    await placeCard(node, whisperCardWire(STT, await tinyWhisperModel()));
    await placeCard(node, localCardWire(CHAT, await tinyModel()));
    await waitForState(
      node.url,
      (s) => [TTS, STT, CHAT].every((m) => readyModels(s).includes(m)),
      "the speech, transcription and chat models to be ready",
      120_000,
    );
    browser = await launchBrowser([
      "--use-fake-ui-for-media-stream",
      "--use-fake-device-for-media-stream",
      `--use-file-for-fake-audio-capture=${wav}`,
    ]);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await node?.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => undefined);
  });

  /** Every audio request the page makes, with its answer's status once it comes. */
  function watchAudio(page: Page) {
    const seen: { req: Request; status: Promise<number> }[] = [];
    page.on("request", (req) => {
      if (!req.url().includes("/v1/audio/")) return;
      seen.push({ req, status: req.response().then((r) => r?.status() ?? 0) });
    });
    return seen;
  }

  it(
    "records the microphone, puts the transcript in the chat, streams the answer and speaks it",
    async () => {
      const page = await browser.page({ width: 1280, height: 860 });
      const audio = watchAudio(page);
      // Keeps a copy of the recording the page uploads (request bodies made of blobs are not visible to
      // page.on("request")), so the test can send the same bytes itself.
      await page.addInitScript(() => {
        const original = globalThis.fetch;
        globalThis.fetch = async (input, init) => {
          if (init?.body instanceof FormData) {
            const file = init.body.get("file") as File;
            const bytes = new Uint8Array(await file.arrayBuffer());
            let bin = "";
            for (const b of bytes) bin += String.fromCharCode(b);
            Object.assign(globalThis, {
              __voiceUpload: { model: init.body.get("model"), type: file.type, b64: btoa(bin) },
            });
          }
          return original(input, init);
        };
      });
      try {
        await page.goto(`${node.url}/chat`);
        // The pickers: chat models leave the speech models out; each speech picker lists its own kind.
        const stt = page.getByLabel("Transcription model");
        const tts = page.getByLabel("Speech model");
        await stt.waitFor();
        await expect(stt.locator("option").allTextContents()).resolves.toEqual([STT]);
        await expect(tts.locator("option").allTextContents()).resolves.toEqual([TTS]);
        await expect(page.getByRole("combobox", { name: /^Model/ }).locator("option").allTextContents())
          .resolves
          .toEqual([CHAT]);

        const mic = page.getByRole("button", { name: "Record a voice message" });
        await mic.click();
        const stop = page.getByRole("button", { name: "Stop recording and send" });
        await expect(stop.getAttribute("aria-pressed")).resolves.toBe("true");
        await page.getByRole("status").filter({ hasText: "Listening" }).waitFor();
        // Let the fake microphone play a good part of the question (it loops).
        await page.waitForTimeout(2500);
        await stop.click();

        const user = page.locator('[data-role="user"] .msg-text').last();
        await user.waitFor({ timeout: 60_000 });
        const transcript = (await user.textContent())!;
        expect(transcript.length).toBeGreaterThan(0);
        // The words are the tiny model's noise: what the chat shows is what the server answered the page's
        // own upload (sending the bytes again need not give the same words: whisper's temperature fallback
        // samples when a random model's decode fails its thresholds).
        const upload = audio.find((a) => a.req.url().endsWith("/v1/audio/transcriptions"))!;
        const answered = await upload.req.response();
        expect(answered!.status()).toBe(200);
        expect(((await answered!.json()).text as string).trim()).toBe(transcript);
        const sent = await page.evaluate("globalThis.__voiceUpload") as {
          model: string;
          type: string;
          b64: string;
        };
        expect(sent.model).toBe(STT);
        expect(sent.type).toMatch(/^audio\/webm/);
        // The recorded bytes are a real WebM the server decodes again.
        const recorded = Uint8Array.from(atob(sent.b64), (c) => c.charCodeAt(0));
        const form = new FormData();
        form.set("model", STT);
        form.set("file", new File([recorded], "again.webm"));
        const again = await fetch(`${node.url}/v1/audio/transcriptions`, { method: "POST", body: form });
        expect(again.status).toBe(200);
        expect(typeof (await again.json()).text).toBe("string");

        // The answer streams, then is spoken with the picked speech model.
        const answer = page.locator('[data-role="assistant"] .msg-text').last();
        await answer.waitFor({ timeout: 60_000 });
        await waitInPage(
          page,
          `[...document.querySelectorAll("button")].some((b) => b.textContent.includes("Speak this answer"))`,
          120_000,
        );
        const seconds = await waitInPage<number>(
          page,
          `document.querySelector("audio.voice-player")?.src.startsWith("blob:") &&
          document.querySelector("audio.voice-player").duration`,
          60_000,
        );
        expect(seconds).toBeGreaterThan(0);
        const speech = audio.filter((a) => a.req.url().endsWith("/v1/audio/speech"));
        expect(speech.length).toBe(1);
        await expect(speech[0].status).resolves.toBe(200);
        const asked = speech[0].req.postDataJSON();
        expect(asked.model).toBe(TTS);
        expect(asked.input).toBe((await answer.textContent())!.slice(0, 4096));
        // What each request took in this run, for the report (not asserted).
        const timing = await page.evaluate(`performance.getEntriesByType("resource")
          .filter((e) => /\\/v1\\/(audio|chat)\\//.test(e.name))
          .map((e) => new URL(e.name).pathname + " " + Math.round(e.duration) + " ms").join(", ")`);
        console.log(`voice loop requests: ${timing}`);
        console.log(
          `voice loop: recorded ${recorded.length} bytes of ${sent.type}, transcript ${transcript.length} chars, answer ${asked.input.length} chars, spoken ${
            seconds.toFixed(2)
          } s`,
        );
        if (SHOTS) await page.screenshot({ path: `${SHOTS}/chat-voice.png` });

        // "Speak this answer" speaks it again, from the keyboard.
        const speak = page.getByRole("button", { name: "Speak this answer" }).last();
        await speak.focus();
        const response = page.waitForResponse((r) => r.url().endsWith("/v1/audio/speech"));
        await page.keyboard.press("Enter");
        await expect((await response).status()).toBe(200);
        expect(audio.filter((a) => a.req.url().endsWith("/v1/audio/speech")).length).toBe(2);
      } finally {
        await page.close();
      }
    },
    240_000,
  );

  it("stops listening by itself when the speaker falls silent (hands-free)", async () => {
    // The fake microphone plays a question followed by 2.5 s of silence, looped: nobody presses stop.
    const spoken = parseWav(await espeakWav("tell me about foxes"));
    const samples = new Float32Array(spoken.samples.length + Math.round(2.5 * spoken.sampleRate));
    samples.set(spoken.samples);
    const wav = `${dir}/question-then-silence.wav`;
    Deno.writeFileSync(wav, encodeWav({ samples, sampleRate: spoken.sampleRate }));
    const handsFree = await launchBrowser([
      "--use-fake-ui-for-media-stream",
      "--use-fake-device-for-media-stream",
      `--use-file-for-fake-audio-capture=${wav}`,
    ]);
    try {
      const page = await handsFree.page({ width: 1280, height: 860 });
      const audio = watchAudio(page);
      await page.goto(`${node.url}/chat`);
      await page.getByRole("button", { name: "Record a voice message" }).click();
      await page.getByRole("status").filter({ hasText: "Listening" }).waitFor();
      // No press: the end of speech sends the recording on its own.
      await waitInPage(
        page,
        `!document.querySelector('button[aria-label="Stop recording and send"]')`,
        30_000,
      );
      const user = page.locator('[data-role="user"] .msg-text').last();
      await user.waitFor({ timeout: 60_000 });
      const upload = audio.find((a) => a.req.url().endsWith("/v1/audio/transcriptions"));
      expect(upload).toBeDefined();
      await expect(upload!.status).resolves.toBe(200);
    } finally {
      await handsFree.close();
    }
  });

  it("refuses to record with a transcription model that is not ready, saying which and why", async () => {
    // A whisper card whose model file does not exist: its runner fails, so the model is never ready.
    const broken = "skulk-test/broken-whisper";
    await placeCard(node, {
      ...whisperCardWire(broken, await tinyWhisperModel()),
      ggufPath: `${dir}/missing.bin`,
    });
    const page = await browser.page({ width: 1280, height: 860 });
    const audio = watchAudio(page);
    try {
      await page.goto(`${node.url}/chat`);
      const stt = page.getByLabel("Transcription model");
      await stt.locator(`option[value="${broken}"]`).waitFor({ state: "attached" });
      await stt.selectOption(broken);
      await page.getByRole("button", { name: "Record a voice message" }).click();
      const alert = page.getByRole("alert");
      await alert.waitFor();
      await expect(alert.textContent()).resolves.toMatch(
        new RegExp(`transcription model ${broken} is not ready`),
      );
      await expect(page.getByRole("button", { name: "Record a voice message" }).getAttribute("aria-pressed"))
        .resolves.toBe("false");
      expect(audio.length).toBe(0);
    } finally {
      await page.close();
    }
  }, 60_000);
});

describe.skipIf(!chromiumInstalled())("the chat's voice loop when the browser refuses the microphone", () => {
  let node: Daemon;
  let browser: TestBrowser;
  beforeAll(async () => {
    node = await startDaemon({ env: { SKULK_WHISPER_SERVER_BIN: await whisperServerBinary() } });
    await placeCard(node, whisperCardWire(STT, await tinyWhisperModel()));
    await placeCard(node, localCardWire(CHAT, await tinyModel()));
    await waitForState(node.url, (s) => [STT, CHAT].every((m) => readyModels(s).includes(m)), "models ready");
    browser = await launchBrowser(["--use-fake-device-for-media-stream", "--deny-permission-prompts"]);
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await node?.stop();
    await Deno.remove(node.dataDir, { recursive: true }).catch(() => undefined);
  });

  it("says how to allow it, and sends nothing", async () => {
    const page = await browser.page();
    let uploads = 0;
    page.on("request", (r) => {
      if (r.url().includes("/v1/audio/")) uploads++;
    });
    try {
      await page.goto(`${node.url}/chat`);
      // Only a transcription model is placed: the mic is offered, the speech picker is not.
      await page.getByLabel("Transcription model").waitFor();
      await expect(page.getByLabel("Speech model").count()).resolves.toBe(0);
      await page.getByRole("button", { name: "Record a voice message" }).click();
      const alert = page.getByRole("alert");
      await alert.waitFor();
      await expect(alert.textContent()).resolves.toMatch(/refused the microphone.*Allow microphone access/);
      if (SHOTS) await page.screenshot({ path: `${SHOTS}/chat-voice-refused.png` });
      expect(uploads).toBe(0);
    } finally {
      await page.close();
    }
  });
});
