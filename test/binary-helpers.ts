import { join } from "node:path";

const repo = join(import.meta.dir, "..");

/** Builds memd with scripts/build.ts into `outfile` (a fresh binary of the current source). */
export function buildBinary(outfile: string): string {
  const p = Bun.spawnSync([process.execPath, "run", "scripts/build.ts", "src/main.ts", outfile], {
    cwd: repo,
    stdout: "pipe",
    stderr: "pipe",
  });
  if (p.exitCode !== 0) throw new Error(`build failed: ${p.stderr.toString()}${p.stdout.toString()}`);
  return outfile;
}

export interface RunningBinary {
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  url: string;
  stdout(): string;
  stderr(): string;
}

/**
 * Starts a memd binary (`serve --port 0 ...args`) in `cwd` with only `env` (plus PATH), as
 * `env -i` would, and waits for the start-up log line that carries its address.
 */
export async function startBinary(
  bin: string,
  options: { cwd: string; args?: string[]; env?: Record<string, string> },
): Promise<RunningBinary> {
  const proc = Bun.spawn([bin, "serve", "--port", "0", ...(options.args ?? [])], {
    cwd: options.cwd,
    env: { PATH: "/usr/bin:/bin", ...options.env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let out = "";
  let err = "";
  const drain = async (s: ReadableStream<Uint8Array>, into: (t: string) => void) => {
    const dec = new TextDecoder();
    for await (const chunk of s) into(dec.decode(chunk, { stream: true }));
  };
  void drain(proc.stdout, (t) => (out += t));
  void drain(proc.stderr, (t) => (err += t));
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const m = /"msg":"memd started".*"address":"(http:\/\/[^"]+)"/.exec(out);
    if (m) return { proc, url: m[1], stdout: () => out, stderr: () => err };
    if (proc.exitCode !== null) break;
    await Bun.sleep(10);
  }
  proc.kill("SIGKILL");
  throw new Error(`memd did not start: ${err}${out}`);
}

/** fetch with a bearer key and a JSON body; answers status and body (parsed when JSON). */
export async function call(url: string, key: string, method: string, path: string, body?: unknown) {
  const res = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const json = res.headers.get("content-type")?.includes("json");
  return { status: res.status, body: json && text ? JSON.parse(text) : text };
}
