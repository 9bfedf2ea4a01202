/**
 * Reads files under a filesystem root ("/" on a real node, a fixture tree in tests). Every read is sync
 * and tiny (sysfs/procfs), and a missing or unreadable file is null: the caller reports "not measured".
 */
export class FsRoot {
  readonly base: string;

  constructor(root = "/") {
    this.base = root.replace(/\/+$/, "");
  }

  path(p: string): string {
    return `${this.base}/${p.replace(/^\/+/, "")}`;
  }

  text(p: string): string | null {
    try {
      return Deno.readTextFileSync(this.path(p));
    } catch {
      return null;
    }
  }

  /** A file holding one number (sysfs attributes); null when absent or not a number. */
  number(p: string): number | null {
    const t = this.text(p)?.trim();
    if (t === undefined || t === "") return null;
    const n = Number(t);
    return Number.isFinite(n) ? n : null;
  }

  /** Directory entry names, sorted so readings are stable; [] when the directory is absent. */
  list(p: string): string[] {
    try {
      return [...Deno.readDirSync(this.path(p))].map((e) => e.name).sort();
    } catch {
      return [];
    }
  }

  exists(p: string): boolean {
    try {
      Deno.lstatSync(this.path(p));
      return true;
    } catch {
      return false;
    }
  }

  /** The target of a symlink (sysfs `device/driver`), or null. */
  link(p: string): string | null {
    try {
      return Deno.readLinkSync(this.path(p));
    } catch {
      return null;
    }
  }
}

/** Runs a program and returns its stdout, or null when it is missing, fails or hangs. */
export async function runText(cmd: string, args: string[], timeoutMs = 5000): Promise<string | null> {
  try {
    const out = await new Deno.Command(cmd, {
      args,
      stdout: "piped",
      stderr: "null",
      signal: AbortSignal.timeout(timeoutMs),
    })
      .output();
    return out.success ? new TextDecoder().decode(out.stdout) : null;
  } catch {
    return null;
  }
}
