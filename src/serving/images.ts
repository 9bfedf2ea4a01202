/**
 * Image input on the one generation path: whether a chat request carries images, and whether the engine
 * serving it was started with a vision projector (llama-server's `--mmproj`), the only way it reads them.
 */

/** True when any message's content has an `image_url` part (every client API's images arrive as one). */
export function hasImageInput(messages: unknown): boolean {
  if (!Array.isArray(messages)) return false;
  return messages.some((m) =>
    Array.isArray((m as { content?: unknown })?.content) &&
    (m as { content: unknown[] }).content.some((p) => (p as { type?: unknown })?.type === "image_url")
  );
}

/** True when the engine's command line loads a projector. */
export function engineTakesImages(engineArgs: readonly string[] | undefined): boolean {
  return engineArgs?.includes("--mmproj") ?? false;
}
