// Build metadata. `scripts/build.ts` injects MEMD_VERSION / MEMD_COMMIT via `define`;
// when running from source (bun run / bun test) they are undefined and we fall back.
import { version as pkgVersion } from "../package.json";

declare const MEMD_VERSION: string | undefined;
declare const MEMD_COMMIT: string | undefined;

export const version: string = typeof MEMD_VERSION !== "undefined" ? MEMD_VERSION : pkgVersion;
export const commit: string = typeof MEMD_COMMIT !== "undefined" ? MEMD_COMMIT : "dev";
/** Whether this is the compiled binary (scripts/build.ts), not the source run by Bun. */
export const compiled: boolean = typeof MEMD_VERSION !== "undefined";
