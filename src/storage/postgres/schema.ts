import type { SQL } from "bun";

/**
 * The schema, as numbered migrations. migrations[i] takes the schema from version i to i + 1;
 * released steps are never edited, only appended to.
 *
 * Times are milliseconds since the epoch (bigint), as the API's ISO times are derived from them.
 * Event times are strictly increasing per namespace: namespace_clock holds the last one, and a
 * writer takes its row lock for the rest of its transaction, so stamps follow commit order even
 * with many replicas. Tags and metadata are `json`, not `jsonb`, so they read back exactly as
 * written (key order included).
 */
export const migrations: string[] = [
  `
  CREATE TABLE memories (
    id          uuid PRIMARY KEY,
    namespace   text NOT NULL,
    entity      text NOT NULL,
    content     text NOT NULL,
    category    text NOT NULL,
    importance  double precision NOT NULL,
    tags        json,
    metadata    json,
    source      text,
    created_at  bigint NOT NULL,
    updated_at  bigint NOT NULL,
    expires_at  bigint,
    state       text NOT NULL CHECK (state IN ('current', 'deleted', 'replaced'))
  );
  CREATE INDEX memories_current_by_entity ON memories (namespace, entity, id) WHERE state = 'current';
  CREATE INDEX memories_current_by_namespace ON memories (namespace, id) WHERE state = 'current';
  CREATE INDEX memories_expiry ON memories (expires_at) WHERE state = 'current' AND expires_at IS NOT NULL;

  CREATE SEQUENCE event_seq;
  CREATE TABLE events (
    seq             bigint PRIMARY KEY DEFAULT nextval('event_seq'),
    namespace       text NOT NULL,
    entity          text NOT NULL,
    memory_id       uuid NOT NULL,
    event           text NOT NULL,
    old_content     text,
    new_content     text,
    merged_from_id  uuid,
    reason          text,
    category        text NOT NULL,
    at_ms           bigint NOT NULL,
    actor_key_id    text
  );
  ALTER SEQUENCE event_seq OWNED BY events.seq;
  CREATE UNIQUE INDEX events_by_namespace ON events (namespace, at_ms);
  CREATE INDEX events_by_entity ON events (namespace, entity, at_ms);
  CREATE INDEX events_by_memory ON events (namespace, memory_id, at_ms);
  CREATE INDEX events_by_superseded ON events (namespace, merged_from_id, at_ms) WHERE merged_from_id IS NOT NULL;

  CREATE TABLE namespace_clock (
    namespace  text PRIMARY KEY,
    last_ms    bigint NOT NULL
  );

  CREATE TABLE api_keys (
    id            text PRIMARY KEY,
    hash          text NOT NULL UNIQUE,
    name          text NOT NULL,
    permission    text NOT NULL,
    namespaces    json NOT NULL,
    expires_at    bigint,
    created_at    bigint NOT NULL,
    last_used_at  bigint,
    revoked_at    bigint
  );

  CREATE TABLE entity_locks (
    namespace  text NOT NULL,
    entity     text NOT NULL,
    PRIMARY KEY (namespace, entity)
  );
  `,
  // The search index, kept by apply in the same transaction as the memories. Terms come from JS
  // (Intl.Segmenter), so existing memories cannot be indexed here: the step raises
  // search_state.needs_rebuild and openPostgres rebuilds the index in JS on the first start.
  // No extensions (portable to CockroachDB and YugabyteDB): postings and vectors are plain rows.
  `
  CREATE TABLE memory_terms (
    namespace  text NOT NULL,
    entity     text NOT NULL,
    term       text NOT NULL,
    memory_id  uuid NOT NULL,
    tf         integer NOT NULL,
    doc_len    integer NOT NULL,
    PRIMARY KEY (namespace, term, memory_id)
  );
  CREATE INDEX memory_terms_by_entity ON memory_terms (namespace, entity, term);
  CREATE INDEX memory_terms_by_memory ON memory_terms (memory_id);
  -- Documents and total length of the current memories per namespace (entity '') and per entity.
  CREATE TABLE search_stats (
    namespace  text NOT NULL,
    entity     text NOT NULL,
    docs       bigint NOT NULL,
    total_len  bigint NOT NULL,
    PRIMARY KEY (namespace, entity)
  );
  -- float32 little-endian bytes, scaled to length 1.
  CREATE TABLE memory_vectors (
    memory_id  uuid PRIMARY KEY,
    namespace  text NOT NULL,
    entity     text NOT NULL,
    vector     bytea NOT NULL
  );
  CREATE INDEX memory_vectors_by_scope ON memory_vectors (namespace, entity);
  CREATE TABLE embed_pending (memory_id uuid PRIMARY KEY);
  CREATE TABLE search_state (id int PRIMARY KEY, needs_rebuild boolean NOT NULL);
  INSERT INTO search_state (id, needs_rebuild)
    SELECT 1, EXISTS (SELECT 1 FROM memories WHERE state = 'current');
  `,
  // Lifecycle (issue 11): every memory of an entity (erasure), erasure records, idempotent answers.
  `
  CREATE INDEX memories_by_entity ON memories (namespace, entity);

  CREATE TABLE erasures (
    namespace     text NOT NULL,
    entity        text NOT NULL,
    at_ms         bigint NOT NULL,
    actor_key_id  text,
    memories      integer NOT NULL,
    events        integer NOT NULL,
    PRIMARY KEY (namespace, entity, at_ms)
  );

  CREATE TABLE idempotency (
    key_id      text NOT NULL,
    idem_key    text NOT NULL,
    hash        text NOT NULL,
    state       text NOT NULL CHECK (state IN ('pending', 'done')),
    status      integer,
    body        text,
    created_at  bigint NOT NULL,
    expires_at  bigint NOT NULL,
    PRIMARY KEY (key_id, idem_key)
  );
  CREATE INDEX idempotency_expiry ON idempotency (expires_at);
  `,
  // Terms now fold ß to ss and final sigma to sigma: the stored terms of such memories are rebuilt.
  `
  UPDATE search_state SET needs_rebuild = true
    WHERE EXISTS (SELECT 1 FROM memories WHERE state = 'current' AND (content LIKE '%ß%' OR content LIKE '%ς%'));
  `,
  // Terms are now stemmed in their text's language (issue 21, text/language.ts): every stored
  // term is rebuilt, so old and new forms never mix. (A tokenizer change needs a step like this.)
  `
  UPDATE search_state SET needs_rebuild = true WHERE EXISTS (SELECT 1 FROM memories WHERE state = 'current');
  `,
  // Memory in time (issue 23): each memory's observed time (valid time; NULL on older rows means
  // its created_at), and events that carry the memory's state after them, so that the trail
  // alone replays every field (storage/asof.ts). Older events keep NULLs there: as-of reads take
  // those fields from the memory row. events_by_entity (namespace, entity, at_ms) serves as-of reads.
  `
  ALTER TABLE memories ADD COLUMN observed_at bigint;
  ALTER TABLE events
    ADD COLUMN importance double precision,
    ADD COLUMN tags json,
    ADD COLUMN metadata json,
    ADD COLUMN expires_at bigint,
    ADD COLUMN observed_at bigint,
    ADD COLUMN old_observed_at bigint;
  `,
  // Semantic search from memory (issue 26, postgres/vector-cache.ts): each replica keeps a
  // namespace's vectors as codes and follows their changes before each search. apply's vector
  // changes come with events (at_ms, in commit order per namespace); the embedding worker's have
  // none, so it takes a stamp from the namespace's clock and writes it on the vector row (NULL on
  // rows apply writes: nothing is added to the store path). A rebuild of the vectors (reindex)
  // bumps vector_epoch, and every replica drops its copies. Vectors are kept in their row
  // (storage MAIN: out of line only when a row would not fit a page), so reading one exact vector
  // is one heap page, not a TOAST index and two chunks (new rows; older ones stay where they are).
  `
  ALTER TABLE memory_vectors ALTER COLUMN vector SET STORAGE MAIN;
  ALTER TABLE memory_vectors ADD COLUMN stamp bigint;
  CREATE INDEX memory_vectors_stamped ON memory_vectors (namespace, stamp) WHERE stamp IS NOT NULL;
  ALTER TABLE search_state ADD COLUMN vector_epoch bigint NOT NULL DEFAULT 0;
  `,
  // Keyword lists in each replica's memory (issue 26, postgres/keyword-cache.ts) follow the
  // events of a namespace. A write that changes its memories without events in time order (an
  // import) bumps the namespace's epoch here, in its transaction: replicas then rebuild.
  `
  CREATE TABLE search_epochs (
    namespace  text PRIMARY KEY,
    epoch      bigint NOT NULL
  );
  `,
  // Keyed facts (issue 33): a memory's key, held by at most one current memory of its entity (the
  // unique index is the guarantee). A keyed store first takes its key's row in key_locks (made on
  // first use, like entity_locks), so that stores of one key wait for each other and each finds
  // the holder the one before committed, instead of failing on the index.
  `
  ALTER TABLE memories ADD COLUMN key text;
  CREATE UNIQUE INDEX memories_current_key ON memories (namespace, entity, key)
    WHERE state = 'current' AND key IS NOT NULL;
  CREATE TABLE key_locks (
    namespace  text NOT NULL,
    entity     text NOT NULL,
    key        text NOT NULL,
    PRIMARY KEY (namespace, entity, key)
  );
  `,
  // Webhooks (issue 34, postgres/webhooks.ts): a subscription is a document with its cursor (an
  // event seq) inside, and a delivery lease: the replica named in lease_owner delivers it until
  // lease_until (database time, ms). A row, not an advisory lock: it works through PgBouncer in
  // transaction mode, and a replica that dies loses it when the time runs out.
  `
  CREATE TABLE webhooks (
    id           text PRIMARY KEY,
    doc          json NOT NULL,
    lease_owner  text,
    lease_until  bigint
  );
  CREATE TABLE webhook_deliveries (
    webhook_id  text NOT NULL,
    n           bigserial,
    doc         json NOT NULL,
    PRIMARY KEY (webhook_id, n)
  );
  `,
  // Revert and restore (issue 33): their events carry what they went back to (records.ts).
  `
  ALTER TABLE events ADD COLUMN revert_of text;
  `,
  // Consolidation (issue 33): its MERGE names the memories merged, each DELETE the memory kept.
  `
  ALTER TABLE events ADD COLUMN merged_ids json, ADD COLUMN merged_into uuid;
  `,
  // Keyword ranking (issue 36): BM25's b is each scope's own, from the spread of its memories'
  // lengths (text/scoring.ts lengthNormB), which needs the sum of their squares beside their sum.
  `
  ALTER TABLE search_stats ADD COLUMN total_sq bigint NOT NULL DEFAULT 0;
  UPDATE search_stats s SET total_sq = x.sq
    FROM (SELECT namespace, entity, sum(doc_len::bigint * doc_len) AS sq
          FROM (SELECT DISTINCT ON (memory_id) namespace, entity, doc_len FROM memory_terms ORDER BY memory_id) d
          GROUP BY namespace, entity) x
    WHERE s.namespace = x.namespace AND s.entity = x.entity;
  UPDATE search_stats s SET total_sq = x.sq
    FROM (SELECT namespace, sum(total_sq) AS sq FROM search_stats WHERE entity <> '' GROUP BY namespace) x
    WHERE s.namespace = x.namespace AND s.entity = '';
  `,
  // Search snapshots (issue 32, postgres/snapshots.ts): a namespace's keyword lists and vectors
  // as one replica built them, read by the others (and after a restart) instead of building them
  // again, then caught up from the events table. A snapshot's row names its parts (by token);
  // an erasure deletes its namespace's rows in its transaction.
  `
  CREATE TABLE search_snapshots (
    namespace   text NOT NULL,
    kind        text NOT NULL,
    build       text NOT NULL,
    epoch       bigint NOT NULL,
    upto        bigint NOT NULL,
    token       uuid NOT NULL,
    parts       int NOT NULL,
    bytes       bigint NOT NULL,
    header      text NOT NULL,
    written_at  bigint NOT NULL,
    PRIMARY KEY (namespace, kind)
  );
  CREATE TABLE search_snapshot_parts (
    namespace  text NOT NULL,
    kind       text NOT NULL,
    token      uuid NOT NULL,
    part       int NOT NULL,
    data       bytea NOT NULL,
    PRIMARY KEY (namespace, kind, token, part)
  );
  ALTER TABLE search_snapshot_parts ALTER COLUMN data SET STORAGE EXTERNAL;
  `,
  // An erasure's place in the trail (issue 34): a seq of event_seq taken after its DELETEs, which
  // no event has, so webhooks deliver the erasure itself in order (postgres/webhooks.ts). NULL on
  // erasures made before, and on imported ones.
  `
  ALTER TABLE erasures ADD COLUMN seq bigint;
  CREATE UNIQUE INDEX erasures_by_seq ON erasures (seq) WHERE seq IS NOT NULL;
  `,
  // How many erasures have committed (issue 34): each adds one in its own transaction, so a
  // webhook delivery checks with one row that what it read is still as it is (postgres/webhooks.ts).
  `
  CREATE TABLE erasures_committed (id int PRIMARY KEY, n bigint NOT NULL);
  INSERT INTO erasures_committed (id, n) SELECT 1, count(*) FROM erasures;
  `,
  // A subscription's delivery log as one row (issue 34): its newest 100 attempts, newest first.
  // Written a row per attempt, ten subscriptions delivering every event inserted and deleted a
  // hundred rows each a second.
  `
  CREATE TABLE webhook_logs (webhook_id text PRIMARY KEY, log jsonb NOT NULL);
  INSERT INTO webhook_logs (webhook_id, log)
    SELECT webhook_id, jsonb_agg(doc::jsonb ORDER BY n DESC) FROM (
      SELECT webhook_id, n, doc, row_number() OVER (PARTITION BY webhook_id ORDER BY n DESC) AS k
        FROM webhook_deliveries) d
    WHERE k <= 100 GROUP BY webhook_id;
  DROP TABLE webhook_deliveries;
  `,
];

