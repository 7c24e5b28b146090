import { join } from "node:path";

// scripts/build.ts bundles the page script and defines MEMD_UI_JS with it, so the binary carries
// it; from source (bun run, bun test) it is bundled here on first use, from the same files.
declare const MEMD_UI_JS: string | undefined;

/** The page's entry point (TypeScript, bundled for the browser). */
export const pageEntry = join(import.meta.dir, "../../ui/src/main.ts");

/** Bundles the page script: one minified ES module, no outside imports. */
export async function buildPageScript(): Promise<string> {
  const result = await Bun.build({ entrypoints: [pageEntry], target: "browser", format: "esm", minify: true });
  if (!result.success) throw new AggregateError(result.logs, "the page script did not build");
  return result.outputs[0].text();
}

let built: Promise<string> | undefined;

/** The page script: embedded in the binary, or bundled once from source. */
export function pageScript(): Promise<string> {
  if (typeof MEMD_UI_JS === "string") return Promise.resolve(MEMD_UI_JS);
  built ??= buildPageScript();
  return built;
}
