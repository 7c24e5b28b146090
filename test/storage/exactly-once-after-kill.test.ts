// Exactly once with Idempotency-Key on LMDB across a kill -9: writers store with keys, memd is
// killed in the middle of their stores and started again on the same data dir, and every request
// sent (answered or not) is sent again with its key. Each is answered 200; an answered one
// replays its first answer; and each key made exactly one memory, since the kept answer is
// written in the same transaction as the memory. Deterministic: the kill follows progress (a
// number of answered stores), not a time.
import { afterAll, expect, test } from "bun:test";
import { rootSecret, type ServerProcess, spawnServer, tempDir } from "../helpers";

const dir = tempDir("memd-once-");
const namespace = "once";
let server: ServerProcess | undefined;

afterAll(async () => {
  server?.proc.kill("SIGKILL");
  await server?.proc.exited;
  dir.cleanup();
});

const start = () => spawnServer(["--data-dir", `${dir.dir}/data`], { MEMD_API_KEY: rootSecret });

async function store(url: string, w: number, i: number) {
  const res = await fetch(`${url}/v1/memory`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${rootSecret}`,
      "content-type": "application/json",
      "idempotency-key": `once-${w}-${i}`,
    },
    body: JSON.stringify({ namespace, entity: `w${w}`, content: `writer ${w} store ${i}`, infer: false }),
    signal: AbortSignal.timeout(15_000),
  });
  const body = (await res.json()) as { memories: { id: string }[] };
  return { status: res.status, replayed: res.headers.get("idempotent-replayed") === "true", body };
}

test("kill -9 in the middle of stores with Idempotency-Keys: every key sent again makes exactly one memory", async () => {
  server = await start();
  const url = server.url;
  const sent = new Map<string, [number, number]>();
  const answered = new Map<string, string>();
  let dead = false;
  const writers = Array.from({ length: 16 }, (_, w) =>
    (async () => {
      for (let i = 0; !dead; i++) {
        sent.set(`${w}-${i}`, [w, i]);
        const r = await store(url, w, i).catch(() => undefined);
        if (r?.status === 200) answered.set(`${w}-${i}`, r.body.memories[0].id);
        else if (!dead) throw new Error(`store ${w}-${i} answered ${r?.status ?? "nothing"} before the kill`);
      }
    })(),
  );
  const deadline = Date.now() + 30_000;
  while (answered.size < 200 && Date.now() < deadline) await Bun.sleep(5);
  expect(answered.size).toBeGreaterThanOrEqual(200);
  dead = true;
  server.proc.kill("SIGKILL");
  await server.proc.exited;
  await Promise.all(writers);

  server = await start();
  const again = await Promise.all([...sent].map(async ([k, [w, i]]) => ({ k, r: await store(server!.url, w, i) })));
  expect(again.filter(({ r }) => r.status !== 200).map(({ k }) => k)).toEqual([]);
  // An answered store replays its first answer, the same memory.
  const changed = again.filter(
    ({ k, r }) => answered.has(k) && (!r.replayed || r.body.memories[0].id !== answered.get(k)),
  );
  expect(changed.map(({ k }) => k)).toEqual([]);

  // Each key made exactly one memory, and nothing else is stored.
  const contents: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const res = await fetch(
      `${server.url}/v1/memory?namespace=${namespace}&limit=1000${cursor ? `&cursor=${cursor}` : ""}`,
      { headers: { authorization: `Bearer ${rootSecret}` } },
    );
    const body = (await res.json()) as { memories: { content: string }[]; nextCursor: string | null };
    contents.push(...body.memories.map((m) => m.content));
    if (!body.nextCursor) break;
    cursor = body.nextCursor;
  }
  const expected = [...sent.values()].map(([w, i]) => `writer ${w} store ${i}`).sort();
  expect(contents.sort()).toEqual(expected);
}, 120_000);
