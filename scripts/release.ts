// make release: the files of a release, in dist/ (or --out DIR):
//   memd-<version>-linux-x64, memd-<version>-linux-arm64   one self-contained binary each
//   memd-client-<version>.tgz                              the client package (npm pack)
//   SHA256SUMS                                             their checksums, as sha256sum writes them
// `--targets x64` builds only some. Cross-compiling needs Bun's runtime for the target (bun build
// fetches it) and the target's prebuilt native addons of lmdb and msgpackr-extract, which are
// optional packages that `bun install` leaves out for another architecture: they are fetched here
// with `npm pack`, at the versions lmdb and msgpackr-extract name.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import pkg from "../package.json";

const root = resolve(import.meta.dir, "..");
const args = process.argv.slice(2);
const flag = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const out = resolve(root, flag("--out") ?? "dist");
const targets = (flag("--targets") ?? "x64,arm64").split(",");
const version = pkg.version;
const hostArch = process.arch === "arm64" ? "arm64" : "x64";

function run(cmd: string[], env: Record<string, string | undefined> = process.env, cwd = root) {
  const p = Bun.spawnSync(cmd, { cwd, env, stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0)
    throw new Error(`release: ${cmd.join(" ")} failed (exit ${p.exitCode}):\n${p.stderr}${p.stdout}`);
  return p.stdout.toString();
}

/** Installs `@name/name-linux-<arch>` (at the version `name` asks for) when it is not there. */
function ensureAddon(name: string, arch: string) {
  const req = createRequire(join(root, "package.json"));
  const host = dirname(req.resolve(`${name}/package.json`));
  const optional = `@${name}/${name}-linux-${arch}`;
  try {
    createRequire(join(host, "package.json")).resolve(`${optional}/package.json`);
    return;
  } catch {}
  const wanted = JSON.parse(readFileSync(join(host, "package.json"), "utf8")).optionalDependencies?.[optional];
  if (!wanted) throw new Error(`release: ${name} names no ${optional}; it has no build for linux-${arch}`);
  const tmp = mkdtempSync(join(tmpdir(), "memd-release-"));
  try {
    const file = run(["npm", "pack", "--silent", `${optional}@${wanted}`, "--pack-destination", tmp]).trim();
    const dest = join(root, "node_modules", optional);
    mkdirSync(dest, { recursive: true });
    run(["tar", "xzf", join(tmp, basename(file.split("\n").at(-1)!)), "-C", dest, "--strip-components=1"]);
    console.log(`release: fetched ${optional}@${wanted}`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

async function sha256(path: string): Promise<string> {
  const h = new Bun.CryptoHasher("sha256");
  for await (const chunk of Bun.file(path).stream()) h.update(chunk);
  return h.digest("hex");
}

mkdirSync(out, { recursive: true });
for (const f of readdirSync(out))
  if (f.startsWith(`memd-${version}-`) || f.startsWith("memd-client-") || f === "SHA256SUMS") rmSync(join(out, f));
const files: string[] = [];
for (const arch of targets) {
  if (arch !== "x64" && arch !== "arm64") throw new Error(`release: unknown target ${arch} (x64 or arm64)`);
  for (const name of ["lmdb", "msgpackr-extract"]) ensureAddon(name, arch);
  const file = join(out, `memd-${version}-linux-${arch}`);
  process.stdout.write(
    run([process.execPath, "run", "scripts/build.ts", "src/main.ts", file], {
      ...process.env,
      MEMD_TARGET: `bun-linux-${arch}`,
    }),
  );
  files.push(file);
}
// The client package: built, then packed.
run([process.execPath, "run", "client/build.ts"]);
files.push(run([join(root, "scripts/pack-client"), out]).trim());

// A binary for this machine must run: it prints its version.
const native = files.find((f) => f.endsWith(`-linux-${hostArch}`));
if (native && process.platform === "linux") {
  const said = run([native, "version"]);
  if (!said.includes(version)) throw new Error(`release: ${basename(native)} version said ${said}`);
}
const sums = [];
for (const f of files) sums.push(`${await sha256(f)}  ${basename(f)}`);
await Bun.write(join(out, "SHA256SUMS"), `${sums.join("\n")}\n`);
console.log(`release ${version} in ${out}:\n${sums.map((s) => `  ${s}`).join("\n")}`);
if (!existsSync(join(out, "SHA256SUMS"))) process.exit(1);
