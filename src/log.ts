import type { LogLevel } from "./config/config";

const rank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export type Logger = Record<LogLevel, (msg: string, fields?: Record<string, unknown>) => void>;

/** A structured JSON logger: one line per entry on stdout. Callers never pass content or secrets. */
export function createLogger(level: LogLevel, write: (line: string) => void = (l) => process.stdout.write(l)): Logger {
  const at =
    (l: LogLevel) =>
    (msg: string, fields?: Record<string, unknown>) => {
      if (rank[l] < rank[level]) return;
      write(`${JSON.stringify({ time: new Date().toISOString(), level: l, msg, ...fields })}\n`);
    };
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}
