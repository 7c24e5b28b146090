// @targets lmdb postgres binary
/**
 * The authorization matrix: every endpoint × every kind of caller × every kind of namespace,
 * each with its exact status and error code. Callers' keys cover ["own", "team-a/*"].
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../helpers";

let s: TestServer;
const scope = ["own", "team-a/*"];

const nsCases = {
  own: "own",
  foreign: "other",
  "prefix match": "team-a/x",
  "prefix near-miss": "team-ab",
} as const;
type NsCase = keyof typeof nsCases;
const inScope = (c: NsCase) => c === "own" || c === "prefix match";

type Caller = "no key" | "malformed header" | "unknown key" | "expired" | "revoked" | "read" | "read_write" | "admin";
const callers: Caller[] = [
  "no key",
  "malformed header",
  "unknown key",
  "expired",
  "revoked",
  "read",
  "read_write",
  "admin",
];
const level: Partial<Record<Caller, number>> = { read: 0, read_write: 1, admin: 2 };
const headerOf: Partial<Record<Caller, string | null>> = {
  "no key": null,
  "malformed header": "Token memd_abc",
  "unknown key": "Bearer memd_not_a_key_0000000000000000000000",
};

async function createKey(body: Record<string, unknown>): Promise<{ id: string; secret: string }> {
  const r = await s.json("POST", "/v1/keys", { namespaces: scope, ...body });
  expect(r.status).toBe(201);
  return r.body;
}

async function seedMemory(namespace: string): Promise<string> {
  const r = await s.json("POST", "/v1/memory", { namespace, entity: "u1", content: "likes tea", infer: false });
  expect(r.status).toBe(200);
  return r.body.memories[0].id;
}

interface Call {
  method: string;
  path: string;
  body?: unknown;
  /** Something the answer must show beyond the status (only checked on success). */
  check?: (body: any) => void;
}

interface Endpoint {
  name: string;
  /** 0 read, 1 read_write, 2 admin. */
  needs: number;
  okStatus: number;
  /** The answer outside the key's namespaces: 403 where the namespace is named, else 404 (no probing). */
  outside: [number, string] | "ok";
  call: (ns: string) => Promise<Call>;
}

const endpoints: Endpoint[] = [
  {
    name: "POST /v1/memory",
    needs: 1,
    okStatus: 200,
    outside: [403, "forbidden"],
    call: async (ns) => ({
      method: "POST",
      path: "/v1/memory",
      body: { namespace: ns, entity: "u", content: "x", infer: false },
    }),
  },
  {
    name: "POST /v1/memory/diff",
    needs: 0,
    okStatus: 200,
    outside: [403, "forbidden"],
    call: async (ns) => ({ method: "POST", path: "/v1/memory/diff", body: { namespace: ns } }),
  },
  {
    name: "GET /v1/memory/events?namespace",
    needs: 0,
    okStatus: 200,
    outside: [403, "forbidden"],
    call: async (ns) => ({ method: "GET", path: `/v1/memory/events?namespace=${encodeURIComponent(ns)}` }),
  },
  {
    name: "GET /v1/memory/events?memoryId",
    needs: 0,
    okStatus: 200,
    outside: [404, "not_found"],
    call: async (ns) => {
      const id = await seedMemory(ns);
      return { method: "GET", path: `/v1/memory/events?memoryId=${id}`, check: (b) => expect(b[0].memoryId).toBe(id) };
    },
  },
  {
    name: "GET /v1/memory",
    needs: 0,
    okStatus: 200,
    outside: [403, "forbidden"],
    call: async (ns) => ({ method: "GET", path: `/v1/memory?namespace=${encodeURIComponent(ns)}` }),
  },
  {
    name: "GET /v1/memory/:id",
    needs: 0,
    okStatus: 200,
    outside: [404, "not_found"],
    call: async (ns) => {
      const id = await seedMemory(ns);
      return { method: "GET", path: `/v1/memory/${id}`, check: (b) => expect(b.id).toBe(id) };
    },
  },
  {
    name: "DELETE /v1/memory/:id",
    needs: 1,
    okStatus: 200,
    outside: [404, "not_found"],
    call: async (ns) => ({ method: "DELETE", path: `/v1/memory/${await seedMemory(ns)}` }),
  },
  {
    name: "POST /v1/keys",
    needs: 2,
    okStatus: 201,
    outside: [403, "forbidden"],
    call: async (ns) => ({
      method: "POST",
      path: "/v1/keys",
      body: { name: "agent", permission: "read", namespaces: [ns] },
      check: (b) => expect(b.secret).toStartWith("memd_"),
    }),
  },
  {
    name: "GET /v1/keys",
    needs: 2,
    okStatus: 200,
    outside: "ok",
    call: async (ns) => {
      const { id } = await createKey({ name: "target", permission: "read", namespaces: [ns] });
      const visible = inScope(Object.entries(nsCases).find(([, v]) => v === ns)![0] as NsCase);
      return {
        method: "GET",
        path: "/v1/keys",
        check: (b) => {
          expect(b.some((k: { id: string }) => k.id === id)).toBe(visible);
          expect(JSON.stringify(b)).not.toMatch(/secret|hash/);
        },
      };
    },
  },
  {
    name: "GET /v1/keys/:id",
    needs: 2,
    okStatus: 200,
    outside: [404, "not_found"],
    call: async (ns) => {
      const { id } = await createKey({ name: "target", permission: "read", namespaces: [ns] });
      return { method: "GET", path: `/v1/keys/${id}`, check: (b) => expect(b).toMatchObject({ id, namespaces: [ns] }) };
    },
  },
  {
    name: "DELETE /v1/keys/:id",
    needs: 2,
    okStatus: 200,
    outside: [404, "not_found"],
    call: async (ns) => ({
      method: "DELETE",
      path: `/v1/keys/${(await createKey({ name: "target", permission: "read", namespaces: [ns] })).id}`,
    }),
  },
];

