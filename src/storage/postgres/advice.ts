// What memd says on PostgreSQL where a command works on LMDB's files (memd backup, memd compact):
// the database has its own tools for these, which memd cannot stand in for while replicas run.

/** memd backup on PostgreSQL: a copy through one client could not be consistent with the replicas' writes the way the database's own tools are. */
export const postgresBackupAdvice =
  "the store is PostgreSQL (MEMD_DATABASE_URL or --database-url): back it up with the database's own tools (pg_dump, or base backups with WAL archiving); see docs/postgres.md";

/** What an operator runs on PostgreSQL instead: `memd compact` cannot rewrite the tables itself while replicas run. */
export const postgresCompactAdvice = `On PostgreSQL, deleted and erased rows stay in the table files until they are vacuumed.
To rewrite the tables without them (this locks each table while it runs), connect with psql and run:

  VACUUM (FULL, ANALYZE) memories, events, erasures, idempotency, memory_terms, memory_vectors, search_snapshots, search_snapshot_parts;

A plain VACUUM marks the space reusable but does not overwrite it. Old row versions can also
remain in the write-ahead log, in WAL archives and in base backups until those are rotated out.
`;
