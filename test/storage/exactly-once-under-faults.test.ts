// The fault soak of issue 22: three replicas behind PgBouncer in transaction mode, 32 writers
// storing with Idempotency-Keys and retrying on 503 and on connection errors, readers paging the
// diff, while PostgreSQL is restarted (fast, then immediate), PgBouncer is restarted, PostgreSQL
// is frozen for 3 s, and a replica is killed with kill -9 and started again. At the end every
// acknowledged store exists exactly once, every key made one memory, the diff pages every event
// once and in order, and the replicas answer the same.
//
// `make test` runs one round (one fault of each kind); `make soak` runs rounds for
// MEMD_SOAK_SECONDS. Faults follow progress, not the clock: each waits for new acknowledged
// stores since the last one (bounded waits), and nothing asserts a duration. Needs the private
// PostgreSQL of scripts/with-postgres (it stops and freezes it) and PgBouncer; without either
// the test fails with the reason.
//
// A failure says why: the first error (a fault that could not be made, no progress after one, or
// a store never acknowledged) stops the writers at once and is the one reported, with the
// answers the store (or the last stores) got, each with its replica's log line (none: the
// request was never answered), the database's sessions, the last lines of PostgreSQL's and
// PgBouncer's logs, and what each replica logged as warnings and errors.
// MEMD_SOAK_TRACE=<file> writes every answer and fault with its time, to look at a run.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { SQL } from "bun";
import { freshDatabase, postgresUrl, rootSecret, type ServerProcess, spawnServer, tempDir } from "../helpers";

const writersCount = 32;
const soakSeconds = Number(process.env.MEMD_SOAK_SECONDS ?? 0);
const namespace = "soak";
const dir = tempDir("memd-soak-");
/** How long one store may take, all its retries included, before the soak fails saying why. */
const storeDeadlineMs = 120_000;
/** Every request of the soak gets an answer within this, or counts as a cut connection. */
const requestTimeoutMs = 15_000;

interface Replica extends ServerProcess {
  name: string;
}

const pg = () => {
  const { MEMD_TEST_PG_BIN: bin, MEMD_TEST_PG_DATA: data, MEMD_TEST_PG_SOCKET: socket } = process.env;
  if (!bin || !data || !socket)
    throw new Error(
      "the fault soak restarts and freezes PostgreSQL, so it needs the private server of scripts/with-postgres (MEMD_TEST_PG_DATA is unset)",
    );
  const asPg = process.env.MEMD_TEST_PG_USER ? ["runuser", "-u", process.env.MEMD_TEST_PG_USER, "--"] : [];
  return {
    asPg,
    data,
    restart(mode: "fast" | "immediate") {
      // restart keeps the options the server was started with (postmaster.opts).
      const r = Bun.spawnSync(
        [...asPg, `${bin}/pg_ctl`, "-D", data, "-l", `${socket}/server.log`, "-m", mode, "-w", "-t", "60", "restart"],
        { stdout: "pipe", stderr: "pipe" },
      );
      if (r.exitCode !== 0) throw new Error(`pg_ctl restart -m ${mode}: ${r.stderr.toString()}${r.stdout.toString()}`);
    },
    /** The postmaster and its children, for SIGSTOP and SIGCONT. */
    pids() {
      const postmaster = readFileSync(`${data}/postmaster.pid`, "utf8").split("\n")[0].trim();
      const children = Bun.spawnSync(["pgrep", "-P", postmaster]).stdout.toString().trim().split(/\s+/);
      return [postmaster, ...children.filter(Boolean)];
    },
  };
};

