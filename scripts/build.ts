// Build memd into one self-contained executable: `bun run scripts/build.ts [entry] [outfile]`
// (defaults: src/main.ts -> dist/memd). Set MEMD_TARGET (e.g. bun-linux-arm64, bun-linux-x64-musl)
// to cross-compile; the matching @lmdb/lmdb-<os>-<arch> and @msgpackr-extract/msgpackr-extract-<os>-<arch>
// packages must then be installed too.
//
// Why the plugin: lmdb (native.js) and msgpackr-extract (lmdb's msgpackr uses it to decode
// strings faster) locate their addons at import time via node-gyp-build-optional-packages(dir),
// which probes the filesystem. `bun build --compile` can't follow that, and inside the binary
// there is no node_modules to probe, so lmdb throws "No native build was found". We replace that
// loader, per importing package, with a module holding a *static* require of the right prebuilt
// .node file; Bun embeds statically required .node files and dlopens them (via a content-hashed
// copy in $TMPDIR) at run time.
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { basename, dirname, join, resolve } from "node:path";
import type { BunPlugin } from "bun";
import pkg from "../package.json";
import { buildPageScript } from "../src/ui/bundle";

const root = resolve(import.meta.dir, "..");
const entry = resolve(root, process.argv[2] ?? "src/main.ts");
const outfile = resolve(root, process.argv[3] ?? "dist/memd");
const target = (process.env.MEMD_TARGET ?? `bun-${process.platform}-${process.arch}`) as Bun.Build.CompileTarget;

// bun-linux-x64[-baseline|-modern][-musl] -> os, arch, libc
const [, os, arch] = target.split("-");
const libc = target.endsWith("-musl") ? "musl" : "glibc";

// Same lookup node-gyp-build-optional-packages does for package `name`: the optional package
// @name/name-<os>-<arch>. Under Bun it always picks the N-API build (it treats Bun's ABI as
// unsupported), so the napi variant is what runs in dev too.
function addonFor(pkgDir: string, name: string): string {
  const req = createRequire(join(pkgDir, "package.json"));
  const prebuilds = dirname(req.resolve(`@${name}/${name}-${os}-${arch}/package.json`));
  const file = join(prebuilds, os === "linux" ? `node.napi.${libc}.node` : "node.napi.node");
  if (!existsSync(file)) throw new Error(`native addon for ${name} not found: ${file}`);
  return file;
}

const embedded = new Map<string, string>(); // package name -> .node file
const embedNativeAddons: BunPlugin = {
  name: "embed-native-addons",
  setup(build) {
    build.onResolve({ filter: /^node-gyp-build-optional-packages$/ }, ({ importer }) => {
      const m = /^(.*[\\/]node_modules[\\/]((?:@[^\\/]+[\\/])?[^\\/]+))[\\/]/.exec(importer);
      if (!m) throw new Error(`unexpected importer of node-gyp-build-optional-packages: ${importer}`);
      const name = m[2].replace(/\\/g, "/");
      embedded.set(name, addonFor(m[1], name));
      return { path: name, namespace: "native-addon" };
    });
    build.onLoad({ filter: /.*/, namespace: "native-addon" }, ({ path }) => ({
      // CJS so both `import x from` (lmdb) and `require()` (msgpackr-extract) get the function.
      contents: `module.exports = () => globalThis.__memdLoadAddon(() => require(${JSON.stringify(embedded.get(path))}));`,
      loader: "js",
    }));
  },
};

