// Preloaded by bunfig.toml for every `bun test` in this checkout: the client's test kit runs the
// memd that MEMD_BIN names (else `memd` on PATH); here that is this checkout's bin/memd, the source.
import { join } from "node:path";

process.env.MEMD_BIN ??= join(import.meta.dir, "..", "bin", "memd");
