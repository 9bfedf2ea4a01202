/**
 * End of an utterance, for the hands-free voice loop: fed the microphone's loudness (RMS) over time, it
 * says when someone has spoken and then stayed quiet long enough. Pure, so it is tested without a browser.
 */
export interface EndpointOptions {
  /** RMS above this is speech. */
  speechRms: number;
  /** RMS below this is silence (between the two, neither: a pause does not reset). */
  silenceRms: number;
  /** Speech must last this long to count (a click or a cough does not). */
  minSpeechMs: number;
  /** Silence after speech this long ends the utterance. */
  endSilenceMs: number;
}

export const ENDPOINT_DEFAULTS: EndpointOptions = {
  speechRms: 0.02,
  silenceRms: 0.008,
  minSpeechMs: 150,
  endSilenceMs: 1200,
};

export type EndpointState = "waiting" | "speaking" | "done";

export class Endpointer {
  #state: EndpointState = "waiting";
  #speechSince: number | null = null;
  #heard = false;
  #silenceSince: number | null = null;

  constructor(private readonly o: EndpointOptions = ENDPOINT_DEFAULTS) {}

  get state(): EndpointState {
    return this.#state;
  }

  /** One loudness sample at time `t` (ms); returns the state after it. */
  push(rms: number, t: number): EndpointState {
    if (this.#state === "done") return "done";
    if (rms >= this.o.speechRms) {
      this.#silenceSince = null;
      this.#speechSince ??= t;
      if (t - this.#speechSince >= this.o.minSpeechMs) this.#heard = true;
      if (this.#heard) this.#state = "speaking";
    } else if (rms < this.o.silenceRms) {
      this.#speechSince = null;
      this.#silenceSince ??= t;
      if (this.#heard && t - this.#silenceSince >= this.o.endSilenceMs) this.#state = "done";
    }
    return this.#state;
  }
}

/** Root mean square of a block of samples in [-1, 1]. */
export function rms(samples: Float32Array): number {
  let sum = 0;
  for (let i = 0; i < samples.length; i++) sum += samples[i] * samples[i];
  return samples.length ? Math.sqrt(sum / samples.length) : 0;
}