export const SCHEMA_VERSION = migrations.length;

/**
 * Brings the database to SCHEMA_VERSION. Safe when several replicas start at once: the version
 * row is taken with a row lock (not an advisory lock, which the PostgreSQL-compatible distributed
 * databases lack) and each step runs in the same transaction that records it.
 */
export async function migrate(sql: SQL): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await sql`CREATE TABLE IF NOT EXISTS memd_schema (id int PRIMARY KEY, version int NOT NULL)`;
      await sql`INSERT INTO memd_schema (id, version) VALUES (1, 0) ON CONFLICT (id) DO NOTHING`;
      break;
    } catch (e) {
      // Two replicas creating the table at the same moment: one loses with a duplicate; retry.
      if (attempt >= 5) throw e;
      await Bun.sleep(50 + Math.random() * 100);
    }
  }
  await sql.begin(async (tx) => {
    await tx`SET LOCAL statement_timeout = 0`; // a migration takes as long as the store is large
    const [row] = await tx`SELECT version FROM memd_schema WHERE id = 1 FOR UPDATE`;
    const version = Number(row.version);
    if (version > SCHEMA_VERSION)
      throw new Error(
        `the database was migrated by a newer memd (schema ${version}; this release knows up to ${SCHEMA_VERSION}); upgrade memd`,
      );
    for (let v = version; v < SCHEMA_VERSION; v++) await tx.unsafe(migrations[v]);
    if (version < SCHEMA_VERSION) await tx`UPDATE memd_schema SET version = ${SCHEMA_VERSION} WHERE id = 1`;
  });
}
