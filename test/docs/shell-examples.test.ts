// Every shell example of the manual runs as written: each ```sh, ```bash and ```console block of
// README.md and docs/*.md, in page order, against a real server this test starts (one per page,
// on a temp data dir), with $MEMD (its address) and $KEY (its root key) set, `bin/memd` the
// checkout's command on that server's data dir (MEMD_DATA_DIR), and a scratch working directory.
// A block fails the test when it exits non-zero; `curl` runs with --fail-with-body, so an example
// whose request is refused (4xx, 5xx) fails too. Variables a block sets (ID=...) carry over to the
// next blocks of its page. A block that cannot run here is marked on the line before its fence:
//     <!-- no-run: why -->
// and the reason is required. In ```console blocks only lines starting with "$ " are commands.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { rootSecret, startTestServer, tempDir } from "../helpers";

const repo = resolve(import.meta.dir, "../..");

export interface Example {
  page: string;
  /** 1-based line of the opening fence. */
  line: number;
  lang: string;
  code: string;
  /** Set when the block is marked `<!-- no-run: reason -->`. */
  noRun?: string;
}

/** The shell blocks of a Markdown text, with their no-run marks. */
export function shellExamples(page: string, text: string): Example[] {
  const lines = text.split("\n");
  const out: Example[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([\w-]*)/.exec(lines[i]);
    if (!open) continue;
    const [, indent, fence, lang] = open;
    let j = i + 1;
    while (j < lines.length && !(lines[j].startsWith(indent + fence) && lines[j].trim() === fence)) j++;
    const body = lines.slice(i + 1, j).map((l) => (l.startsWith(indent) ? l.slice(indent.length) : l));
    if (["sh", "bash", "console", "shell"].includes(lang)) {
      let k = i - 1;
      while (k >= 0 && lines[k].trim() === "") k--;
      const mark = k >= 0 ? /^\s*<!--\s*no-run:(.*?)-->\s*$/.exec(lines[k]) : null;
      const code =
        lang === "console"
          ? body
              .filter((l) => l.startsWith("$ "))
              .map((l) => l.slice(2))
              .join("\n")
          : body.join("\n");
      out.push({ page, line: i + 1, lang, code, noRun: mark ? mark[1].trim() : undefined });
    }
    i = j;
  }
  return out;
}

/** README.md, then docs/*.md in name order. */
export function manualPages(): string[] {
  const docs = readdirSync(join(repo, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`);
  return ["README.md", ...docs];
}

const pages = manualPages().map((page) => ({
  page,
  examples: shellExamples(page, readFileSync(join(repo, page), "utf8")),
}));

// The shell every block runs in: strict, with curl failing on an error answer, and the variables
// of earlier blocks of the page loaded. After the block, the variables it made are saved.
const prologue = (state: string) => `set -eo pipefail
curl() { command curl --fail-with-body --max-time 30 "$@"; }
__before=$(compgen -v | sort)
[ -f ${state} ] && source ${state}
`;
const epilogue = (state: string) => `
for __v in $(comm -13 <(echo "$__before") <(compgen -v | sort)); do
  case $__v in __*|BASH_*|FUNCNAME|PIPESTATUS|_) ;; *) declare -p "$__v" 2>/dev/null ;; esac
done > ${state}.new && mv ${state}.new ${state}
`;

/** A server, a scratch dir with bin/memd, and the environment the examples of one page run in. */
async function exampleSite() {
  const server = await startTestServer();
  const work = tempDir("memd-docs-");
  mkdirSync(join(work.dir, "bin"));
  writeFileSync(join(work.dir, "bin/memd"), `#!/bin/sh\nexec "${repo}/bin/memd" "$@"\n`);
  chmodSync(join(work.dir, "bin/memd"), 0o755);
  const env = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: work.dir,
    TMPDIR: process.env.TMPDIR ?? "/tmp",
    MEMD: server.url,
    KEY: rootSecret,
    MEMD_DATA_DIR: server.dataDir,
  };
  const state = join(work.dir, ".docs-state");
  return {
    /** Runs one block as the manual's reader would, within 60 s; its exit code and output. */
    async run(code: string) {
      const script = prologue(state) + code + epilogue(state);
      const proc = Bun.spawn(["bash", "-c", script], { cwd: work.dir, env, stdout: "pipe", stderr: "pipe" });
      const timer = setTimeout(() => proc.kill("SIGKILL"), 60_000);
      const [out, err, exit] = await Promise.all([
        new Response(proc.stdout).text(),
        new Response(proc.stderr).text(),
        proc.exited,
      ]);
      clearTimeout(timer);
      return { exit, out, err };
    },
    async stop() {
      await server.stop();
      work.cleanup();
    },
  };
}

describe("the runner itself", () => {
  let site: Awaited<ReturnType<typeof exampleSite>>;
  beforeAll(async () => (site = await exampleSite()));
  afterAll(() => site.stop());

  test("finds sh, bash and console blocks, the commands of a console block, and no-run marks", () => {
    const md = [
      "```sh",
      "echo one",
      "```",
      "<!-- no-run: needs a GPU -->",
      "",
      "```bash",
      "echo two",
      "```",
      "```console",
      "$ echo three",
      "three",
      "```",
      "```json",
      "{}",
      "```",
      "```",
      "memd --help",
      "```",
    ].join("\n");
    expect(shellExamples("x.md", md).map(({ line, lang, code, noRun }) => ({ line, lang, code, noRun }))).toEqual([
      { line: 1, lang: "sh", code: "echo one", noRun: undefined },
      { line: 6, lang: "bash", code: "echo two", noRun: "needs a GPU" },
      { line: 9, lang: "console", code: "echo three", noRun: undefined },
    ]);
  });

  test("a refused request, a failing command and a failing pipe each fail their block; variables carry over", async () => {
    expect((await site.run(`curl -sS "$MEMD/v1/memory?namespace=x" -H "Authorization: Bearer nope"`)).exit).not.toBe(0);
    expect((await site.run("false\necho after")).exit).not.toBe(0);
    expect((await site.run("false | cat")).exit).not.toBe(0);
    expect((await site.run(`ME=$(curl -sS "$MEMD/v1/me" -H "Authorization: Bearer $KEY")`)).exit).toBe(0);
    const next = await site.run(`echo "$ME"; bin/memd keys list >/dev/null`);
    expect([next.exit, JSON.parse(next.out).permission]).toEqual([0, "admin"]);
  });
});

test("the manual has shell examples, and every no-run mark gives its reason", () => {
  const all = pages.flatMap((p) => p.examples);
  expect(all.filter((e) => !e.noRun).length).toBeGreaterThanOrEqual(10);
  for (const e of all) if (e.noRun !== undefined) expect(e.noRun.length).toBeGreaterThan(0);
});

for (const { page, examples } of pages) {
  const runnable = examples.filter((e) => !e.noRun);
  if (runnable.length === 0) continue;
  describe(`${page}: shell examples`, () => {
    let site: Awaited<ReturnType<typeof exampleSite>>;
    beforeAll(async () => (site = await exampleSite()));
    afterAll(() => site.stop());
    for (const e of runnable)
      test(`line ${e.line} (${e.lang})`, async () => {
        const r = await site.run(e.code);
        if (r.exit !== 0)
          throw new Error(
            `${e.page}:${e.line}: exit ${r.exit}\n--- block\n${e.code}\n--- stdout\n${r.out}\n--- stderr\n${r.err}`,
          );
      }, 90_000);
  });
}
