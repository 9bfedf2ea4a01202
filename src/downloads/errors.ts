/**
 * Why a download stopped, as a type the retry loop and the failure record act on: "retry" may succeed on a
 * later attempt, "fatal" will not (auth, 404), "disk" means no room, "offline" means files are missing offline.
 */
export type DownloadErrorKind = "retry" | "fatal" | "disk" | "offline";

export class DownloadError extends Error {
  constructor(message: string, readonly kind: DownloadErrorKind) {
    super(message);
    this.name = "DownloadError";
  }
}

export class DownloadCancelled extends Error {
  constructor(modelId: string, why = "cancelled") {
    super(`download of ${modelId} ${why}`);
    this.name = "DownloadCancelled";
  }
}
