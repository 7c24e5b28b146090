import { closeSync, ftruncateSync, openSync, readFileSync, writeSync } from "node:fs";
import { join } from "node:path";

/**
 * An exclusive lock on a data dir, held by one `memd serve` for its lifetime.
 *
 * Why flock(2) through bun:ffi: the kernel drops the lock when the process dies, however it
 * dies (kill -9 included), so a lock can never go stale; Bun has no flock of its own, and a
 * pid file alone can't tell a live holder from a dead one. The file also records the holder's
 * pid, so a second server can name it. Only `serve` takes the lock: `memd keys` and
 * `memd backup` open the store beside a running server, which LMDB supports.
 */
export const lockFileName = "memd.lock";

export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number | undefined,
  ) {
    super(`data dir ${dataDir} is in use by another memd server${pid ? ` (pid ${pid})` : ""}`);
  }
}

export interface DataDirLock {
  /** Releases the lock (also released by the kernel when the process exits). */
  release(): void;
}

const LOCK_EX = 2;
const LOCK_NB = 4;
const EWOULDBLOCK = 11;

type Libc = { flock(fd: number, op: number): number; errno(): number };
let libc: Libc | null | undefined;

/** libc's flock and errno through bun:ffi, or null where libc cannot be opened. */
async function loadLibc(): Promise<Libc | null> {
  if (libc !== undefined) return libc;
  const { dlopen, FFIType, read } = await import("bun:ffi");
  const names = process.platform === "darwin" ? ["libc.dylib", "libSystem.B.dylib"] : ["libc.so.6", "libc.so"];
  for (const name of names) {
    try {
      const errnoSymbol = process.platform === "darwin" ? "__error" : "__errno_location";
      const lib = dlopen(name, {
        flock: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
        [errnoSymbol]: { args: [], returns: FFIType.ptr },
      });
      const errnoAt = lib.symbols[errnoSymbol] as () => number | null;
      libc = {
        flock: (fd, op) => lib.symbols.flock(fd, op) as number,
        errno: () => {
          const p = errnoAt();
          return p ? read.i32(p as never, 0) : 0;
        },
      };
      return libc;
    } catch {}
  }
  libc = null;
  return libc;
}

/**
 * Takes the exclusive lock of `dataDir` (which must exist), or throws DataDirLockedError naming
 * the pid that holds it. Call first in the start-up sequence, before the store is opened, and
 * keep the result until the store is closed.
 */
export async function lockDataDir(dataDir: string, warn: (msg: string) => void = () => {}): Promise<DataDirLock> {
  const path = join(dataDir, lockFileName);
  const fd = openSync(path, "a+", 0o644);
  const c = await loadLibc();
  if (!c) {
    warn("flock is not available here: the data dir is not protected against a second server");
  } else if (c.flock(fd, LOCK_EX | LOCK_NB) !== 0) {
    const errno = c.errno();
    closeSync(fd);
    if (errno !== EWOULDBLOCK && errno !== 35 /* EWOULDBLOCK on darwin */)
      throw new Error(`cannot lock ${path}: flock failed with errno ${errno}`);
    throw new DataDirLockedError(dataDir, holderPid(path));
  }
  ftruncateSync(fd, 0);
  writeSync(fd, `${process.pid}\n`, 0);
  let held = true;
  return {
    release() {
      if (!held) return;
      held = false;
      try {
        ftruncateSync(fd, 0);
      } catch {}
      closeSync(fd);
    },
  };
}

function holderPid(path: string): number | undefined {
  try {
    const n = Number(readFileSync(path, "utf8").trim());
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}
