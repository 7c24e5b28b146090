// The PostgreSQL export (one REPEATABLE READ snapshot, paged by key) and import of records as
// they are.
import type { SQL } from "bun";
import type { ErasureRecord, ExportRecord, KeyRecord, MemoryRecord } from "../records";
import type { Transfer } from "../storage";
import { erasureOf, erasureRow, eventOf, eventRow, keyOf, keyRow, memoryOf, memoryRow } from "./rows";
import { writeIndex } from "./search";
import type { PgState } from "./state";

/** Rows per keyset page of an export. */
const PAGE = 2000;

const withoutType = (r: ExportRecord) => {
  const { type: _type, ...rest } = r;
  return rest;
};

/** Each record's id as its table knows it. */
const idOf = (r: ExportRecord): string =>
  r.type === "event" ? String(r.seq) : r.type === "erasure" ? `${r.namespace}\0${r.entity}\0${r.atMs}` : r.id;

export function pgTransfer(s: PgState): Transfer {
  const { sql, db, read, write } = s;
  /** Stored records with the ids of `records`, by type and id. */
  async function found(q: SQL, records: readonly ExportRecord[]): Promise<Map<string, unknown>> {
    const by = (t: ExportRecord["type"]) => records.filter((r) => r.type === t);
    const out = new Map<string, unknown>();
    const memIds = by("memory").map(idOf);
    if (memIds.length)
      for (const r of await q`SELECT * FROM memories WHERE id = ANY(${sql.array(memIds, "text")}::uuid[])`)
        out.set(`memory ${r.id}`, memoryOf(r));
    const seqs = by("event").map(idOf);
    if (seqs.length)
      for (const r of await q`SELECT * FROM events WHERE seq = ANY(${sql.array(seqs, "text")}::bigint[])`)
        out.set(`event ${r.seq}`, eventOf(r));
    const keyIds = by("key").map(idOf);
    if (keyIds.length)
      for (const r of await q`SELECT * FROM api_keys WHERE id = ANY(${sql.array(keyIds, "text")}::text[])`)
        out.set(`key ${r.id}`, keyOf(r));
    for (const e of by("erasure") as ErasureRecord[]) {
      const [r] =
        await q`SELECT * FROM erasures WHERE namespace = ${e.namespace} AND entity = ${e.entity} AND at_ms = ${e.atMs}`;
      if (r) out.set(`erasure ${idOf({ type: "erasure", ...e })}`, erasureOf(r));
    }
    return out;
  }

  return {
    async *exportAll({ namespaces, keys: withKeys }) {
      // One REPEATABLE READ transaction on a reserved connection: every page reads one snapshot.
      const conn = await db(() => sql.reserve());
      let open = false;
      try {
        await conn`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`;
        open = true;
        const nss = namespaces ? sql.array(namespaces, "text") : null;
        let afterId = "00000000-0000-0000-0000-000000000000";
        for (;;) {
          const rows = await conn`SELECT * FROM memories WHERE id > ${afterId}::uuid
            AND (${nss}::text[] IS NULL OR namespace = ANY(${nss}::text[])) ORDER BY id LIMIT ${PAGE}`;
          for (const r of rows) yield { type: "memory", ...memoryOf(r) };
          if (rows.length < PAGE) break;
          afterId = rows.at(-1).id;
        }
        let afterSeq = 0;
        for (;;) {
          const rows = await conn`SELECT * FROM events WHERE seq > ${afterSeq}
            AND (${nss}::text[] IS NULL OR namespace = ANY(${nss}::text[])) ORDER BY seq LIMIT ${PAGE}`;
          for (const r of rows) yield { type: "event", ...eventOf(r) };
          if (rows.length < PAGE) break;
          afterSeq = Number(rows.at(-1).seq);
        }
        for (const r of await conn`SELECT * FROM erasures WHERE (${nss}::text[] IS NULL OR namespace = ANY(${nss}::text[]))
            ORDER BY namespace COLLATE "C", entity COLLATE "C", at_ms`)
          yield { type: "erasure", ...erasureOf(r) };
        if (withKeys)
          for (const r of await conn`SELECT * FROM api_keys ORDER BY id COLLATE "C"`)
            yield { type: "key", ...keyOf(r) };
        await conn`COMMIT`;
        open = false;
      } finally {
        if (open) await conn`ROLLBACK`.catch(() => undefined);
        conn.release();
      }
    },

    async existing(records) {
      const stored = await read((sql) => found(sql, records));
      return records.map((r) => {
        const s = stored.get(`${r.type} ${idOf(r)}`);
        if (s === undefined) return "absent";
        return Bun.deepEquals(s, withoutType(r)) ? "identical" : "different";
      });
    },

    importRecords(records, options) {
      return write(async (tx) => {
        let batch = records;
        if (options.renumberEvents) {
          // Renumbered events take fresh seqs from the sequence, in order (each above every seq in use).
          const n = records.filter((r) => r.type === "event").length;
          const seqs = n
            ? (await tx`SELECT nextval('event_seq') AS s FROM generate_series(1, ${n})`)
                .map((r: { s: string }) => Number(r.s))
                .sort((a: number, b: number) => a - b)
            : [];
          let i = 0;
          batch = records.map((r) => (r.type === "event" ? { ...r, seq: seqs[i++] } : r));
        }
        const stored = await found(tx, batch);
        const seen = new Set<string>();
        const keep: ExportRecord[] = [];
        let skipped = 0;
        for (const r of batch) {
          const id = `${r.type} ${idOf(r)}`;
          const s = stored.get(id);
          if (s !== undefined || seen.has(id)) {
            const identical = s !== undefined && Bun.deepEquals(s, withoutType(r));
            if (options.skipExisting || (options.skipIdentical && identical)) {
              skipped++;
              continue;
            }
            throw new Error(`${r.type} ${JSON.stringify(idOf(r))} already exists`);
          }
          seen.add(id);
          keep.push(r);
        }
        const of = <T extends ExportRecord["type"]>(t: T) =>
          keep.filter((r) => r.type === t) as Extract<ExportRecord, { type: T }>[];
        const memories = of("memory").map((r) => memoryRow(withoutType(r) as MemoryRecord));
        const events = of("event");
        const keyRows = of("key").map((r) => keyRow(withoutType(r) as KeyRecord));
        const erasureRows = of("erasure").map((r) => erasureRow(withoutType(r) as ErasureRecord));
        for (let i = 0; i < memories.length; i += 1000)
          await tx`INSERT INTO memories ${tx(memories.slice(i, i + 1000))}`;
        // Imported current memories join the keyword index at once; their vectors come from `memd reindex`.
        const current = of("memory")
          .map((r) => withoutType(r) as MemoryRecord)
          .filter((m) => m.state === "current");
        if (current.length > 0)
          await writeIndex(
            tx,
            current.map((after) => ({ before: undefined, after, vector: undefined })),
          );
        for (let i = 0; i < events.length; i += 1000)
          await tx`INSERT INTO events ${tx(events.slice(i, i + 1000).map((e) => ({ seq: e.seq, ...eventRow(e) })))}`;
        // Replicas' keyword lists follow events in time order, which imported ones are not:
        // they are built again for each namespace this import touches (keyword-cache.ts).
        const touched = [
          ...new Set([...memories.map((m) => m.namespace as string), ...events.map((e) => e.namespace)]),
        ].sort();
        if (touched.length)
          await tx`INSERT INTO search_epochs AS s (namespace, epoch)
              SELECT unnest(${sql.array(touched, "text")}::text[]), 1
              ON CONFLICT (namespace) DO UPDATE SET epoch = s.epoch + 1`;
        if (keyRows.length) await tx`INSERT INTO api_keys ${tx(keyRows)}`;
        if (erasureRows.length) {
          await tx`INSERT INTO erasures ${tx(erasureRows)}`;
          await tx`UPDATE erasures_committed SET n = n + ${erasureRows.length} WHERE id = 1`;
        }
        if (events.length) {
          // New events continue after the imported ones: their seq and, per namespace, their time.
          await tx`SELECT setval('event_seq', GREATEST((SELECT max(seq) FROM events), (SELECT last_value FROM event_seq)))`;
          const last = new Map<string, number>();
          for (const e of events) last.set(e.namespace, Math.max(last.get(e.namespace) ?? 0, e.atMs));
          const nss = [...last.keys()].sort();
          await tx`INSERT INTO namespace_clock AS c (namespace, last_ms)
              SELECT * FROM unnest(${sql.array(nss, "text")}::text[], ${sql.array(
                nss.map((n) => last.get(n)!),
                "int8",
              )}::bigint[])
              ON CONFLICT (namespace) DO UPDATE SET last_ms = GREATEST(c.last_ms, EXCLUDED.last_ms)`;
        }
        if (options.seqFloor !== undefined)
          await tx`SELECT setval('event_seq', GREATEST(${options.seqFloor}::bigint, (SELECT last_value FROM event_seq)))`;
        return { written: keep.length, skipped };
      });
    },
  };
}
