// @targets lmdb postgres binary
/**
 * Throws many generated bad requests at every endpoint, 16 in flight. Each must get a 4xx with
 * the error body shape, never a 5xx; the server must stay up and the store must not change by a
 * byte. Reproduce a failure with FUZZ_SEED=<seed> (and FUZZ_COUNT to change the count).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { dumpStorage, seededRandom, startTestServer, type TestServer } from "../helpers";

const seed = Number(process.env.FUZZ_SEED ?? 20260601);
const count = Number(process.env.FUZZ_COUNT ?? 12_000);
const inFlight = 16;

interface BadRequest {
  kind: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
}

const enc = new TextEncoder();
const valid = {
  store: { namespace: "fz", entity: "e", content: "c", infer: false },
  diff: { namespace: "fz" },
  keys: { name: "n", permission: "read", namespaces: ["fz"] },
  patch: { content: "x" },
  erase: { namespace: "fz", entity: "nobody" },
} as const;
type JsonEndpoint = keyof typeof valid;
// PATCH goes to a random id: even a valid body would only find nothing (404).
const jsonPaths: Record<JsonEndpoint, () => [string, string]> = {
  store: () => ["POST", "/v1/memory"],
  diff: () => ["POST", "/v1/memory/diff"],
  keys: () => ["POST", "/v1/keys"],
  patch: () => ["PATCH", `/v1/memory/${crypto.randomUUID()}`],
  erase: () => ["POST", "/v1/memory/erase"],
};
const required: Record<JsonEndpoint, string[]> = {
  store: ["namespace", "entity", "content"],
  diff: ["namespace"],
  keys: ["name", "permission", "namespaces"],
  patch: ["content"],
  erase: ["namespace", "entity"],
};

function generator(rand: () => number) {
  const int = (n: number) => Math.floor(rand() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)];
  const ctl = () => String.fromCharCode(pick([0, 1, 7, 8, 9, 10, 13, 27, 31, 127]));
  const junk = (n: number) => Array.from({ length: n }, () => String.fromCharCode(int(0x2000))).join("");
  const wrongType = (not: "string" | "number" | "boolean" | "array") =>
    pick([
      not !== "number" ? int(1e6) - 5e5 : "12",
      not !== "boolean" ? rand() < 0.5 : "true",
      null,
      not !== "array" ? [int(9), "x"] : "x",
      { a: 1 },
      not !== "string" ? "str" : 0,
    ]);
  const withControl = (s: string) => {
    const i = int(s.length + 1);
    return s.slice(0, i) + ctl() + s.slice(i);
  };
  const badId = () =>
    pick([
      () => encodeURIComponent(withControl("0190d5c8-7b7a-7cc0-8000-000000000000")),
      () => "%00",
      () => "not-a-uuid",
      () => "x".repeat(int(3000) + 65),
      () => encodeURIComponent(junk(int(40) + 1)),
      () => crypto.randomUUID(),
      () => "0190d5c8-7b7a-7cc0-8000-00000000000",
      () => "..%2F..%2Fetc%2Fpasswd",
      () => "%E0%A4%A",
      () => "%ZZ",
      () => `key_${int(1e9).toString(16)}`,
    ])();
  const absurdLimit = () => pick([-1, 0, 1001, 1e308, 1.5, -0.5, 2 ** 53, "10", null, true, [], {}, "abc"]);
  const absurdLimitQuery = () =>
    pick(["-1", "0", "1001", "1e999", "1.5", "abc", "", "NaN", "Infinity", "99999999999999999999", "%00", "1%00"]);
  const deep = (depth: number, leaf: string) => "[".repeat(depth) + leaf + "]".repeat(depth);
  const deepObj = (depth: number) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;

  /** A bad JSON body for one of the JSON endpoints: [kind, body text or bytes, content type]. */
  function badBody(ep: JsonEndpoint): [string, string | Uint8Array, string] {
    const base: Record<string, unknown> = { ...valid[ep] };
    const json = "application/json";
    const fields = Object.keys(base);
    switch (int(11)) {
      case 0: {
        const f = pick(fields);
        const v = base[f];
        base[f] = wrongType(Array.isArray(v) ? "array" : (typeof v as "string" | "boolean"));
        return [`wrong type for ${f}`, JSON.stringify(base), json];
      }
      case 1:
        base[pick(["nmespace", "__proto__x", "constructor", "id", "secret", "Namespace", junk(5)])] = pick([
          1,
          "x",
          null,
          {},
        ]);
        return ["unknown field", JSON.stringify(base), json];
      case 2:
        delete base[pick(required[ep])];
        return ["missing field", JSON.stringify(base), json];
      case 3: {
        const f = pick(ep === "keys" ? ["name", "namespaces"] : ["namespace", ...(ep === "store" ? ["entity"] : [])]);
        base[f] = f === "namespaces" ? [withControl("fz")] : withControl(String(base[f]));
        return [`control character in ${f}`, JSON.stringify(base), json];
      }
      case 4: {
        // Invalid UTF-8 inside a string: a stray continuation, an overlong NUL, a lone surrogate, a cut sequence.
        const text = JSON.stringify(base);
        const at = text.indexOf('"', 1) + 1;
        const bad = pick([[0xff], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xfe, 0xfe]]);
        const bytes = enc.encode(text);
        return ["invalid UTF-8", new Uint8Array([...bytes.slice(0, at), ...bad, ...bytes.slice(at)]), json];
      }
      case 5: {
        const text = JSON.stringify(base);
        return ["truncated body", text.slice(0, int(text.length)), json];
      }
      case 6:
        return [
          "wrong content type",
          JSON.stringify(base),
          pick([
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonx",
            "application/json-patch+json",
            "",
            "text/json",
            "*/*",
          ]),
        ];
      case 7: {
        // Deep nesting is always paired with a missing required field, so it can never be valid.
        delete base[required[ep][0]];
        const depth = pick([30, 65, 1000, 10_000, 100_000]);
        const text = JSON.stringify(base).slice(0, -1);
        return [
          `deep nesting ${depth}`,
          pick([deep(depth, "1"), `${text},"metadata":${deepObj(depth)}}`, `${text},"x":${deep(depth, "{}")}}`]),
          json,
        ];
      }
      case 8: {
        if (int(10) > 0) {
          // Large but under the body limit: over the content limit, or a huge unknown field.
          base[ep === "store" && rand() < 0.5 ? "content" : "padding"] = "x".repeat(70_000 + int(200_000));
          if (ep !== "store") base.padding2 = 1;
          return ["large field", JSON.stringify(base), json];
        }
        return ["body over 1 MiB", JSON.stringify({ ...base, content: "x".repeat(1024 * 1024 + int(1000)) }), json];
      }
      case 9:
        return [
          "not an object",
          pick(["[]", "null", "1", '"x"', "true", "[{}]", "", " ", "{}", "{,}", "{'a':1}", "\u0000", "NaN"]),
          json,
        ];
      default:
        if (ep === "store") {
          base[pick(["ttl", "importance", "tags", "metadata", "infer"])] = pick([
            -1,
            0,
            2,
            "x",
            [1],
            Array(40).fill("t"),
            "false",
            null,
          ]);
          // Any of these may be legal for some field (e.g. importance 0), so add an unknown field too.
          base.zz = 1;
          return ["bad optional field", JSON.stringify(base), json];
        }
        if (ep === "diff") {
          base[pick(["limit", "since"])] = pick([
            absurdLimit(),
            "yesterday",
            "2026-13-45T99:99:99Z",
            "9".repeat(64),
            "",
          ]);
          return ["bad limit or since", JSON.stringify(base), json];
        }
        base[pick(["permission", "expiresAt", "namespaces"])] = pick([
          "root",
          "2001-01-01T00:00:00Z",
          "soon",
          [],
          ["a*b"],
          ["*/*"],
          ["/*"],
          [""],
          Array(300).fill("a"),
        ]);
        return ["bad key field", JSON.stringify(base), json];
    }
  }

  function badQuery(path: "/v1/memory/events" | "/v1/memory" | "/v1/export"): [string, string] {
    switch (int(path === "/v1/memory" ? 7 : 6)) {
      case 0:
        return ["absurd limit", `namespace=fz&limit=${absurdLimitQuery()}`];
      case 1:
        return ["control character in namespace", `namespace=${encodeURIComponent(withControl("fz"))}`];
      case 2:
        return [
          "unknown parameter",
          `namespace=fz&${pick(["x", "namespacee", "Namespace", "__proto__", "limit[]"])}=1`,
        ];
      case 3:
        // Malformed escapes may decode leniently to a legal name, so each also carries a bad limit.
        return [
          "malformed query",
          `${pick(["namespace=%ZZ", "namespace=%", "namespace=%E0%A4%A", "&&&=", "namespace[]=fz", "namespace=fz&namespace=fz", "namespace=%C0%80", "namespace=%FF%FE", "=fz"])}&limit=0`,
        ];
      case 4:
        return path === "/v1/memory"
          ? ["missing namespace", pick(["", "entity=e", "limit=5"])]
          : ["bad memoryId", `memoryId=${badId()}`];
      case 6:
        // Lists only: a cursor that is not one of ours, or too many tags.
        return rand() < 0.7
          ? [
              "bad cursor",
              `namespace=fz&cursor=${pick(["x", "eyJiIjoxfQ", encodeURIComponent(junk(20)), Buffer.from(JSON.stringify({ b: crypto.randomUUID(), q: "0" })).toString("base64url"), "%00"])}`,
            ]
          : ["too many tags", `namespace=fz&${Array.from({ length: 33 }, (_, i) => `tag=t${i}`).join("&")}`];
      default:
        return [
          "bad entity or namespace",
          pick([
            `namespace=fz&entity=${pick([encodeURIComponent(withControl("e")), "", "x".repeat(129)])}`,
            `namespace=${pick(["", "x".repeat(129)])}`,
          ]),
        ];
    }
  }

  const badAuth = () =>
    pick([
      {},
      { authorization: "" },
      { authorization: "Bearer" },
      { authorization: "Bearer " },
      { authorization: "bearer memd_x" },
      { authorization: "Basic dXNlcjpwYXNz" },
      { authorization: `Bearer memd_${"a".repeat(int(600) + 1)}` },
      { authorization: "Bearer memd_unknown_key_000000000000" },
      { authorization: "Bearer memd_x memd_y" },
      { authorization: `Bearer ${junk(8).replace(/[^\x20-\xff]/g, "\xff")}` },
    ]) as Record<string, string>;

  const root = { authorization: "Bearer memd_test_root_key_0123456789abcdef" };

  /** The next bad request, for a uniformly chosen endpoint. */
  return function next(): BadRequest {
    const endpoint = int(14);
    // One request in ten, on any endpoint, is bad only in its Authorization header.
    if (endpoint === 13 || rand() < 0.1) {
      const target = pick([
        ["POST", "/v1/memory", JSON.stringify(valid.store)],
        ["POST", "/v1/memory/diff", JSON.stringify(valid.diff)],
        ["GET", "/v1/memory/events?namespace=fz"],
        ["GET", "/v1/memory?namespace=fz"],
        ["GET", `/v1/memory/${crypto.randomUUID()}`],
        ["DELETE", `/v1/memory/${crypto.randomUUID()}`],
        ["PATCH", `/v1/memory/${crypto.randomUUID()}`, JSON.stringify(valid.patch)],
        ["DELETE", "/v1/memory?namespace=fz&entity=e"],
        ["POST", "/v1/memory/erase", JSON.stringify({ namespace: "fz", entity: "e" })],
        ["GET", "/v1/export"],
        ["GET", "/v1/memory/erasures?namespace=fz"],
        ["POST", "/v1/keys", JSON.stringify(valid.keys)],
        ["GET", "/v1/keys"],
        ["GET", "/v1/keys/key_0"],
        ["DELETE", "/v1/keys/key_0"],
      ] as const);
      const headers = { ...badAuth(), ...(target[2] ? { "content-type": "application/json" } : {}) };
      return { kind: "bad Authorization", method: target[0], path: target[1], headers, body: target[2] };
    }
    if (endpoint < 5) {
      const ep = (["store", "diff", "keys", "patch", "erase"] as const)[endpoint];
      const [kind, body, type] = badBody(ep);
      const [method, path] = jsonPaths[ep]();
      return { kind, method, path, headers: { ...root, ...(type ? { "content-type": type } : {}) }, body };
    }
    if (endpoint === 5) {
      // A valid change with a malformed Idempotency-Key: refused before anything runs.
      const [method, path, body] = pick([
        ["POST", "/v1/memory", JSON.stringify(valid.store)],
        ["DELETE", "/v1/memory?namespace=fz&entity=e", undefined],
        ["DELETE", `/v1/memory/${crypto.randomUUID()}`, undefined],
      ] as const);
      const key = pick(["", "x".repeat(256), "x".repeat(1000), "\u00e9t\u00e9", "a\tb"]);
      const headers = { ...root, "idempotency-key": key, ...(body ? { "content-type": "application/json" } : {}) };
      return { kind: "bad Idempotency-Key", method, path, headers, body };
    }
    if (endpoint < 10) {
      const [method, path] = pick([
        ["GET", "/v1/memory/events"],
        ["GET", "/v1/memory"],
        ["DELETE", "/v1/memory"],
        ["GET", "/v1/export"],
      ] as const);
      const [kind, q] = badQuery(path === "/v1/memory" && method === "DELETE" ? "/v1/memory/events" : path);
      return { kind: `${kind} (${method} ${path})`, method, path: `${path}?${q}`, headers: root };
    }
    if (endpoint < 12) {
      const [method, base] = pick([
        ["GET", "/v1/memory/"],
        ["DELETE", "/v1/memory/"],
        ["GET", "/v1/keys/"],
        ["DELETE", "/v1/keys/"],
        ["PATCH", "/v1/memory/"],
      ] as const);
      return { kind: `bad :id (${method} ${base})`, method, path: base + badId(), headers: root };
    }
    // Wrong methods and paths around the real routes.
    const [method, path] = pick([
      ["PUT", "/v1/memory"],
      ["PATCH", "/v1/keys"],
      ["PUT", "/v1/keys/key_0"],
      ["POST", "/v1/memory/events"],
      ["GET", "/v1/memory/diff"],
      ["POST", `/v1/memory/${crypto.randomUUID()}`],
      ["GET", "/v1/memories"],
      ["GET", "/v1/memory/events/x"],
      ["GET", "/v2/memory"],
      ["PUT", "/v1/memory/erase"],
      ["GET", "/v1/memory/erase"],
      ["POST", "/v1/export"],
      ["PATCH", "/v1/memory"],
    ] as const);
    return { kind: "wrong method or path", method, path, headers: root };
  };
}