/** The expected [status, error code or null] for one cell of the matrix. */
function expected(e: Endpoint, caller: Caller, nsCase: NsCase): [number, string | null] {
  const l = level[caller];
  if (l === undefined) return [401, "unauthorized"];
  if (l < e.needs) return [403, "forbidden"];
  if (inScope(nsCase) || e.outside === "ok") return [e.okStatus, null];
  return e.outside;
}

beforeAll(async () => {
  s = await startTestServer();
  for (const p of ["read", "read_write", "admin"] as const)
    headerOf[p] = `Bearer ${(await createKey({ name: p, permission: p })).secret}`;
  const revoked = await createKey({ name: "revoked", permission: "admin", namespaces: ["*"] });
  expect((await s.json("DELETE", `/v1/keys/${revoked.id}`)).status).toBe(200);
  headerOf.revoked = `Bearer ${revoked.secret}`;
  const expiresAt = new Date(Date.now() + 300).toISOString();
  headerOf.expired = `Bearer ${(await createKey({ name: "expired", permission: "admin", namespaces: ["*"], expiresAt })).secret}`;
  await Bun.sleep(400);
});
afterAll(() => s.stop());

for (const e of endpoints) {
  describe(e.name, () => {
    for (const caller of callers)
      for (const nsCase of Object.keys(nsCases) as NsCase[]) {
        const [status, code] = expected(e, caller, nsCase);
        test(`${caller} × ${nsCase} → ${status}${code ? ` ${code}` : ""}`, async () => {
          const call = await e.call(nsCases[nsCase]);
          const headers: Record<string, string> = {};
          const auth = headerOf[caller];
          if (auth) headers.authorization = auth;
          if (call.body !== undefined) headers["content-type"] = "application/json";
          const res = await fetch(s.url + call.path, {
            method: call.method,
            headers,
            body: call.body === undefined ? undefined : JSON.stringify(call.body),
          });
          const body = await res.json();
          expect(res.status).toBe(status);
          if (code) expect(body).toEqual({ error: { code, message: expect.any(String) } });
          else call.check?.(body);
        });
      }
  });
}

test("the matrix covers every endpoint × caller × namespace", () => {
  expect(endpoints.length * callers.length * Object.keys(nsCases).length).toBe(352);
});

test("a root-like key (*) reaches every namespace; team-a/* does not reach team-a itself", async () => {
  const star = await createKey({ name: "star", permission: "read", namespaces: ["*"] });
  for (const ns of ["own", "other", "team-a", "team-ab"])
    expect((await s.json("GET", `/v1/memory?namespace=${ns}`, undefined, { key: star.secret })).status).toBe(200);
  const r = await s.json("GET", "/v1/memory?namespace=team-a", undefined, { key: headerOf.read!.slice(7) });
  expect(r.status).toBe(403);
});

test("events by memoryId of a foreign memory: 404 even with a namespace filter the key covers", async () => {
  const id = await seedMemory("other");
  const r = await s.json("GET", `/v1/memory/events?namespace=own&memoryId=${id}`, undefined, {
    key: headerOf.read!.slice(7),
  });
  expect(r.status).toBe(404);
  expect(r.body.error.code).toBe("not_found");
});
