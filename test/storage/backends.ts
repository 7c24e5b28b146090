// The storage backends a storage-level test runs against: every one memd has, by construction.
// LMDB always; PostgreSQL whenever MEMD_TEST_DATABASE_URL is set, which `make test` always does
// (scripts/with-postgres): a server that could not be started is a failure naming why, not a
// skip. A new backend is one more entry here, and every case of test/storage runs on it.
import { openStorage } from "../../src/storage/index";
import type { Storage } from "../../src/storage/storage";
import { freshDatabase, tempDir } from "../helpers";

export interface Backend {
  name: Storage["backend"];
  /** A new, empty store of this backend, and how to close it and remove what it made. */
  open(): Promise<{ storage: Storage; close(): Promise<void> }>;
}

const lmdb: Backend = {
  name: "lmdb",
  async open() {
    const dir = tempDir("memd-storage-");
    const storage = await openStorage({ dataDir: dir.dir, mapSizeMb: 256 });
    return {
      storage,
      async close() {
        await storage.close();
        dir.cleanup();
      },
    };
  },
};

const postgres: Backend = {
  name: "postgres",
  async open() {
    // postgresUrl (inside freshDatabase) throws with the reason when there is no server.
    const storage = await openStorage({ dataDir: "/nonexistent", databaseUrl: await freshDatabase() });
    return { storage, close: () => storage.close() };
  },
};

export const backends: Backend[] = [lmdb, ...(process.env.MEMD_TEST_DATABASE_URL !== undefined ? [postgres] : [])];
