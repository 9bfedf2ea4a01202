/**
 * This program's own command line: the compiled executable, or `deno run -A <main.ts>` from source. The
 * daemon re-executes itself with it (restart) and starts its sherpa-onnx child through a hidden subcommand.
 */

/** The argv that runs this same program with `args`. */
export function ownCommand(execPath: string, mainModule: string, args: string[]): string[] {
  const fromSource = /(^|[\\/])deno(\.exe)?$/.test(execPath);
  return fromSource
    ? [execPath, "run", "-A", "--quiet", decodeURIComponent(new URL(mainModule).pathname), ...args]
    : [execPath, ...args];
}

/**
 * The argv prefix that runs this program's CLI as a child (the sherpa-onnx host, the engine watchdog).
 * From source the program is src/main.ts even when a test or bench (not the CLI) is the main module.
 */
export function selfProgram(): string[] {
  const main = /\/src\/main\.ts$/.test(Deno.mainModule)
    ? Deno.mainModule
    : new URL("../main.ts", import.meta.url).href;
  return ownCommand(Deno.execPath(), main, []);
}
