/** Download progress records in upstream's tagged shapes, as they sit in `State.downloads[nodeId]`. */
import { z } from "zod";
import { ShardMetadataSchema } from "./instances.ts";
import { MemorySchema, tagged } from "./tagged.ts";

const FileProgressSchema = z.object({
  total: MemorySchema,
  downloaded: MemorySchema,
  downloadedThisSession: MemorySchema,
  completedFiles: z.number().int(),
  totalFiles: z.number().int(),
  speed: z.number(),
  etaMs: z.number(),
}).strict();

const Base = { nodeId: z.string(), shardMetadata: ShardMetadataSchema, modelDirectory: z.string() };

export const DownloadProgressSchema = z.union([
  tagged("DownloadPending", z.object({ ...Base, downloaded: MemorySchema, total: MemorySchema }).strict()),
  tagged(
    "DownloadOngoing",
    z.object({
      ...Base,
      downloadProgress: FileProgressSchema.extend({ files: z.record(z.string(), FileProgressSchema) }),
    }).strict(),
  ),
  tagged("DownloadCompleted", z.object({ ...Base, total: MemorySchema, readOnly: z.boolean() }).strict()),
  tagged("DownloadFailed", z.object({ ...Base, errorMessage: z.string() }).strict()),
]);
export type DownloadProgress = z.infer<typeof DownloadProgressSchema>;

export function downloadModelId(p: DownloadProgress): string {
  const body = Object.values(p)[0] as { shardMetadata: Record<string, { modelCard: { modelId: string } }> };
  return Object.values(body.shardMetadata)[0].modelCard.modelId;
}
