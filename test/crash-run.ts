// One crash round, shared by test/crash.test.ts (a few rounds) and bench/crash-soak.ts (20):
// 32 writers store into a running memd binary, it is killed with SIGKILL at a random moment,
// restarted on the same data dir, and what it acknowledged is checked against what it holds.
import { dirname } from "node:path";
import { call, startBinary } from "./binary-helpers";

const key = "memd_crash_test_root_key_0123456789";
const entitiesPerWriter = 4; // keeps each entity's events well under one 1000-event page

export interface CrashRound {
  /** Stores answered 2xx before the kill. */
  acked: number;
  /** Memories found after restart (acked ones plus any whose commit landed but whose answer was lost). */
  found: number;
  killedAfterMs: number;
  /** Every broken promise, e.g. "acked memory <id> missing"; empty when the round passed. */
  problems: string[];
}

/**
 * Runs one round on `dataDir` (created if needed): `writers` concurrent raw stores, SIGKILL after
 * a random time in [minMs, maxMs], restart, then the checks of issue 5 over HTTP.
 */
export async function crashRound(
  bin: string,
  dataDir: string,
  { writers = 32, minMs = 500, maxMs = 2500, namespace = "crash" } = {},
): Promise<CrashRound> {
  const opts = { cwd: dirname(dataDir), args: ["--data-dir", dataDir], env: { MEMD_API_KEY: key } };
  let s = await startBinary(bin, opts);
  const acked = new Set<string>();
  let dead = false;
  const writer = async (w: number) => {
    for (let i = 0; !dead; i++) {
      try {
        const r = await call(s.url, key, "POST", "/v1/memory", {
          namespace,
          entity: `w${w}.${i % entitiesPerWriter}`,
          content: `writer ${w} item ${i}`,
          infer: false,
        });
        if (r.status >= 200 && r.status < 300) acked.add(r.body.memories[0].id);
        else throw new Error(`store answered ${r.status}`);
      } catch (e) {
        if (!dead) throw e;
      }
    }
  };
  const killedAfterMs = Math.round(minMs + Math.random() * (maxMs - minMs));
  const running = Array.from({ length: writers }, (_, w) => writer(w));
  await Bun.sleep(killedAfterMs);
  dead = true; // before the kill: from here a failed request is expected, not an error
  s.proc.kill("SIGKILL");
  await s.proc.exited;
  await Promise.all(running);

  s = await startBinary(bin, opts);
  const problems: string[] = [];
  let found = 0;
  try {
    for (let n = 0; n < writers * entitiesPerWriter; n++) {
      const entity = `w${Math.floor(n / entitiesPerWriter)}.${n % entitiesPerWriter}`;
      const events = (
        await call(s.url, key, "GET", `/v1/memory/events?namespace=${namespace}&entity=${entity}&limit=1000`)
      ).body as {
        memoryId: string;
        event: string;
      }[];
      if (events.length >= 1000)
        problems.push(`${entity}: 1000+ events, too many to check in one page; shorten the round`);
      const current = (await call(s.url, key, "GET", `/v1/memory?namespace=${namespace}&entity=${entity}&limit=1000`))
        .body.memories as { id: string }[];
      const currentIds = new Set(current.map((m) => m.id));
      const added = new Set(events.filter((e) => e.event === "ADD").map((e) => e.memoryId));
      found += currentIds.size;
      for (const e of events)
        if (!currentIds.has(e.memoryId)) problems.push(`event ${e.event} of ${e.memoryId} refers to a missing memory`);
      for (const id of currentIds) if (!added.has(id)) problems.push(`memory ${id} has no ADD event`);
      // Diff, paged with nextSince, must name exactly the memories the events name.
      const created = new Set<string>();
      let since: string | undefined;
      for (let page = 0; page < 100; page++) {
        const d = (
          await call(s.url, key, "POST", "/v1/memory/diff", {
            namespace,
            entity,
            limit: 1000,
            ...(since ? { since } : {}),
          })
        ).body;
        for (const c of d.created) created.add(c.id);
        if (!d.hasMore) break;
        since = d.nextSince;
      }
      if (created.size !== added.size || [...added].some((id) => !created.has(id)))
        problems.push(`${entity}: diff names ${created.size} created, events name ${added.size} ADDs`);
    }
    // Every acknowledged store, one by one, over GET /v1/memory/:id, 32 at a time.
    const ids = [...acked];
    for (let i = 0; i < ids.length; i += 32)
      await Promise.all(
        ids.slice(i, i + 32).map(async (id) => {
          const r = await call(s.url, key, "GET", `/v1/memory/${id}`);
          if (r.status !== 200) problems.push(`acked memory ${id} missing (${r.status})`);
          const ev = (await call(s.url, key, "GET", `/v1/memory/events?memoryId=${id}`)).body;
          if (!Array.isArray(ev) || !ev.some((e: { event: string }) => e.event === "ADD"))
            problems.push(`acked memory ${id} has no ADD event`);
        }),
      );
  } finally {
    s.proc.kill("SIGTERM");
    await s.proc.exited;
  }
  return { acked: acked.size, found, killedAfterMs, problems };
}
