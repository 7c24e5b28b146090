// The files of src/ the architecture tests read.
import { readdirSync, statSync } from "node:fs";
import { join, resolve } from "node:path";

export const src = resolve(import.meta.dir, "../../src");

/** Every .ts file below `dir` (declaration files left out). */
export function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) return sourceFiles(p);
    return p.endsWith(".ts") && !p.endsWith(".d.ts") ? [p] : [];
  });
}