// ordered-binary (lmdb's key codec) compiles its string reader with `new Function`, pasting in
// `finishUtf8.toString()`. The bundler renames the module-level `position` it refers to (to
// `position4`, say), so the pasted text names a variable that does not exist there and every
// non-ASCII key read throws "position4 is not defined". We paste the function's original source
// text instead, which is what running from node_modules does. The build fails if the library
// changes shape, rather than shipping a binary that breaks on "café".
const keepOrderedBinarySource: BunPlugin = {
  name: "ordered-binary-function-source",
  setup(build) {
    build.onLoad({ filter: /[\\/]ordered-binary[\\/]index\.js$/ }, ({ path }) => {
      const code = readFileSync(path, "utf8");
      const start = code.indexOf("function finishUtf8(");
      const end = code.indexOf("\n}\n", start);
      const use = "finishUtf8.toString()";
      if (start < 0 || end < 0 || code.split(use).length !== 2)
        throw new Error(`ordered-binary changed shape (${path}); revisit keepOrderedBinarySource in scripts/build.ts`);
      const source = code.slice(start, end + 2);
      return { contents: code.replace(use, JSON.stringify(source)), loader: "js" };
    });
  },
};

async function gitCommit(): Promise<string> {
  try {
    const p = Bun.spawnSync(["git", "rev-parse", "--short", "HEAD"], {
      cwd: root,
      stderr: "ignore",
    });
    const sha = p.stdout.toString().trim();
    return p.exitCode === 0 && sha ? sha : "unknown";
  } catch {
    return "unknown";
  }
}

const commit = await gitCommit();
// The `ai` SDK imports "zod/v4/mini" (zod 4's index.js: `export *` of external.js). Bun's bundler
// wraps zod's modules for lazy init here and, for that re-exporting index, emits no init call in
// `ai`'s module, so `ai` called zod's `literal()` before its classes existed and the binary died
// at start ("ZodMiniLiteral is not a constructor"). Importing external.js directly gets its init.
const zodMiniDirect: BunPlugin = {
  name: "zod-mini-direct",
  setup(build) {
    build.onResolve({ filter: /^zod\/v4\/mini$/ }, ({ importer }) => ({
      path: join(dirname(createRequire(importer).resolve("zod/v4/mini")), "external.js"),
    }));
  },
};

// The web page's script, bundled first and embedded as a constant (src/ui/bundle.ts).
const pageJs = await buildPageScript();
const result = await Bun.build({
  // The built-in embedder's thread and the webhook delivery thread are Workers: the binary needs their entry points as well.
  entrypoints: [
    entry,
    resolve(root, "src/embedding/embed-thread.ts"),
    resolve(root, "src/webhooks/delivery-thread.ts"),
  ],
  compile: { target, outfile },
  // The threads' entries import the storage as memd's does: split, the modules they share are
  // one chunk each in the binary instead of a copy per entry point (148 -> 136 MiB).
  splitting: true,
  // Elysia's deploy guide: skip identifier mangling (keeps class/function names in errors & traces).
  minify: { whitespace: true, syntax: true, identifiers: false },
  bytecode: true, // precompiled JSC bytecode: ~10 ms faster start for a couple of MB
  format: "esm", // bytecode defaults to cjs, which rejects top-level await
  sourcemap: "linked", // embedded (zstd) in the binary; the sidecar .map is removed below
  plugins: [embedNativeAddons, keepOrderedBinarySource, zodMiniDirect],
  define: {
    MEMD_VERSION: JSON.stringify(pkg.version),
    MEMD_COMMIT: JSON.stringify(commit),
    MEMD_UI_JS: JSON.stringify(pageJs),
  },
});

if (!result.success) {
  for (const log of result.logs) console.error(log);
  process.exit(1);
}
// Every entry point's and chunk's sidecar map (memd's, the threads', the shared chunks') is in the binary already.
for (const name of readdirSync(dirname(outfile)))
  if (
    [`${basename(outfile)}.map`, "embed-thread.js.map", "delivery-thread.js.map"].includes(name) ||
    /^chunk-\w+\.js\.map$/.test(name)
  )
    rmSync(join(dirname(outfile), name), { force: true });
const size = Bun.file(outfile).size;
console.log(
  `built ${outfile} (${(size / 1048576).toFixed(1)} MiB) memd ${pkg.version} ${commit} ${target}\n  page script: ${pageJs.length} bytes, ${Bun.gzipSync(pageJs).length} gzipped\n  embedded addons: ${[...embedded.values()].join(", ")}`,
);
