// @targets lmdb
// The TLS path of a delivery (src/webhooks/post.ts): the connection goes to the checked address
// with the URL's host name as SNI, and the certificate is verified against that name: a
// certificate the process does not trust is a failure, the same one trusted is a success.
import { afterAll, expect, test } from "bun:test";
import { join, resolve } from "node:path";
import { tempDir } from "../helpers";
import { selfSignedCert } from "./receiver";

const tmp = tempDir("memd-tls-");
afterAll(() => tmp.cleanup());
const repo = resolve(import.meta.dir, "../..");

test("https: verified against the host name, refused when the certificate is not trusted", async () => {
  const { cert, key } = selfSignedCert(tmp.dir);
  const script = join(tmp.dir, "post.ts");
  await Bun.write(
    script,
    `import { postWebhook } from ${JSON.stringify(join(repo, "src/webhooks/post.ts"))};
const srv = Bun.serve({ hostname: "127.0.0.1", port: 0, tls: { cert: Bun.file(${JSON.stringify(cert)}), key: Bun.file(${JSON.stringify(key)}) }, fetch: () => new Response("ok") });
const o = { connectTimeoutMs: 5000, answerTimeoutMs: 5000, allowPrivate: true, maxAnswerBytes: 1024 };
const r = await postWebhook(new URL("https://localhost:" + srv.port + "/hook"), {}, "{}", o);
srv.stop(true);
console.log(JSON.stringify(r));
`,
  );
  const run = (env: Record<string, string>) => {
    const p = Bun.spawnSync([process.execPath, script], { env: { ...process.env, ...env }, stdout: "pipe" });
    return JSON.parse(p.stdout.toString().trim().split("\n").at(-1)!);
  };
  const untrusted = run({});
  expect(untrusted.ok).toBe(false);
  expect(untrusted.error).toMatch(/self.signed|certificate/i);
  const trusted = run({ NODE_EXTRA_CA_CERTS: cert });
  expect(trusted).toMatchObject({ ok: true, status: 200, answer: "ok" });
});