/** PgBouncer 1.18 in transaction mode in front of the test PostgreSQL, on a port of its own. */
function pgbouncer(serverUrl: string, asPg: string[]) {
  const bin = ["/usr/sbin/pgbouncer", Bun.which("pgbouncer")].find((p) => p && Bun.file(p).size > 0);
  if (!bin) throw new Error("the fault soak needs PgBouncer (Debian's pgbouncer package; make pg-deps installs it)");
  const [, user, host, port] = /^postgres(?:ql)?:\/\/([^@]+)@([^:/]+):(\d+)\//.exec(serverUrl)!;
  // A port no socket holds now (the kernel's pick for a listener, let go), not a random one: one
  // that a connection on this busy machine held made PgBouncer's start fail (1 run in ~35).
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const listen = probe.port;
  probe.stop(true);
  const ini = `${dir.dir}/pgbouncer.ini`;
  const pidfile = `${dir.dir}/pgbouncer.pid`;
  writeFileSync(`${dir.dir}/users.txt`, `"${user}" ""\n`);
  writeFileSync(
    ini,
    [
      "[databases]",
      `* = host=${host} port=${port}`,
      "[pgbouncer]",
      "listen_addr = 127.0.0.1",
      `listen_port = ${listen}`,
      "unix_socket_dir =",
      "auth_type = trust",
      `auth_file = ${dir.dir}/users.txt`,
      "pool_mode = transaction",
      "max_client_conn = 1000",
      "default_pool_size = 20",
      // After a failed server login (PostgreSQL restarting), PgBouncer refuses every client for
      // this long before it tries again (15 s by default): memd answers 503 meanwhile, which this
      // test already sees at each restart; a second keeps the wait short.
      "server_login_retry = 1",
      `logfile = ${dir.dir}/pgbouncer.log`,
      `pidfile = ${pidfile}`,
      "",
    ].join("\n"),
  );
  const alive = () => {
    try {
      const pid = Number(readFileSync(pidfile, "utf8").trim());
      process.kill(pid, 0);
      return pid;
    } catch {
      return undefined;
    }
  };
  /** Stopped on purpose (the restart fault, the end): not a crash. */
  let stopped = false;
  return {
    url: (database: string) => `postgres://${user}@127.0.0.1:${listen}/${database}`,
    /**
     * PgBouncer gone without a stop. 1.18 can crash under these faults ("FATAL
     * @src/objects.c:1060 in function disconnect_client(): bad client state: 0", after a cancel
     * request during the freeze): then every store is refused until it runs again.
     */
    crashed: () => !stopped && alive() === undefined,
    /** Its own last FATAL line (not a server's refusal it logged), if any. */
    fatal: () => tail(`${dir.dir}/pgbouncer.log`, 40).findLast((l) => /\] FATAL /.test(l)),
    async start() {
      if (asPg.length) Bun.spawnSync(["chown", "-R", asPg[2], dir.dir]);
      const r = Bun.spawnSync([...asPg, bin, "-d", ini], { stdout: "pipe", stderr: "pipe" });
      const log = () => tail(`${dir.dir}/pgbouncer.log`, 8).join("\n");
      if (r.exitCode !== 0) throw new Error(`pgbouncer did not start: ${r.stderr.toString()}\n${log()}`);
      if (!(await until(10_000, async () => alive() !== undefined)))
        throw new Error(`pgbouncer did not start within 10 s; its log ends:\n${log()}`);
      stopped = false;
    },
    async stop() {
      stopped = true;
      const pid = alive();
      if (pid === undefined) return;
      process.kill(pid, "SIGTERM");
      if (!(await until(10_000, async () => alive() === undefined)))
        throw new Error("pgbouncer did not stop within 10 s");
    },
  };
}

/** Polls `check` until it returns true or `ms` pass; true when it did. */
async function until(ms: number, check: () => Promise<boolean>, everyMs = 25): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await Bun.sleep(everyMs);
  }
  return check();
}

let databaseUrl: string;
let bouncer: ReturnType<typeof pgbouncer>;
const replicas: Replica[] = [];

async function startReplica(name: string): Promise<Replica> {
  const dbName = new URL(databaseUrl).pathname.slice(1);
  const p = await spawnServer(
    [
      "--database-url",
      bouncer.url(dbName),
      "--database-pooler",
      "transaction",
      "--data-dir",
      `${dir.dir}/${name}`,
      "--db-pool",
      "4",
      "--db-connect-timeout-ms",
      "1000",
      "--db-statement-timeout-ms",
      "2000",
    ],
    { MEMD_API_KEY: rootSecret },
  );
  return { ...p, name };
}

