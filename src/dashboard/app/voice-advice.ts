/**
 * What the voice controls say when something fails: pure texts naming the cause and the remedy, kept apart
 * from voice.ts so they can be tested without a browser.
 */
import type { ApiFailure } from "./api.ts";

/** Advice for a failed getUserMedia, by the DOMException's name. */
export function micAdvice(name: string, message: string): string {
  switch (name) {
    case "NotAllowedError":
    case "SecurityError":
      return "The browser refused the microphone. Allow microphone access for this page (the icon in the address bar), then try again.";
    case "NotFoundError":
    case "OverconstrainedError":
      return "No microphone was found. Connect one, then try again.";
    case "NotReadableError":
      return "The microphone is busy or failed to start. Close other programs using it, then try again.";
    case "InsecureContext":
      return "This browser only allows the microphone on secure pages: open the dashboard through https:// or http://localhost (e.g. an SSH tunnel).";
    default:
      return `The microphone could not start (${message || name}).`;
  }
}

/** Advice for a failed audio request, naming the model and what to do. */
export function speechAdvice(what: "transcription" | "speech", model: string, f: ApiFailure): string {
  if (f.status === 0) return `The node did not answer (${f.message}). Check it is running, then retry.`;
  if (f.status === 404) {
    return `The ${what} model ${model} is not placed (${f.message}). Launch it from the model store.`;
  }
  if (f.status === 503) {
    return `The ${what} model ${model} is not ready yet (${f.message}). Try again in a moment.`;
  }
  if (f.status >= 500) return `The ${what} model ${model} failed (${f.message}).`;
  return `The ${what} request was refused (${f.message}).`;
}

/** Said when the picked speech model's runner is not ready, before any request is made. */
export function notReady(what: "transcription" | "speech", model: string): string {
  return `The ${what} model ${model} is not ready: it is still starting, or its runner failed (the Cluster view says which). Try again once it is ready.`;
}
