import { accessSync, constants, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { basename, join } from "node:path";

/**
 * The compiled binary embeds LMDB's native addon, and Bun unpacks it into $TMPDIR before
 * loading it (see scripts/build.ts). Where $TMPDIR is missing, unwritable or mounted noexec,
 * that load fails: then we unpack the embedded file ourselves into another directory that
 * works, and if none does, say in one line which directory to fix and exit 1. Import this
 * module first in main.ts: it must be evaluated before lmdb is. From source, the addon loads
 * from node_modules and this is never called.
 */
function loadAddon<T>(load: () => T): T {
  const first = process.env.TMPDIR || tmpdir();
  try {
    return load();
  } catch (error) {
    const firstLine = String((error as Error)?.message ?? error).split("\n")[0];
    // Bun names the file in its error: the embedded /$bunfs/root/<name>.node, or the copy it
    // unpacked into a noexec $TMPDIR. Either can be read and copied somewhere executable.
    const embedded = /(\/\S+?\.node)\b/.exec(firstLine)?.[1];
    if (embedded && existsSync(embedded)) {
      const home = (() => {
        try {
          return join(homedir(), ".cache", "memd");
        } catch {
          return undefined;
        }
      })();
      for (const dir of [process.env.XDG_RUNTIME_DIR, "/tmp", "/var/tmp", "/dev/shm", home]) {
        if (!dir || dir === first) continue;
        try {
          return unpackAndLoad(embedded, dir) as T;
        } catch {}
      }
    }
    // This runs while the modules load, before main: one line and out, not a screen of source.
    process.stderr.write(
      `memd: cannot unpack LMDB's native addon into ${first} (missing, not writable or mounted noexec): ` +
        `set TMPDIR to a writable directory that allows executables (${firstLine})\n`,
    );
    process.exit(1);
  }
}

/** Copies the embedded addon into `dir` (content-named, so reused across starts) and dlopens it there. */
function unpackAndLoad(embedded: string, dir: string): unknown {
  mkdirSync(dir, { recursive: true });
  accessSync(dir, constants.W_OK);
  const target = join(dir, `memd-${basename(embedded)}`);
  if (!existsSync(target)) {
    const partial = `${target}.${process.pid}.tmp`;
    writeFileSync(partial, readFileSync(embedded), { mode: 0o755 });
    renameSync(partial, target);
  }
  const module = { exports: {} as unknown };
  process.dlopen(module as never, target);
  return module.exports;
}

(globalThis as { __memdLoadAddon?: typeof loadAddon }).__memdLoadAddon = loadAddon;