beforeAll(async () => {
  const server = pg();
  databaseUrl = await freshDatabase();
  bouncer = pgbouncer(postgresUrl(), server.asPg);
  await bouncer.start();
  for (const name of ["a", "b", "c"]) replicas.push(await startReplica(name));
}, 60_000);

afterAll(async () => {
  for (const r of replicas) r.proc.kill("SIGKILL");
  await Promise.all(replicas.map((r) => r.proc.exited));
  await bouncer?.stop().catch(() => undefined);
  dir.cleanup();
});

interface Counts {
  acknowledged: number;
  attempts: number;
  retried: number;
  unavailable: number;
  outcomeUnknown: number;
  connectionErrors: number;
  replayed: number;
  faults: string[];
}

/** One answer to a store, as a failure message shows it. */
interface Answered {
  replica: Replica;
  requestId: string;
  said: string;
}

type Answer = { status: number; body: any; replayed: boolean } | { error: string };

async function post(r: Replica, body: object, key: string, requestId: string): Promise<Answer> {
  try {
    const res = await fetch(`${r.url}/v1/memory`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${rootSecret}`,
        "content-type": "application/json",
        "idempotency-key": key,
        "x-request-id": requestId,
      },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(requestTimeoutMs),
    });
    const text = await res.text();
    return {
      status: res.status,
      body: text ? JSON.parse(text) : undefined,
      replayed: res.headers.has("idempotent-replayed"),
    };
  } catch (e) {
    return { error: String(e) };
  }
}

test(
  "exactly once under faults: restarts of PostgreSQL and PgBouncer, a frozen PostgreSQL, a replica killed with kill -9",
  async () => {
    const server = pg();
    const counts: Counts = {
      acknowledged: 0,
      attempts: 0,
      retried: 0,
      unavailable: 0,
      outcomeUnknown: 0,
      connectionErrors: 0,
      replayed: 0,
      faults: [],
    };
    /** content -> the memory id of its acknowledged answer. */
    const acked = new Map<string, string>();
    const unexpected: string[] = [];
    let stopping = false;

    const started = Date.now();
    // MEMD_SOAK_TRACE=<file>: every answer (ms since the start, ms taken, replica, request, what), and the faults.
    const trace = process.env.MEMD_SOAK_TRACE ? ([] as string[]) : undefined;
    let failure: Error | undefined;
    /** The last answers of all writers (for the message when no store is acknowledged after a fault). */
    const recent: Answered[] = [];
    const lastFault = () => counts.faults.at(-1) ?? "none yet";

    /** One store, retried with the same key (through any replica) until it is acknowledged. */
    async function store(w: number, i: number) {
      const content = `writer ${w} store ${i}`;
      const key = `soak-${w}-${i}`;
      const body = { namespace, entity: `writer-${w}`, content, infer: false };
      const began = Date.now();
      const deadline = began + storeDeadlineMs;
      // Every answer this key got, so that a store never acknowledged says why.
      const answers: Answered[] = [];
      for (let attempt = 0; Date.now() < deadline; attempt++) {
        if (failure) return; // the test failed elsewhere and says why
        counts.attempts++;
        if (attempt > 0) counts.retried++;
        const replica = replicas[(w + attempt) % replicas.length];
        const requestId = `${key}.${attempt}`;
        const sent = Date.now();
        const a = await post(replica, body, key, requestId);
        const what = "error" in a ? a.error : `${a.status} ${a.body?.error?.code ?? ""}`;
        if (trace) trace.push(`${sent - started} ${Date.now() - sent} ${replica.name} ${requestId} ${what}`);
        const answer = {
          replica,
          requestId,
          said: `+${sent - began} ms (at ${sent - started} ms), replica ${replica.name} (pid ${replica.proc.pid}), ${requestId}: ${what} after ${Date.now() - sent} ms (last fault: ${lastFault()})`,
        };
        answers.push(answer);
        recent.push(answer);
        if (recent.length > 24) recent.shift();
        if ("error" in a) counts.connectionErrors++;
        else if (a.status === 200) {
          const id = a.body.memories[0].id as string;
          if (a.body.memories[0].content !== content) unexpected.push(`${key}: answered with another memory`);
          if (a.replayed) counts.replayed++;
          acked.set(content, id);
          counts.acknowledged++;
          return;
        } else if (a.status === 503 && a.body?.error?.code === "storage_unavailable") counts.unavailable++;
        else if (a.status === 503 && a.body?.error?.code === "outcome_unknown") counts.outcomeUnknown++;
        else if (a.status === 503 && a.body?.error?.code === "not_ready") counts.unavailable++;
        else unexpected.push(`${key}: ${a.status} ${JSON.stringify(a.body)}`);
        await Bun.sleep(Math.min(500, 20 + attempt * 10));
      }
      throw new Error(`${key} was not acknowledged within ${storeDeadlineMs / 1000} s.\n${await whyNot(answers)}`);
    }

    /** A store's answers, the log line of each on its replica (none: never answered), and the database's sessions. */
    async function whyNot(answers: Answered[]) {
      const shown = answers.length > 24 ? [...answers.slice(0, 8), ...answers.slice(-16)] : answers;
      const lines = shown.map(({ replica, requestId, said }) => {
        const logged = `${replica.stdout()}\n${replica.stderr()}`
          .split("\n")
          .filter((l) => l.includes(`"${requestId}"`));
        return `  ${said}\n    log: ${logged.length > 0 ? logged.join("\n    ") : "(no line: never answered)"}`;
      });
      const sql = new SQL({ url: postgresUrl(), max: 1, connectionTimeout: 5 });
      let sessions: string;
      try {
        const read = (async () => {
          const rows = await sql`SELECT pid, state, wait_event_type, wait_event, now() - xact_start AS in_xact,
            left(query, 100) AS query FROM pg_stat_activity WHERE datname = ${new URL(databaseUrl).pathname.slice(1)}`;
          const all =
            await sql`SELECT datname, state, count(*)::int AS n FROM pg_stat_activity GROUP BY 1, 2 ORDER BY 1, 2`;
          return [...rows, ...all].map((r: object) => `  ${JSON.stringify(r)}`).join("\n");
        })();
        const late = Bun.sleep(10_000).then(() => "  (no answer from PostgreSQL within 10 s)");
        sessions = await Promise.race([read, late]);
      } catch (e) {
        sessions = `  (could not read pg_stat_activity: ${e})`;
      } finally {
        await sql.close({ timeout: 0 });
      }
      return [
        `faults so far: ${counts.faults.join("; ") || "none"}; acknowledged ${counts.acknowledged}`,
        `answers (${answers.length}${shown.length < answers.length ? `, ${shown.length} shown` : ""}):`,
        ...lines,
        "sessions of the database, then of the server by database and state:",
        sessions,
        "PostgreSQL's log (last lines):",
        ...tail(`${process.env.MEMD_TEST_PG_SOCKET}/server.log`, 16),
        "PgBouncer's log (last lines):",
        ...tail(`${dir.dir}/pgbouncer.log`, 12),
        ...[...new Set(answers.map((a) => a.replica))].map(
          (r) => `replica ${r.name} (pid ${r.proc.pid}) errors:\n  ${logErrors(r).join("\n  ") || "(none)"}`,
        ),
      ].join("\n");
    }
    const writers = Array.from({ length: writersCount }, (_, w) =>
      (async () => {
        for (let i = 0; !stopping && !failure; i++) await store(w, i);
      })().catch((e) => {
        failure ??= e;
      }),
    );

    // Readers page the diff from the beginning while the faults happen; each full pass must hold
    // every memory once, in order (errors, such as a 503 during a fault, end the pass).
    const readerAnomalies: string[] = [];
    const readers = [0, 1].map((n) =>
      (async () => {
        while (!stopping) {
          const r = replicas[n % replicas.length];
          const seen = await pageDiff(r).catch(() => undefined);
          if (seen) {
            const anomaly = checkOrder(seen);
            if (anomaly) readerAnomalies.push(`reader ${n}: ${anomaly}`);
          }
          await Bun.sleep(50);
        }
      })(),
    );

    // PgBouncer runs under a supervisor in production (systemd's Restart=): here too. What this
    // test checks is memd's answers across the outage, whatever ended PgBouncer.
    const poolerCrashes: string[] = [];
    const supervisor = (async () => {
      while (!stopping) {
        if (bouncer.crashed()) {
          poolerCrashes.push(bouncer.fatal() ?? "exited");
          trace?.push(`${Date.now() - started} PgBouncer crashed: ${poolerCrashes.at(-1)}`);
          await bouncer.start().catch((e) => {
            failure ??= e as Error;
          });
        }
        await Bun.sleep(100);
      }
    })();

    /** Waits for `n` more acknowledged stores: the service came back after the last fault. */
    const progress = async (n: number, after: string) => {
      const from = counts.acknowledged;
      const done = await until(60_000, async () => failure !== undefined || counts.acknowledged >= from + n, 50);
      if (failure) throw failure;
      if (!done) throw new Error(`no ${n} acknowledged stores within 60 s after ${after}.\n${await whyNot(recent)}`);
    };

    const faults: [string, () => Promise<void>][] = [
      ["PostgreSQL restarted (fast)", async () => server.restart("fast")],
      ["PostgreSQL restarted (immediate)", async () => server.restart("immediate")],
      [
        "PgBouncer restarted",
        async () => {
          await bouncer.stop();
          await bouncer.start();
        },
      ],
      [
        "PostgreSQL frozen for 3 s",
        async () => {
          const pids = server.pids();
          Bun.spawnSync(["kill", "-STOP", ...pids]);
          await Bun.sleep(3000);
          Bun.spawnSync(["kill", "-CONT", ...pids]);
        },
      ],
      [
        "a replica killed with kill -9 and started again",
        async () => {
          const victim = replicas[1];
          victim.proc.kill("SIGKILL");
          await victim.proc.exited;
          replicas[1] = await startReplica("b");
        },
      ],
    ];

    try {
      await progress(writersCount, "the start");
      for (let round = 0; round === 0 || Date.now() - started < soakSeconds * 1000; round++)
        for (const [name, inject] of faults) {
          trace?.push(`${Date.now() - started} fault: ${name}`);
          await inject();
          counts.faults.push(name);
          trace?.push(`${Date.now() - started} fault done: ${name}`);
          // Service is back: a quarter of the writers got an answer since (more in a long soak).
          await progress(soakSeconds > 0 ? writersCount : writersCount / 4, name);
        }
    } catch (e) {
      // A fault that could not be made, or no progress after one: the writers stop at once.
      failure ??= e as Error;
    } finally {
      stopping = true;
      await Promise.all([...writers, ...readers, supervisor]);
    }
    if (trace) writeFileSync(process.env.MEMD_SOAK_TRACE!, `${trace.join("\n")}\n`);
    if (failure) throw failure;

    // Every acknowledged store exactly once; every key one memory; nothing else stored.
    const sql = new SQL(databaseUrl);
    let rows: { id: string; content: string }[];
    let answers: number;
    try {
      rows = [...(await sql`SELECT id::text AS id, content FROM memories WHERE namespace = ${namespace}`)];
      [{ n: answers }] = await sql`SELECT count(*)::int AS n FROM idempotency WHERE state = 'done'`;
    } finally {
      await sql.close();
    }
    const byContent = new Map<string, string[]>();
    for (const r of rows) byContent.set(r.content, [...(byContent.get(r.content) ?? []), r.id]);
    const duplicates = [...byContent.values()].filter((ids) => ids.length > 1).length;
    const lost = [...acked].filter(([content, id]) => byContent.get(content)?.[0] !== id).length;
    const unasked = rows.filter((r) => !acked.has(r.content)).length;

    // The diff from the beginning, through every replica: every event once, in order, and the same.
    const pages = await Promise.all(replicas.map((r) => pageDiff(r)));
    const diffOrder = pages.map(checkOrder).filter(Boolean);
    const sameOnAll = pages.every((p) => JSON.stringify(p) === JSON.stringify(pages[0]));
    const diffIds = new Set(pages[0].map((s) => s.id));
    const missingFromDiff = [...acked.values()].filter((id) => !diffIds.has(id)).length;

    console.log(
      `soak (${Math.round((Date.now() - started) / 1000)} s): acknowledged ${counts.acknowledged}, retried ${counts.retried} (503 storage_unavailable or not_ready ${counts.unavailable}, 503 outcome_unknown ${counts.outcomeUnknown}, connection errors ${counts.connectionErrors}; ${counts.replayed} answered by replay), faults ${counts.faults.length} (${counts.faults.join("; ")}), PgBouncer crashes restarted ${poolerCrashes.length}${poolerCrashes.length ? ` (${poolerCrashes.join("; ")})` : ""}, duplicates: ${duplicates}, lost: ${lost}`,
    );
    expect(unexpected).toEqual([]);
    expect({ duplicates, lost, unasked, missingFromDiff }).toEqual({
      duplicates: 0,
      lost: 0,
      unasked: 0,
      missingFromDiff: 0,
    });
    expect(rows.length).toBe(counts.acknowledged);
    expect(answers).toBe(counts.acknowledged);
    expect(pages[0].length).toBe(counts.acknowledged);
    expect(diffOrder).toEqual([]);
    expect(readerAnomalies).toEqual([]);
    expect(sameOnAll).toBe(true);
    expect(counts.faults.length % faults.length).toBe(0);
  },
  Math.max(240_000, (soakSeconds + 240) * 1000),
);

/** The last `n` lines of a log file that start with a time (not a statement's continuation), indented. */
function tail(path: string, n: number): string[] {
  try {
    return readFileSync(path, "utf8")
      .split("\n")
      .filter((l) => /^\d{4}-/.test(l))
      .slice(-n)
      .map((l) => `  ${l.slice(0, 300)}`);
  } catch (e) {
    return [`  (${e})`];
  }
}

/** What a replica logged at level warn or error: each message once, with its count and last time. */
function logErrors(r: Replica): string[] {
  const seen = new Map<string, { n: number; last: string }>();
  for (const line of `${r.stdout()}\n${r.stderr()}`.split("\n")) {
    if (!/"level":"(warn|error)"/.test(line)) continue;
    let what = line;
    let last = "?";
    try {
      const { time, level, ...rest } = JSON.parse(line);
      what = `${level} ${JSON.stringify(rest)}`;
      last = time;
    } catch {} // a line cut short: shown as it is
    seen.set(what, { n: (seen.get(what)?.n ?? 0) + 1, last });
  }
  return [...seen].map(([what, { n, last }]) => `${n} × ${what} (last at ${last})`);
}

/** Every memory created in the namespace, through the diff from the beginning, paged by nextSince. */
async function pageDiff(r: Replica): Promise<{ id: string; createdAt: string }[]> {
  const seen: { id: string; createdAt: string }[] = [];
  let since: string | undefined;
  for (let pages = 0; pages < 10_000; pages++) {
    const res = await fetch(`${r.url}/v1/memory/diff`, {
      method: "POST",
      headers: { authorization: `Bearer ${rootSecret}`, "content-type": "application/json" },
      body: JSON.stringify({ namespace, limit: 500, ...(since ? { since } : {}) }),
      signal: AbortSignal.timeout(requestTimeoutMs),
    });
    if (res.status !== 200) throw new Error(`diff answered ${res.status}`);
    const d = (await res.json()) as any;
    for (const c of d.created) seen.push({ id: c.id, createdAt: c.createdAt });
    since = d.nextSince ?? since;
    if (!d.hasMore) return seen;
  }
  throw new Error("the diff did not end within 10,000 pages");
}

/** Undefined when every memory appears once with strictly increasing times; else what is wrong. */
function checkOrder(seen: { id: string; createdAt: string }[]): string | undefined {
  if (new Set(seen.map((s) => s.id)).size !== seen.length) return "a memory appears twice";
  const bad = seen.findIndex((s, i) => i > 0 && Date.parse(s.createdAt) <= Date.parse(seen[i - 1].createdAt));
  return bad === -1 ? undefined : `not in order at ${bad}: ${seen[bad - 1].createdAt} then ${seen[bad].createdAt}`;
}
