import { loadConfig, parseCommandLine, UsageError } from "../config/config";
import { storageSite } from "../storage/index";
import type { Storage } from "../storage/storage";
import { ApiError } from "../wire/errors";
import { isoTime } from "../wire/time";
import { type Permission, permissions } from "./model";
import { createKey, listKeys, revokeKey } from "./service";

export const keysUsage = `Usage:
  memd keys create --name N --permission P --namespace NS [--namespace NS2 ...] [--expires-in 30d] [--data-dir D]
  memd keys list [--data-dir D]
  memd keys revoke ID [--data-dir D]

Works on the data dir directly, also while the server runs; a running server sees changes within a second.
  --permission   read, read_write or admin (each includes the ones before it)
  --namespace    an exact namespace, a prefix pattern such as team-a/* (every namespace starting
                 with "team-a/"), or * for all; repeat for several
  --expires-in   a whole number of days, hours, minutes or seconds: 30d, 12h, 90m, 45s
  --data-dir     default: $MEMD_DATA_DIR, else ./memd-data
  --database-url a postgres:// URL (default: $MEMD_DATABASE_URL): the keys of a PostgreSQL store
`;

interface Output {
  out: (text: string) => void;
  err: (text: string) => void;
}

const units: Record<string, number> = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1000 };

/** "30d", "12h", "90m" or "45s" in milliseconds. */
export function parseDuration(raw: string): number {
  const m = /^(\d{1,6})([dhms])$/.exec(raw);
  if (!m || Number(m[1]) === 0)
    throw new UsageError(`--expires-in: expected a duration such as 30d, 12h or 90m, got "${raw}"`);
  return Number(m[1]) * units[m[2]];
}

/** The flags `allowed` (each `--flag value` or `--flag=value`) and positionals. */
const parseArgs = (args: string[], allowed: string[]) => parseCommandLine(args, { valued: allowed });

/** The data dir and store, from --data-dir, else MEMD_DATA_DIR, else the default. */
async function openDataDir(
  dataDir: string | undefined,
  mustExist: boolean,
  databaseUrl?: string,
): Promise<{ store: Storage; dir: string }> {
  const args = [
    ...(dataDir === undefined ? [] : ["--data-dir", dataDir]),
    ...(databaseUrl ? ["--database-url", databaseUrl] : []),
  ];
  const site = storageSite(loadConfig(args));
  const missing = mustExist ? site.missing() : undefined;
  if (missing) throw new UsageError(missing);
  return { store: await site.open(), dir: site.label };
}

async function create(args: string[], io: Output) {
  const { flags, positional, one } = parseArgs(args, [
    "--name",
    "--permission",
    "--namespace",
    "--expires-in",
    "--data-dir",
    "--database-url",
  ]);
  if (positional.length > 0) throw new UsageError(`unexpected argument "${positional[0]}"`);
  const name = one("--name");
  const permission = one("--permission");
  const namespaces = flags.get("--namespace") ?? [];
  if (!name) throw new UsageError("--name is required");
  if (!permission || !permissions.includes(permission as Permission))
    throw new UsageError(`--permission: expected one of ${permissions.join(", ")}`);
  if (namespaces.length === 0) throw new UsageError("--namespace is required (repeat it for several)");
  const expiresIn = one("--expires-in");
  const expiresAt = expiresIn === undefined ? null : Date.now() + parseDuration(expiresIn);

  const { store, dir } = await openDataDir(one("--data-dir"), false, one("--database-url"));
  try {
    const { key, secret } = await createKey(store, {
      name,
      permission: permission as Permission,
      namespaces,
      expiresAt,
    });
    const expiry = expiresAt === null ? "never expires" : `expires ${isoTime(expiresAt)}`;
    io.out(
      `Created key ${key.id} "${key.name}": ${key.permission} on ${key.namespaces.join(", ")}; ${expiry}. (data dir ${dir})\n` +
        `The secret is shown only this once; memd keeps only its hash:\n\n  ${secret}\n\n` +
        `Use it as: curl -H "Authorization: Bearer ${secret}" http://<host>:<port>/v1/...\n`,
    );
  } finally {
    await store.close();
  }
}

async function list(args: string[], io: Output) {
  const { positional, one } = parseArgs(args, ["--data-dir", "--database-url"]);
  if (positional.length > 0) throw new UsageError(`unexpected argument "${positional[0]}"`);
  const { store } = await openDataDir(one("--data-dir"), true, one("--database-url"));
  try {
    const when = (ms: number | null) => (ms === null ? "-" : isoTime(ms));
    const rows = (await listKeys(store)).map((k) => [
      k.id,
      k.name,
      k.permission,
      k.namespaces.join(","),
      when(k.expiresAt),
      when(k.lastUsedAt),
    ]);
    const table = [["ID", "NAME", "PERMISSION", "NAMESPACES", "EXPIRES", "LAST USED"], ...rows];
    const widths = table[0].map((_, c) => Math.max(...table.map((r) => r[c].length)));
    io.out(
      `${table
        .map((r) =>
          r
            .map((cell, c) => cell.padEnd(widths[c]))
            .join("  ")
            .trimEnd(),
        )
        .join("\n")}\n`,
    );
  } finally {
    await store.close();
  }
}

async function revoke(args: string[], io: Output): Promise<number> {
  const { positional, one } = parseArgs(args, ["--data-dir", "--database-url"]);
  if (positional.length !== 1) throw new UsageError("revoke needs exactly one key id (see memd keys list)");
  const { store } = await openDataDir(one("--data-dir"), true, one("--database-url"));
  try {
    if (!(await revokeKey(store, positional[0]))) {
      io.err(`memd: no live key with id "${positional[0]}"\n`);
      return 1;
    }
    io.out(`Revoked key ${positional[0]}; requests with it get 401 within a second.\n`);
    return 0;
  } finally {
    await store.close();
  }
}

/**
 * `memd keys ...`: create, list and revoke keys on the data dir. Returns the exit code: 0 done,
 * 1 failed (e.g. unknown id), 2 bad usage.
 */
export async function runKeysCommand(
  args: string[],
  io: Output = { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) },
): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === undefined || sub === "help" || args.includes("--help") || args.includes("-h")) {
    (sub === undefined ? io.err : io.out)(keysUsage);
    return sub === undefined ? 2 : 0;
  }
  try {
    if (sub === "create") await create(rest, io);
    else if (sub === "list") await list(rest, io);
    else if (sub === "revoke") return await revoke(rest, io);
    else throw new UsageError(`unknown keys command "${sub}"; expected create, list or revoke`);
    return 0;
  } catch (e) {
    if (e instanceof UsageError || (e instanceof ApiError && e.status === 400)) {
      io.err(`memd keys: ${e.message}\nRun "memd keys --help" for usage.\n`);
      return 2;
    }
    throw e;
  }
}
