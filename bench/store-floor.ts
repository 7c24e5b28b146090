// The floor under the raw store: a bare Bun.serve that parses the JSON body, applies one ADD
// through the LMDB storage and answers the new id. No authentication, validation, log or metrics:
// what HTTP plus the store's LMDB half cost, for bench/store-path.ts `--floor` to set beside the
// ceiling and memd. Takes memd's arguments: `serve --port N --data-dir DIR`.
import { parseArgs } from "node:util";
import { openLmdb } from "../src/storage/lmdb/index";

const { values } = parseArgs({
  args: process.argv.slice(3),
  options: { port: { type: "string" }, "data-dir": { type: "string" } },
  strict: false,
});
const storage = await openLmdb(String(values["data-dir"]));
Bun.serve({
  port: Number(values.port),
  hostname: "127.0.0.1",
  async fetch(req) {
    if (req.method !== "POST") return Response.json({ ok: true }); // store-path polls /readyz
    const b = (await req.json()) as { namespace: string; entity: string; content: string };
    const [added] = await storage.apply(
      [
        {
          event: "ADD",
          create: {
            id: Bun.randomUUIDv7(),
            namespace: b.namespace,
            entity: b.entity,
            content: b.content,
            category: "general",
            importance: 0.5,
          },
        },
      ],
      null,
    );
    return Response.json({ id: added!.memory.id });
  },
});
