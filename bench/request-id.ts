// Micro-benchmark for the request id step of issue 13: crypto.randomUUID() per request against
// a process prefix + counter in UUID shape. Result: the UUID is the cheaper (~60 ns against
// ~110-230 ns), so src/http/request-log.ts keeps it. `bun run bench/request-id.ts`.
const prefix = crypto.randomUUID().slice(0, 24);
let counter = 0;
const newRequestId = () => {
  counter = (counter + 1) % 2 ** 48;
  return prefix + counter.toString(16).padStart(12, "0");
};

const n = 2_000_000;
function time(label: string, f: () => string) {
  let x = 0;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) x += f().length;
  const ns = ((performance.now() - t0) * 1e6) / n;
  console.log(`${label}: ${ns.toFixed(0)} ns per id (${x === 36 * n ? "36 chars" : "?"})`);
}
for (let round = 0; round < 2; round++) {
  time("crypto.randomUUID()", () => crypto.randomUUID());
  time("prefix + counter   ", newRequestId);
}
