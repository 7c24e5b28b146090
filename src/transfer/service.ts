// Export and import of a store as JSON Lines, on the storage interface (either backend).
// Both stream: an export holds one page of records at a time, an import one batch of lines.
import { version } from "../build-info";
import type { EventRecord, ExportRecord } from "../storage/records";
import type { EventReads, Transfer, Upkeep } from "../storage/storage";
import { checkHeader, EXPORT_FORMAT, fieldOrder, type Header, IMPORT_FORMATS, lineCheckers } from "./model";

/** Lines per import transaction and per existence check. */
const BATCH = 1000;

/** The header line of an export. */
export function exportHeader(namespaces: string[] | undefined, keys: boolean): Header {
  return {
    type: "header",
    format: EXPORT_FORMAT,
    memd: version,
    exportedAt: new Date().toISOString(),
    namespaces: namespaces ?? null,
    keys,
  };
}

/** The lines of an export (each ending in "\n"), from one consistent snapshot of the store. */
export async function* exportLines(
  storage: Transfer,
  options: { namespaces?: string[]; keys: boolean },
  progress?: Progress,
): AsyncGenerator<string> {
  yield `${JSON.stringify(exportHeader(options.namespaces, options.keys))}\n`;
  for await (const r of storage.exportAll(options)) {
    progress?.tick();
    yield `${canonical(r)}\n`;
  }
}

/** A record as one JSON line, its fields in the format's order (so both backends write the same bytes). */
export function canonical(r: ExportRecord): string {
  const rec = r as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const f of fieldOrder[r.type]) if (rec[f] !== undefined) out[f] = rec[f];
  return JSON.stringify(out);
}

/** Lines of a file, streamed (the file is never held whole), with their 1-based numbers. */
export async function* readLines(path: string): AsyncGenerator<[number, string]> {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  let rest = "";
  let n = 0;
  for await (const chunk of Bun.file(path).stream()) {
    rest += decoder.decode(chunk, { stream: true });
    let at = rest.indexOf("\n");
    let from = 0;
    while (at !== -1) {
      yield [++n, rest.slice(from, at)];
      from = at + 1;
      at = rest.indexOf("\n", from);
    }
    rest = rest.slice(from);
  }
  rest += decoder.decode();
  if (rest.length > 0) yield [++n, rest];
}

/** A bad import file: the line and why; nothing has been written. */
export class ImportError extends Error {
  constructor(
    readonly line: number,
    readonly reason: string,
  ) {
    super(`line ${line}: ${reason}`);
  }
}

/** Parses and checks one record line; throws ImportError. */
export function parseRecord(line: number, text: string): ExportRecord {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new ImportError(line, "not valid JSON");
  }
  const type = (v as { type?: unknown })?.type;
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new ImportError(line, "not a JSON object");
  if (type === "header") throw new ImportError(line, "a second header line");
  const check = lineCheckers[type as keyof typeof lineCheckers];
  if (!check) throw new ImportError(line, `unknown record type ${JSON.stringify(type)}`);
  const first = check.Errors(v).First();
  if (first) throw new ImportError(line, `${type}: ${first.path || "(record)"}: ${first.message}`);
  return v as ExportRecord;
}

function parseHeader(text: string | undefined): Header {
  if (text === undefined) throw new ImportError(1, "the file is empty; expected a header line");
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new ImportError(1, "the header is not valid JSON");
  }
  if (!checkHeader.Check(v)) throw new ImportError(1, 'expected a header line ({"type":"header","format":2,...})');
  if (!IMPORT_FORMATS.includes(v.format))
    throw new ImportError(1, `export format ${v.format}; this memd reads formats ${IMPORT_FORMATS.join(" and ")}`);
  return v;
}

export interface ImportPlan {
  header: Header;
  records: number;
  /** Records already in the store, identical to their line (a resumed or repeated import). */
  present: number;
  /** Records already in the store that differ (skipped only with --skip-existing). */
  conflicting: number;
  maxSeq: number;
  /**
   * Events take new seqs: some seq of the file is held by another event in the store. They are
   * written in file order (which is seq order) with the next free seqs, times and contents kept.
   */
  renumber: boolean;
  /** Events whose seq is held by another event of the store (those that made `renumber`). */
  collisions: number;
  /**
   * Seqs of the file's events already in the store, at that seq or (renumbered by an earlier,
   * interrupted import) at another one: left out when renumbering.
   */
  presentSeqs: Set<number>;
}