let s: TestServer;

/** Every record the backend holds, as one string (see dumpStorage). */
const exportStore = () => dumpStorage(s.server.core.storage);

async function exportApi(): Promise<string> {
  const paths = ["/v1/memory/events?namespace=fz&limit=1000", "/v1/memory?namespace=fz&limit=1000", "/v1/keys"];
  return (await Promise.all(paths.map(async (p) => (await s.api("GET", p)).text()))).join("\n");
}

beforeAll(async () => {
  s = await startTestServer();
  for (let i = 0; i < 5; i++) {
    const r = await s.json("POST", "/v1/memory", { ...valid.store, content: `fact ${i}`, tags: ["t"], ttl: 86400 });
    expect(r.status).toBe(200);
  }
  expect((await s.json("POST", "/v1/keys", valid.keys)).status).toBe(201);
});
afterAll(() => s.stop());

test(`${count} bad requests (seed ${seed}): all 4xx with the error shape, server alive, store unchanged`, async () => {
  const beforeApi = await exportApi();
  const beforeStore = await exportStore();
  const next = generator(seededRandom(seed));
  const requests = Array.from({ length: count }, next);
  const failures: string[] = [];
  const kinds = new Map<string, number>();
  let done = 0;
  const started = performance.now();

  async function worker() {
    while (done < requests.length) {
      const i = done++;
      const r = requests[i];
      kinds.set(r.kind, (kinds.get(r.kind) ?? 0) + 1);
      const describe = () =>
        `#${i} ${r.kind}: ${r.method} ${r.path.slice(0, 120)} ${JSON.stringify(r.headers).slice(0, 120)} ${String(r.body ?? "").slice(0, 120)}`;
      try {
        const res = await fetch(s.url + r.path, { method: r.method, headers: r.headers, body: r.body });
        const text = await res.text();
        let body: any;
        try {
          body = JSON.parse(text);
        } catch {}
        const shapeOk =
          typeof body?.error?.code === "string" &&
          typeof body.error.message === "string" &&
          Object.keys(body).length === 1 &&
          Object.keys(body.error).every((k) => ["code", "message", "details"].includes(k));
        if (res.status < 400 || res.status > 499 || !shapeOk)
          failures.push(`${res.status} ${text.slice(0, 160)} <- ${describe()}`);
      } catch (e) {
        failures.push(`fetch failed: ${e} <- ${describe()}`);
      }
    }
  }
  await Promise.all(Array.from({ length: inFlight }, worker));
  const seconds = (performance.now() - started) / 1000;
  console.log(
    `fuzz: ${count} requests in ${seconds.toFixed(2)} s, ${inFlight} in flight, seed ${seed}, ${kinds.size} kinds`,
  );

  expect(failures.slice(0, 10)).toEqual([]);
  expect(kinds.size).toBeGreaterThan(30);
  expect((await s.json("GET", "/healthz", undefined, { key: null })).status).toBe(200);
  expect(await exportApi()).toBe(beforeApi);
  expect(await exportStore()).toBe(beforeStore);
  await s.settleLogs();
  expect(s.logs.filter((l) => l.includes('"level":"error"'))).toEqual([]);
  // And it still works.
  expect((await s.json("GET", "/v1/memory?namespace=fz")).body.memories).toHaveLength(5);
}, 60_000);

test("nesting: 64 levels are stored, 65 are refused with 400 before parsing", async () => {
  // `depth` objects inside the body's own object.
  const nested = (depth: number) => JSON.parse(`${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`);
  const ok = await s.json("POST", "/v1/memory", { ...valid.store, namespace: "deep", metadata: nested(63) });
  expect(ok.status).toBe(200);
  const refused = await s.json("POST", "/v1/memory", { ...valid.store, namespace: "deep", metadata: nested(64) });
  expect(refused).toMatchObject({
    status: 400,
    body: { error: { code: "invalid_request", message: "the body is nested deeper than 64 levels" } },
  });
  const brackets = await s.json("POST", "/v1/memory", {
    ...valid.store,
    namespace: "deep",
    content: "[[[[{{{{".repeat(100),
  });
  expect(brackets.status).toBe(200);
});
