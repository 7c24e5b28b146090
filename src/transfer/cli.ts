// memd export / memd import / memd compact: on the data dir (or PostgreSQL) directly, with a
// server running or not.
import { createWriteStream, existsSync } from "node:fs";
import { loadConfig, parseCommandLine, UsageError } from "../config/config";
import { storageSite } from "../storage/index";
import type { Storage } from "../storage/storage";
import { exportLines, ImportError, Progress, planImport, runImport } from "./service";

export const exportUsage = `Usage:
  memd export [--namespace NS]... [--out FILE] [--keys] [--data-dir D | --database-url URL]

Writes every memory (all states), every audit event and every erasure record as JSON Lines,
after a header line; ids and times are kept. Works while the server runs (one consistent snapshot).
  --namespace    only these namespaces (repeat for several); default: all
  --out          the file to write (refused if it exists); default: standard output
  --keys         also the API keys (their hashes, never secrets)
`;

export const importUsage = `Usage:
  memd import FILE [--skip-existing] [--data-dir D | --database-url URL]

Checks every line of FILE first and writes nothing if one is bad (it names the line and why).
Records whose id already exists are refused unless --skip-existing (which leaves them as they
are), and so is an id that appears twice in FILE. Events are never left out for their sequence
number: when one of FILE's is held by another event here, FILE's events take new numbers (their
times, contents and order kept). An interrupted import is completed by running the same command again.
On LMDB it then saves the keyword lists of every namespace it gave at least MEMD_KEYWORD_PREBUILD
(default 20,000; 0: none) current memories, so their first search reads them.
`;

export const compactUsage = `Usage:
  memd compact [--data-dir D | --database-url URL]

Rewrites the LMDB store without its free pages, which may still hold deleted or erased bytes.
Stop the server first (refused while the store is open). On PostgreSQL, prints what to run.
`;

type Out = { out: (s: string) => void; err: { write(s: string): unknown; isTTY?: boolean } };
const stdio: Out = { out: (s) => process.stdout.write(s), err: process.stderr };

/** The `valued` flags (repeatable), the `bare` switches, and positionals. */
const parseArgs = (args: string[], valued: string[], bare: string[]) =>
  parseCommandLine(args, { valued, switches: bare });

/** The settings, with --data-dir and --database-url (else their MEMD_* variables, else the defaults). */
function config(flags: Map<string, string[]>) {
  const dataDir = flags.get("--data-dir")?.[0];
  const url = flags.get("--database-url")?.[0];
  return loadConfig([
    ...(dataDir !== undefined ? ["--data-dir", dataDir] : []),
    ...(url ? ["--database-url", url] : []),
  ]);
}

/** Where the store is, from --data-dir and --database-url (else their MEMD_* variables, else the default data dir). */
const site = (flags: Map<string, string[]>) => storageSite(config(flags));

/** Opens the store; `create` makes a new LMDB data dir (an import into a fresh store). */
async function open(flags: Map<string, string[]>, create = false): Promise<{ storage: Storage }> {
  const where = site(flags);
  const missing = create ? undefined : where.missing();
  if (missing) throw new UsageError(missing);
  return { storage: await where.open(create) };
}

const common = ["--data-dir", "--database-url"];

/** Runs a lifecycle command; resolves with the exit code (0 ok, 1 failed, 2 usage). */
export async function runTransferCommand(
  command: "export" | "import" | "compact",
  args: string[],
  io: Out = stdio,
): Promise<number> {
  const usage = { export: exportUsage, import: importUsage, compact: compactUsage }[command];
  if (args.includes("--help") || args.includes("-h")) {
    io.out(usage);
    return 0;
  }
  let storage: Storage | undefined;
  try {
    if (command === "export") {
      const { flags, positional } = parseArgs(args, [...common, "--namespace", "--out"], ["--keys"]);
      if (positional.length) throw new UsageError(`unexpected argument ${positional[0]}`);
      const out = flags.get("--out")?.[0];
      if (out && existsSync(out)) throw new UsageError(`${out} already exists; give a new path`);
      ({ storage } = await open(flags));
      const stats = await storage.stats();
      const progress = new Progress("export", stats.memoryRecords + stats.events, io.err);
      const options = { namespaces: flags.get("--namespace"), keys: flags.has("--keys") };
      await writeAll(exportLines(storage, options, progress), out);
      progress.finish();
      return 0;
    }
    if (command === "import") {
      const { flags, positional } = parseArgs(args, common, ["--skip-existing"]);
      if (positional.length !== 1) throw new UsageError("import needs one FILE: memd import FILE");
      const file = positional[0];
      if (!existsSync(file)) throw new UsageError(`no file at ${file}`);
      const skipExisting = flags.has("--skip-existing");
      ({ storage } = await open(flags, true));
      const checking = new Progress("import: checking", undefined, io.err);
      const plan = await planImport(storage, file, { skipExisting }, checking);
      checking.finish();
      const writing = new Progress("import: writing", plan.records, io.err);
      const done = await runImport(storage, file, plan, { skipExisting }, writing);
      writing.finish();
      // The namespaces it made large get their keyword lists saved now (LMDB), so that their first
      // search, by a server running or started next, reads them instead of building them.
      const from = config(flags).keywordPrebuild;
      const large = [...done.current].filter(([, n]) => from > 0 && n >= from).map(([ns]) => ns);
      if (large.length > 0 && storage.prepareSearch) {
        const preparing = new Progress("import: keyword lists", large.length, io.err);
        let prepared = 0;
        for (const ns of large) {
          prepared += await storage.prepareSearch([ns]);
          preparing.tick();
        }
        preparing.finish();
        if (prepared > 0)
          io.err.write(
            `memd: keyword lists of ${prepared} large namespace${prepared === 1 ? "" : "s"} saved for their first search\n`,
          );
      }
      io.err.write(
        `memd: imported ${done.written} records from ${file}; ${done.skipped} already there, left as they were${
          done.renumbered
            ? `; ${done.renumbered} events took new sequence numbers (theirs were held by other events here; times, contents and order kept)`
            : ""
        }\n`,
      );
      return 0;
    }
    const { flags, positional } = parseArgs(args, common, []);
    if (positional.length) throw new UsageError(`unexpected argument ${positional[0]}`);
    const where = site(flags);
    const done = await where.compact();
    io.out(
      "advice" in done ? done.advice : `memd: compacted ${where.label}: ${done.before} bytes -> ${done.after} bytes\n`,
    );
    return 0;
  } catch (e) {
    if (e instanceof UsageError) {
      io.err.write(`memd ${command}: ${e.message}\n\n${usage}`);
      return 2;
    }
    if (e instanceof ImportError) {
      io.err.write(`memd import: refused, nothing written: ${e.message}\n`);
      return 1;
    }
    io.err.write(`memd ${command}: failed: ${(e as Error).message}\n`);
    return 1;
  } finally {
    await storage?.close();
  }
}

/** Writes lines to `path` (or stdout), waiting whenever the sink is full, so memory stays flat. */
async function writeAll(lines: AsyncIterable<string>, path: string | undefined) {
  const stream: NodeJS.WritableStream = path ? createWriteStream(path, { flags: "wx" }) : process.stdout;
  for await (const l of lines) if (!stream.write(l)) await new Promise<void>((r) => stream.once("drain", () => r()));
  if (path)
    await new Promise<void>((resolve, reject) => {
      stream.once("error", reject);
      stream.end(() => resolve());
    });
}
