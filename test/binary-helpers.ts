import { join } from "node:path";
import { type ServerProcess, startProcess } from "./helpers";

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

/**
 * Starts a memd binary (`serve --port 0 ...args`) in `cwd` with only `env` (plus PATH), as
 * `env -i` would, and waits for the start-up log line that carries its address.
 */
export function startBinary(
  bin: string,
  options: { cwd: string; args?: string[]; env?: Record<string, string> },
): Promise<ServerProcess> {
  return startProcess([bin, "serve", "--port", "0", ...(options.args ?? [])], {
    cwd: options.cwd,
    env: { PATH: "/usr/bin:/bin", ...options.env },
  });
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
