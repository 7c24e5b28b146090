/** Runs `fn` after every earlier call with the same key has settled: an in-process async mutex. */
export function keyedMutex() {
  const tails = new Map<string, Promise<unknown>>();
  return async function serialized<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const run = (tails.get(key) ?? Promise.resolve()).then(fn);
    const tail = run.catch(() => undefined);
    tails.set(key, tail);
    try {
      return await run;
    } finally {
      if (tails.get(key) === tail) tails.delete(key);
    }
  };
}