/**
 * Reads the whole file and checks every line before anything is written: its shape, that no
 * id appears twice in it, and whether its id exists. Existing records are refused (with the
 * first one's line) unless `skipExisting`, except when they are identical to their lines and
 * come first while others follow: that is an import of the same file that was interrupted,
 * which this run completes. A file whose every record is already there is refused too.
 *
 * Events are never skipped for their seq alone, which would drop audit history: when a seq of
 * the file is held by another event of the store, the file's events are written with new seqs
 * (see ImportPlan.renumber), and a file whose events are then not in seq order is refused.
 */
export async function planImport(
  storage: Transfer & EventReads & Pick<Upkeep, "stats">,
  path: string,
  options: { skipExisting: boolean },
  progress?: Progress,
): Promise<ImportPlan> {
  const lines = readLines(path);
  const first = await lines.next();
  const header = parseHeader(first.done ? undefined : first.value[1]);
  const plan: ImportPlan = {
    header,
    records: 0,
    present: 0,
    conflicting: 0,
    maxSeq: 0,
    renumber: false,
    collisions: 0,
    presentSeqs: new Set(),
  };
  // Only a store that holds events can hold one of the file's at another seq.
  const storeHasEvents = (await storage.stats()).events > 0;
  let lastSeq = 0;
  let disorder: [number, string] | undefined;
  let absentSeen = false;
  let firstPresent: [number, ExportRecord] | undefined;
  let batch: [number, ExportRecord][] = [];
  // The line of each id seen so far (events by seq, others by their key): one id twice in a
  // file would pass the store's check and fail half way through the writes.
  const seqLines = new Map<number, number>();
  const idLines = new Map<string, number>();
  const check = async () => {
    const found = await storage.existing(batch.map(([, r]) => r));
    // An event not at its own seq may be at another (renumbered by an earlier run of this import).
    const elsewhere = await Promise.all(
      batch.map(([, r], i) =>
        storeHasEvents && r.type === "event" && found[i] !== "identical" ? storedElsewhere(storage, r) : false,
      ),
    );
    found.forEach((f, i) => {
      const [line, r] = batch[i];
      if (r.type === "event") {
        if (f === "identical" || elsewhere[i]) {
          plan.present++;
          plan.presentSeqs.add(r.seq);
          firstPresent ??= [line, r];
          if (absentSeen && !options.skipExisting)
            throw new ImportError(line, `${describe(r)} already exists (--skip-existing leaves it)`);
        } else {
          absentSeen = true;
          if (f === "different") plan.collisions++;
        }
        return;
      }
      if (f === "absent") absentSeen = true;
      else if (f === "different") {
        plan.conflicting++;
        if (!options.skipExisting)
          throw new ImportError(line, `${describe(r)} already exists with other contents (--skip-existing leaves it)`);
      } else {
        plan.present++;
        firstPresent ??= [line, r];
        if (absentSeen && !options.skipExisting)
          throw new ImportError(line, `${describe(r)} already exists (--skip-existing leaves it)`);
      }
    });
    batch = [];
  };
  for await (const [line, text] of lines) {
    if (text.trim() === "") continue;
    const r = parseRecord(line, text);
    const firstLine = r.type === "event" ? seqLines.get(r.seq) : idLines.get(idOf(r));
    if (firstLine !== undefined)
      throw new ImportError(line, `${describe(r)} appears twice (first on line ${firstLine})`);
    if (r.type === "event") {
      seqLines.set(r.seq, line);
      plan.maxSeq = Math.max(plan.maxSeq, r.seq);
      if (r.seq < lastSeq) disorder ??= [line, `${describe(r)} comes after event ${lastSeq} in the file`];
      lastSeq = r.seq;
    } else idLines.set(idOf(r), line);
    batch.push([line, r]);
    plan.records++;
    progress?.tick();
    if (batch.length >= BATCH) await check();
  }
  if (batch.length) await check();
  plan.renumber = plan.collisions > 0;
  if (plan.renumber && disorder)
    throw new ImportError(
      disorder[0],
      `${disorder[1]}: ${plan.collisions} of the file's event seqs are held by other events in this store, so its events must take new seqs in file order, which would change their order (export writes events in seq order)`,
    );
  if (firstPresent && plan.present === plan.records && !options.skipExisting) {
    const [line, r] = firstPresent;
    throw new ImportError(
      line,
      `${describe(r)} already exists, as does every record of the file (--skip-existing leaves them)`,
    );
  }
  return plan;
}

/**
 * Whether the store holds this event at another seq: the same memory, time and contents (an
 * import that renumbered it, interrupted and run again).
 */
