// Lowering one thread of the process (the webhook delivery thread) below the request thread: a
// higher nice value and, when asked, on Linux where the thread may leave it again, the idle
// scheduling class (SCHED_IDLE). A thread in that class is preempted the moment a normal thread of the process
// wakes up on its CPU; a thread that is only niced runs on to the end of its time slice (a few ms)
// first, and every store waits that long behind it. The idle class still gets a small share of a
// busy CPU, as nice 19 does, so a saturated server delivers slowly, not never.
//
// A thread that holds a lock the request thread waits for (an LMDB write transaction) must not
// stay in the idle class meanwhile: `normally` lifts it for the length of such a call. Leaving the
// idle class needs CAP_SYS_NICE or an RLIMIT_NICE that allows the thread's nice value (sched(7));
// where neither holds, the thread is only niced.
import { readFileSync, readlinkSync } from "node:fs";
import { getPriority, setPriority } from "node:os";

const SCHED_OTHER = 0;
const SCHED_IDLE = 5;
const CAP_SYS_NICE = 23n;

/** Sets this thread's scheduling class; false when refused. Set once the thread is in the idle class. */
let setClass: ((policy: number) => boolean) | undefined;

/** The calling thread's id (Linux), or 0. */
export function threadId(): number {
  try {
    return Number(readlinkSync("/proc/thread-self").split("/").pop()) || 0;
  } catch {
    return 0;
  }
}

/** Whether a thread at `nice` may go back from the idle class to the normal one. */
export function mayLeaveIdle(nice: number): boolean {
  try {
    const caps = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync("/proc/self/status", "utf8"))?.[1];
    if (caps && (BigInt(`0x${caps}`) >> CAP_SYS_NICE) & 1n) return true;
    const limit = /^Max nice priority\s+(\S+)/m.exec(readFileSync("/proc/self/limits", "utf8"))?.[1];
    return limit === "unlimited" || (limit !== undefined && 20 - nice <= Number(limit));
  } catch {
    return false;
  }
}

/** libc's sched_setscheduler for thread `tid` through bun:ffi, or undefined where libc cannot be opened. */
async function classSetter(tid: number): Promise<((policy: number) => boolean) | undefined> {
  try {
    const { dlopen, FFIType } = await import("bun:ffi");
    const lib = dlopen("libc.so.6", {
      sched_setscheduler: { args: [FFIType.i32, FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
    });
    // struct sched_param: its priority, 0 for both classes.
    const param = new Int32Array(1);
    return (policy) => lib.symbols.sched_setscheduler(tid, policy, param) === 0;
  } catch {
    return undefined;
  }
}

/**
 * Lowers the calling thread by `nice` below the process's (at most to 19) and, with `idle`, puts it
 * in the idle class where it may leave it again (Linux; elsewhere nothing). Answers whether it is
 * in the idle class.
 */
export async function lowerThisThread(nice: number, idle: boolean): Promise<boolean> {
  if (nice <= 0 || process.platform !== "linux") return false;
  const tid = threadId();
  if (tid === 0) return false;
  let lowered: number;
  try {
    lowered = Math.min(19, getPriority(tid) + nice);
    setPriority(tid, lowered);
  } catch {
    return false;
  }
  if (!idle || !mayLeaveIdle(lowered)) return false;
  const set = await classSetter(tid);
  if (!set?.(SCHED_IDLE)) return false;
  setClass = set;
  return true;
}

/**
 * Runs `fn` with this thread in the normal class when it is in the idle one (for a write holding a
 * lock that the request thread's writes wait for); as it is otherwise.
 */
export function normally<T>(fn: () => T): T {
  const set = setClass;
  if (!set?.(SCHED_OTHER)) return fn();
  try {
    return fn();
  } finally {
    set(SCHED_IDLE);
  }
}
