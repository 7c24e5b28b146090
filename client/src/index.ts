// @memd/client: a typed client for memd's HTTP API (client.ts), memory as tools an agent calls
// (tools.ts, over the client), and the request and answer types, generated from the server's own
// schemas (types.gen.ts). Nothing imports this file from inside the package: no import circle.
export * from "./client.js";
export * from "./tools.js";
export type * from "./types.gen.js";
export * from "./webhooks.js";
