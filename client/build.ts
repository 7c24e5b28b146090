// Builds the client package into dist/: ESM JavaScript (bun build) and type declarations (tsc).
// `bun run client/build.ts` from anywhere; `make build` runs it.
import { rmSync } from "node:fs";
import { join } from "node:path";

const dir = import.meta.dir;
rmSync(join(dir, "dist"), { recursive: true, force: true });
const result = await Bun.build({
  entrypoints: [
    join(dir, "src/index.ts"),
    join(dir, "src/testkit.ts"),
    join(dir, "src/ai.ts"),
    join(dir, "src/openai-agents.ts"),
    join(dir, "src/langgraph.ts"),
  ],
  // Optional peer dependencies: the application's own copies.
  external: ["ai", "@openai/agents", "@langchain/langgraph-checkpoint"],
  outdir: join(dir, "dist"),
  format: "esm",
  target: "node", // the client needs only fetch; the test kit only node: modules (Node ≥ 20 and Bun)
  splitting: true, // index.js and testkit.js share one copy of the client (one MemdError class)
  sourcemap: "linked",
});
if (!result.success) {
  for (const log of result.logs) console.error(log);
  process.exit(1);
}
const tsc = join(dir, "..", "node_modules", ".bin", "tsc");
const p = Bun.spawnSync([tsc, "-p", join(dir, "tsconfig.json")], { stdout: "inherit", stderr: "inherit" });
if (p.exitCode !== 0) process.exit(p.exitCode ?? 1);
console.log(`built ${join(dir, "dist")}: ${result.outputs.map((o) => o.path.split("/").pop()).join(", ")} + .d.ts`);