async function storedElsewhere(storage: EventReads, e: EventRecord & { type: "event" }): Promise<boolean> {
  const { type: _type, seq: _seq, ...want } = e;
  const near = await storage.eventsAfter({ namespace: e.namespace, memoryId: e.memoryId }, e.atMs - 1, 100);
  return near.some((x) => {
    const { seq: _s, ...have } = x;
    return x.atMs === e.atMs && Bun.deepEquals(have, want);
  });
}

/** A record's id within its type (events are keyed by seq). */
const idOf = (r: Exclude<ExportRecord, { type: "event" }>) =>
  r.type === "erasure" ? `erasure ${r.namespace}\u0000${r.entity}\u0000${r.atMs}` : `${r.type} ${r.id}`;

const describe = (r: ExportRecord) =>
  r.type === "event"
    ? `event ${r.seq}`
    : r.type === "erasure"
      ? `erasure of ${r.namespace}/${r.entity}`
      : `${r.type} ${r.id}`;

/**
 * Writes the records of a checked file in batches of BATCH lines, one transaction each, in file
 * order; so an interruption leaves a prefix of the file, which planImport recognises as such.
 */
export async function runImport(
  storage: Transfer,
  path: string,
  plan: ImportPlan,
  options: { skipExisting: boolean },
  progress?: Progress,
): Promise<{ written: number; skipped: number; renumbered: number; current: Map<string, number> }> {
  const opts = { skipExisting: options.skipExisting, skipIdentical: true, renumberEvents: plan.renumber };
  /** Current memories of the file per namespace (what a first search there would build lists of). */
  const current = new Map<string, number>();
  // Reserve the seqs of the file's events first, so a running server's new events stay above them.
  if (plan.maxSeq > 0 && !plan.renumber) await storage.importRecords([], { ...opts, seqFloor: plan.maxSeq });
  let written = 0;
  let skipped = 0;
  let renumbered = 0;
  let batch: ExportRecord[] = [];
  const flush = async () => {
    const r = await storage.importRecords(batch, opts);
    written += r.written;
    skipped += r.skipped;
    progress?.tick(batch.length);
    batch = [];
  };
  let first = true;
  for await (const [line, text] of readLines(path)) {
    if (first) {
      first = false;
      continue;
    }
    if (text.trim() === "") continue;
    const r = parseRecord(line, text);
    if (r.type === "event") {
      // Already there (at its seq or, renumbered by an earlier import, at another): left out,
      // as an identical record is.
      if (plan.presentSeqs.has(r.seq)) {
        skipped++;
        progress?.tick();
        continue;
      }
      if (plan.renumber) renumbered++;
    } else if (r.type === "memory" && r.state === "current")
      current.set(r.namespace, (current.get(r.namespace) ?? 0) + 1);
    batch.push(r);
    if (batch.length >= BATCH) await flush();
  }
  if (batch.length) await flush();
  return { written, skipped, renumbered, current };
}

/**
 * Progress on stderr: a bar redrawn in place on a terminal, else a line every `everyMs`; counts
 * and rate either way.
 */
export class Progress {
  private done = 0;
  private readonly started = performance.now();
  /** A line every `everyMs` from the start (not from the process's start: a slow start printed one at once). */
  private lastDraw = this.started;

  constructor(
    private readonly label: string,
    private readonly total: number | undefined,
    private readonly out: { write(s: string): unknown; isTTY?: boolean } = process.stderr,
    private readonly everyMs = 5000,
  ) {}

  tick(n = 1) {
    this.done += n;
    const now = performance.now();
    const interval = this.out.isTTY ? 200 : this.everyMs;
    if (now - this.lastDraw >= interval) {
      this.lastDraw = now;
      this.draw(false);
    }
  }

  private line(): string {
    const secs = (performance.now() - this.started) / 1000;
    const rate = secs > 0 ? Math.round(this.done / secs) : 0;
    // An export's total is an estimate (taken before its snapshot; erasures not counted).
    const count = this.total ? `${fmt(this.done)}/${fmt(Math.max(this.total, this.done))}` : fmt(this.done);
    return `${this.label}: ${count} records, ${fmt(rate)}/s, ${secs.toFixed(1)} s`;
  }

  private draw(final: boolean) {
    if (this.out.isTTY) {
      const share = this.total ? Math.min(1, this.done / this.total) : 0;
      const bar = this.total ? `[${"#".repeat(Math.round(share * 30)).padEnd(30)}] ${Math.floor(share * 100)}% ` : "";
      this.out.write(`\r\x1b[2K${bar}${this.line()}${final ? "\n" : ""}`);
    } else this.out.write(`${this.line()}\n`);
  }

  /** The last figures, always printed. */
  finish() {
    this.draw(true);
  }
}

const fmt = (n: number) => n.toLocaleString("en-US");
