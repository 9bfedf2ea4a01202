/**
 * What untrusted input (a request, a peer's event, a hub listing) may name: model ids and repo file paths, checked
 * before either becomes part of a filesystem path. contain.ts then checks where the resolved path really lies.
 */
import { z } from "zod";

/** A name from outside that this node refuses to use; `field` says which input carried it (api maps it to 400). */
export class UntrustedInputError extends Error {
  constructor(message: string, readonly field: string) {
    super(message);
    this.name = "UntrustedInputError";
  }
}

/**
 * The hub's own rules for repo ids (huggingface_hub `validate_repo_id`): `name` or `org/name`, each part 1 to
 * 96 of `[A-Za-z0-9_.-]` starting and ending with a letter, digit or `_`, no `--` or `..` anywhere, no `.git`
 * ending. Ours are ASCII-only where the hub allows Unicode letters. `--` matters here twice: a model's folder is
 * its id with `/` spelled `--`, so an id with `--` could share a folder with another id.
 */
export const MODEL_ID_RULES = { maxPartLength: 96, maxParts: 2 } as const;
const ID_PART = /^[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?$/;

/**
 * Repo file paths (hub listings, a card's `gguf_file`): relative, `/`-separated, subfolders allowed (`onnx/model.onnx`),
 * each part at most 255 bytes (NAME_MAX on Linux file systems), 1024 bytes in all. `.skulk/` at the top is this
 * node's own bookkeeping inside a model folder (the manifest), so no repo file may land there.
 */
export const REPO_PATH_RULES = { maxPartBytes: 255, maxBytes: 1024, reserved: ".skulk" } as const;

// deno-lint-ignore no-control-regex
const CONTROL = /[\x00-\x1f\x7f]/;
const bytes = (s: string) => new TextEncoder().encode(s).length;

/** How a name is shown back in an error: short, quoted, control characters escaped. */
export function quoted(s: string): string {
  const shown = s.length > 80 ? `${s.slice(0, 60)}...(${s.length} characters)` : s;
  return JSON.stringify(shown);
}

/** Pure: why `id` is not an acceptable model id, or null when it is. */
export function modelIdProblem(id: string): string | null {
  if (id.length === 0) return "is empty";
  if (CONTROL.test(id)) return "contains a NUL or control character";
  if (id.includes("\\")) return "contains a backslash";
  if (id.startsWith("/")) return "is an absolute path; model ids are org/name";
  const max = MODEL_ID_RULES.maxPartLength * MODEL_ID_RULES.maxParts + 1;
  if (id.length > max) return `is ${id.length} characters long; a model id has at most ${max}`;
  const parts = id.split("/");
  if (parts.some((p) => p === "." || p === "..")) return "has a '.' or '..' part";
  if (parts.some((p) => p === "")) return "has an empty part";
  if (parts.length > MODEL_ID_RULES.maxParts) return "has more than one '/'; model ids are org/name";
  if (id.includes("..")) return "contains '..'";
  if (id.includes("--")) return "contains '--' (it would share a folder with the id that spells it '/')";
  if (id.endsWith(".git")) return "ends with '.git'";
  for (const p of parts) {
    if (p.length > MODEL_ID_RULES.maxPartLength) {
      return `has a part of ${p.length} characters; each part has at most ${MODEL_ID_RULES.maxPartLength}`;
    }
    if (!ID_PART.test(p)) {
      return "may use only letters, digits, '_', '-' and '.', and each part starts and ends with a letter, digit or '_'";
    }
  }
  return null;
}

/** Returns `id` when it is a model id this node accepts, else throws UntrustedInputError naming the problem. */
export function checkModelId(id: string, field = "model_id"): string {
  const problem = modelIdProblem(id);
  if (problem) throw new UntrustedInputError(`${field} ${quoted(id)} ${problem}`, field);
  return id;
}

/** Pure: why `path` is not an acceptable repo file path, or null when it is. */
export function repoPathProblem(path: string): string | null {
  if (path.length === 0) return "is empty";
  if (CONTROL.test(path)) return "contains a NUL or control character";
  if (path.includes("\\")) return "contains a backslash";
  if (path.startsWith("/")) return "is an absolute path; repo files are relative to the repo";
  if (bytes(path) > REPO_PATH_RULES.maxBytes) {
    return `is ${bytes(path)} bytes long; a repo path has at most ${REPO_PATH_RULES.maxBytes}`;
  }
  const parts = path.split("/");
  if (parts.some((p) => p === "." || p === "..")) return "has a '.' or '..' part";
  if (parts.some((p) => p === "")) return "has an empty part";
  if (parts.some((p) => bytes(p) > REPO_PATH_RULES.maxPartBytes)) {
    return `has a part longer than ${REPO_PATH_RULES.maxPartBytes} bytes`;
  }
  if (parts[0] === REPO_PATH_RULES.reserved) {
    return `is under ${REPO_PATH_RULES.reserved}/, which holds this node's own records`;
  }
  return null;
}

/** Returns `path` when it is a repo file path this node accepts, else throws UntrustedInputError. */
export function checkRepoPath(path: string, field = "path"): string {
  const problem = repoPathProblem(path);
  if (problem) throw new UntrustedInputError(`${field} ${quoted(path)} ${problem}`, field);
  return path;
}

/** A string `problem` accepts, as a schema (cards and bodies come from requests and peers; their names name files). */
const checkedString = (problem: (s: string) => string | null) =>
  z.string().superRefine((s, ctx) => {
    const why = problem(s);
    if (why) ctx.addIssue({ code: "custom", message: why });
  });

export const ModelIdSchema = checkedString(modelIdProblem);
export const RepoPathSchema = checkedString(repoPathProblem);
