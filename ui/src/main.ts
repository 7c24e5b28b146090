// The memd page: sign in with a key, browse namespaces -> entities -> memories, a memory's
// history, what changed since a time, live updates and (by permission) edit, delete, erase.
// Everything from the server is put in the page as text (see dom.ts).
import {
  ApiError,
  type AuditEvent,
  api,
  type ConsolidateResponse,
  type Diff,
  type Me,
  type Memory,
  qs,
  type RestoreResponse,
  type RevertResponse,
  session,
} from "./api";
import { age, append, fill, h, time } from "./dom";
import { openStream, type StreamState } from "./stream";
import { wordDiff } from "./worddiff";

const main = document.getElementById("main") as HTMLElement;
const errors = document.getElementById("errors") as HTMLElement;
const crumbs = document.getElementById("crumbs") as HTMLElement;
const who = document.getElementById("who") as HTMLElement;
const live = document.getElementById("live") as HTMLElement;

/** Rows rendered at a time in long lists; the rest come with "Show more". */
const pageRows = 200;

let me: Me | null = null;
let closeStream: (() => void) | null = null;
let viewToken = 0;

const canWrite = () => me?.permission === "read_write" || me?.permission === "admin";
const canErase = () => me?.permission === "admin";

// ---------------------------------------------------------------- errors and status

/** Shows an error with its code and message; nothing is swallowed. */
function showError(e: unknown) {
  const err = e instanceof ApiError ? e : new ApiError(0, "error", e instanceof Error ? e.message : String(e));
  const item = h(
    "li",
    { class: "error" },
    h("strong", {}, err.status ? `${err.status} ${err.code}` : err.code),
    ": ",
    err.message,
    " ",
    h(
      "button",
      { type: "button", class: "link", "aria-label": "Dismiss this error", onclick: () => item.remove() },
      "Dismiss",
    ),
  );
  errors.appendChild(item);
  if (err.status === 401 && me) signOut(`Signed out: ${err.message}`);
}

function setLive(state: StreamState | "off") {
  live.dataset.state = state;
  live.textContent =
    state === "live"
      ? "● Live"
      : state === "reconnecting"
        ? "Reconnecting…"
        : state === "connecting"
          ? "Connecting…"
          : "";
}

function watch(namespace: string, entity: string | undefined, onEvent: (e: AuditEvent) => void | Promise<void>) {
  closeStream?.();
  let timer: number | undefined;
  closeStream = openStream(namespace, entity, {
    onEvent: (e) => {
      // Coalesce bursts: one reload per 150 ms, well inside the 2 s the page promises.
      clearTimeout(timer);
      timer = window.setTimeout(() => Promise.resolve(onEvent(e)).catch(showError), 150);
    },
    onState: setLive,
    onError: showError,
  });
}

// ---------------------------------------------------------------- routing

const enc = encodeURIComponent;
const link = (href: string, text: string, props: Record<string, string> = {}) => h("a", { href, ...props }, text);
const nsHref = (ns: string) => `#/ns/${enc(ns)}`;
const entityHref = (ns: string, entity: string) => `#/ns/${enc(ns)}/e/${enc(entity)}`;
const memoryHref = (id: string) => `#/m/${enc(id)}`;
const changesHref = (ns: string, entity?: string) =>
  entity === undefined ? `#/changes/${enc(ns)}` : `#/changes/${enc(ns)}/e/${enc(entity)}`;

function setCrumbs(...items: [string, string | null][]) {
  fill(
    crumbs,
    h(
      "ol",
      {},
      items.map(([text, href], i) =>
        h("li", {}, href && i < items.length - 1 ? link(href, text) : h("span", { "aria-current": "page" }, text)),
      ),
    ),
  );
}

async function route() {
  closeStream?.();
  closeStream = null;
  setLive("off");
  fill(errors);
  const token = ++viewToken;
  if (!me) return signInView();
  try {
    const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
    if (parts[0] === "ns" && parts[1] !== undefined && parts[2] === "e" && parts[3] !== undefined)
      await entityView(parts[1], parts[3], token);
    else if (parts[0] === "ns" && parts[1] !== undefined) await namespaceView(parts[1], token);
    else if (parts[0] === "m" && parts[1]) await historyView(parts[1], token);
    else if (parts[0] === "changes" && parts[1] !== undefined)
      await changesView(parts[1], parts[2] === "e" ? parts[3] : undefined);
    else if (parts[0] === "webhooks" && parts[1]) await webhookView(parts[1], token);
    else if (parts[0] === "webhooks") await webhooksView(token);
    else await namespacesView(token);
  } catch (e) {
    // Nothing of the previous view stays under the error.
    if (current(token)) fill(main, title("Not found"));
    showError(e);
  }
  main.querySelector("h1")?.focus();
}

const current = (token: number) => token === viewToken;

function title(text: string, ...extra: (Node | string)[]) {
  document.title = `${text} · memd`;
  return h("div", { class: "title" }, h("h1", { tabindex: "-1" }, text), ...extra);
}

// ---------------------------------------------------------------- sign in

function signInView() {
  fill(who);
  setCrumbs(["Sign in", null]);
  const input = h("input", {
    id: "key",
    name: "key",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    "aria-describedby": "key-help",
  });
  const form = h(
    "form",
    { class: "card signin", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title", tabindex: "-1" }, "Sign in to memd"),
    h("label", { for: "key" }, "API key"),
    input,
    h(
      "p",
      { id: "key-help", class: "hint" },
      "The key stays in this tab (session storage) and is sent only to this server, as a Bearer header.",
    ),
    h("button", { type: "submit" }, "Sign in"),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    fill(errors);
    session.set(input.value.trim());
    try {
      me = await api<Me>("GET", "/v1/me");
      showWho();
      await route();
    } catch (e) {
      session.clear();
      me = null;
      showError(e);
    }
  });
  fill(main, form);
  document.title = "Sign in · memd";
  input.focus();
}

function showWho() {
  if (!me) return fill(who);
  fill(
    who,
    h("span", { class: "key" }, me.name),
    " ",
    h(
      "span",
      { class: `badge perm-${me.permission}`, title: `namespaces: ${me.namespaces.join(", ")}` },
      me.permission,
    ),
    " ",
    h("button", { type: "button", class: "link", onclick: () => signOut() }, "Sign out"),
  );
}

function signOut(message?: string) {
  session.clear();
  me = null;
  closeStream?.();
  closeStream = null;
  setLive("off");
  signInView();
  if (message) errors.appendChild(h("li", { class: "error" }, message));
}

// ---------------------------------------------------------------- namespaces

interface NamespaceInfo {
  namespace: string;
  memories: number;
  lastEventAt: string;
}
interface EntityInfo {
  entity: string;
  memories: number;
  lastChangeAt: string;
}

/** A table that loads pages with a cursor ("Load more"). */
function pagedTable<T>(opts: {
  caption: string;
  columns: string[];
  load: (cursor: string | null) => Promise<{ rows: T[]; next: string | null }>;
  row: (item: T) => (Node | string)[];
  empty: string;
}) {
  const body = h("tbody");
  const more = h("button", { type: "button" }, "Load more");
  const count = h("p", { class: "hint", role: "status" });
  let next: string | null = null;
  let total = 0;
  const loadPage = async (cursor: string | null) => {
    more.disabled = true;
    const page = await opts.load(cursor);
    // The first page again (a reload): it replaces what was shown.
    if (cursor === null) {
      fill(body);
      total = 0;
    }
    for (const item of page.rows)
      append(body, [
        h(
          "tr",
          {},
          opts.row(item).map((c, i) => h(i ? "td" : "th", i ? {} : { scope: "row" }, c)),
        ),
      ]);
    total += page.rows.length;
    next = page.next;
    more.hidden = next === null;
    more.disabled = false;
    count.textContent = total === 0 ? opts.empty : `${total} shown${next ? ", more to load" : ""}`;
  };
  more.addEventListener("click", () => loadPage(next).catch(showError));
  const table = h(
    "table",
    {},
    h("caption", {}, opts.caption),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        opts.columns.map((c) => h("th", { scope: "col" }, c)),
      ),
    ),
    body,
  );
  return { el: h("div", { class: "table-wrap" }, table, count, more), load: () => loadPage(null) };
}

async function namespacesView(token: number) {
  setCrumbs(["Namespaces", null]);
  const t = pagedTable<NamespaceInfo>({
    caption: "Namespaces this key covers that hold memories",
    columns: ["Namespace", "Memories", "Last change"],
    load: async (cursor) => {
      const r = await api<{ namespaces: NamespaceInfo[]; nextCursor: string | null }>(
        "GET",
        `/v1/namespaces${qs({ cursor })}`,
      );
      return { rows: r.namespaces, next: r.nextCursor };
    },
    row: (n) => [
      link(nsHref(n.namespace), n.namespace),
      String(n.memories),
      h("span", {}, time(n.lastEventAt), ` (${age(n.lastEventAt)})`),
    ],
    empty: "No namespace this key covers holds memories yet.",
  });
  const jump = h("input", { id: "jump", name: "namespace", required: true, autocomplete: "off" });
  const form = h(
    "form",
    { class: "inline" },
    h("label", { for: "jump" }, "Open a namespace by name"),
    jump,
    h("button", { type: "submit" }, "Open"),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    location.hash = nsHref(jump.value.trim());
  });
  fill(main, title("Namespaces", link("#/webhooks", "Webhooks")), t.el, form);
  if (!current(token)) return;
  await t.load();
  if (current(token)) pollNamespaces(token, () => t.load());
}

/**
 * No stream covers every namespace, so the list is polled each second while it is shown and
 * reloaded when its first page changes; the header says whether the polls get through.
 */
function pollNamespaces(token: number, reload: () => Promise<void>) {
  let last: string | undefined;
  let failing = false;
  const poll = async () => {
    try {
      const r = await api<{ namespaces: NamespaceInfo[] }>("GET", "/v1/namespaces");
      const now = JSON.stringify(r.namespaces);
      if (last !== undefined && now !== last && current(token)) await reload();
      last = now;
      failing = false;
      if (current(token)) setLive("live");
    } catch (e) {
      if (!failing && current(token)) showError(e);
      failing = true;
      if (current(token)) setLive("reconnecting");
    }
  };
  const timer = window.setInterval(poll, 1000);
  closeStream = () => window.clearInterval(timer);
  poll();
}

// ---------------------------------------------------------------- entities

async function namespaceView(ns: string, token: number) {
  setCrumbs(["Namespaces", "#/"], [ns, null]);
  const holder = h("div");
  const render = async () => {
    const t = pagedTable<EntityInfo>({
      caption: `Entities of ${ns}`,
      columns: ["Entity", "Memories", "Last change"],
      load: async (cursor) => {
        const r = await api<{ entities: EntityInfo[]; nextCursor: string | null }>(
          "GET",
          `/v1/entities${qs({ namespace: ns, cursor })}`,
        );
        return { rows: r.entities, next: r.nextCursor };
      },
      row: (e) => [
        link(entityHref(ns, e.entity), e.entity),
        String(e.memories),
        h("span", {}, time(e.lastChangeAt), ` (${age(e.lastChangeAt)})`),
      ],
      empty: "No entity has memories in this namespace.",
    });
    await t.load();
    if (current(token)) fill(holder, t.el);
  };
  fill(main, title(ns, link(changesHref(ns), "What changed since…", { class: "button" })), holder);
  await render();
  if (current(token)) watch(ns, undefined, render);
}

// ---------------------------------------------------------------- memories of an entity

function confirmDialog(opts: {
  title: string;
  text: string;
  confirm: string;
  /** A word the user must type to enable the confirm button. */
  typed?: string;
}): Promise<boolean> {
  return new Promise((resolve) => {
    const ok = h("button", { type: "submit", class: "danger", value: "ok" }, opts.confirm);
    const input =
      opts.typed === undefined ? null : h("input", { id: "confirm-typed", autocomplete: "off", spellcheck: "false" });
    if (input) {
      ok.disabled = true;
      input.addEventListener("input", () => {
        ok.disabled = input.value !== opts.typed;
      });
      // Enter confirms once the name is typed (the form's first button is Cancel).
      input.addEventListener("keydown", (ev) => {
        if (ev.key !== "Enter") return;
        ev.preventDefault();
        if (!ok.disabled) dialog.close("ok");
      });
    }
    const dialog = h(
      "dialog",
      { "aria-labelledby": "dialog-title" },
      h(
        "form",
        { method: "dialog" },
        h("h2", { id: "dialog-title" }, opts.title),
        h("p", { class: "dialog-text" }, opts.text),
        input ? [h("label", { for: "confirm-typed" }, `Type ${opts.typed} to confirm`), input] : null,
        h("div", { class: "actions" }, h("button", { type: "submit", value: "cancel" }, "Cancel"), ok),
      ),
    );
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "ok");
      dialog.remove();
    });
    document.body.appendChild(dialog);
    dialog.showModal();
    (input ?? ok).focus();
  });
}

/** The list answer as an array, whichever shape the server gives (array, or {memories, nextCursor}). */
function memoriesOf(r: Memory[] | { memories: Memory[]; nextCursor?: string | null }): {
  memories: Memory[];
  next: string | null;
} {
  return Array.isArray(r) ? { memories: r, next: null } : { memories: r.memories, next: r.nextCursor ?? null };
}

async function entityView(ns: string, entity: string, token: number) {
  setCrumbs(["Namespaces", "#/"], [ns, nsHref(ns)], [entity, null]);
  let all: Memory[] = [];
  let next: string | null = null;
  let results: Memory[] | null = null;
  let searchNote = "";
  let shown = pageRows;
  let editing = false;
  let stale = false;
  /** The "as of" moment shown (ISO), or null for now: a past view replays the audit trail and is read-only. */
  let asOf: string | null = null;

  const category = h("select", { id: "f-category", name: "category" });
  const asOfInput = h("input", { id: "as-of", name: "asOf", type: "datetime-local", step: "1" });
  const asOfNote = h("p", { class: "hint as-of-note", role: "status" });
  const tag = h("select", { id: "f-tag", name: "tag" });
  const query = h("input", { id: "q", name: "query", type: "search", autocomplete: "off", maxlength: "1000" });
  const list = h("ul", { class: "memories", "aria-label": "Memories" });
  const count = h("p", { class: "hint", role: "status" });
  const more = h("button", { type: "button" }, "Show more");
  const loadMore = h("button", { type: "button" }, "Load more from the server");

  const load = async (reset: boolean) => {
    const cursor = reset ? null : next;
    const r = memoriesOf(
      await api(
        "GET",
        `/v1/memory${qs({ namespace: ns, entity, limit: 1000, cursor: cursor ?? undefined, asOf: asOf ?? undefined })}`,
      ),
    );
    all = reset ? r.memories : [...all, ...r.memories];
    next = r.next;
  };

  const options = (select: HTMLSelectElement, label: string, values: string[]) => {
    const keep = select.value;
    fill(
      select,
      h("option", { value: "" }, label),
      [...new Set(values)].sort().map((v) => h("option", { value: v }, v)),
    );
    select.value = values.includes(keep) ? keep : "";
  };

  const render = () => {
    if (editing) {
      stale = true;
      return;
    }
    options(
      category,
      "All categories",
      all.map((m) => m.category),
    );
    options(
      tag,
      "All tags",
      all.flatMap((m) => m.tags ?? []),
    );
    const source = results ?? all;
    const picked = source.filter(
      (m) => (!category.value || m.category === category.value) && (!tag.value || (m.tags ?? []).includes(tag.value)),
    );
    // Every item is made again (a change from the stream re-renders the list): the keyboard
    // stays on the same control of the same memory, not lost to the page.
    const focused = document.activeElement;
    const item = focused instanceof HTMLElement && list.contains(focused) ? focused.closest("li") : null;
    const controls = (li: Element) => [...li.querySelectorAll<HTMLElement>("button, a, input, select, textarea")];
    const at = item ? { id: item.dataset.id, index: controls(item).indexOf(focused as HTMLElement) } : undefined;
    fill(list, picked.slice(0, shown).map(memoryItem));
    if (at?.id !== undefined && at.index >= 0) {
      const again = [...list.querySelectorAll<HTMLElement>("li.memory")].find((li) => li.dataset.id === at.id);
      if (again) controls(again)[at.index]?.focus();
    }
    more.hidden = picked.length <= shown;
    more.textContent = `Show more (${picked.length - shown} more)`;
    loadMore.hidden = results !== null || next === null;
    count.textContent = `${searchNote}${picked.length} ${picked.length === 1 ? "memory" : "memories"}${
      picked.length < source.length ? ` of ${source.length} (filtered)` : ""
    }`;
  };

  const memoryItem = (m: Memory) => {
    const li = h("li", { class: "memory", "data-id": m.id });
    /** A button acting on this memory, named with its content for a screen reader. */
    const action = (label: string, cls: string, onclick: () => void) =>
      h("button", { type: "button", class: cls, "aria-label": `${label}: ${m.content.slice(0, 60)}`, onclick }, label);
    const show = () =>
      fill(
        li,
        h("p", { class: "content" }, m.content),
        h(
          "div",
          { class: "meta" },
          h("span", { class: "badge" }, m.category),
          (m.tags ?? []).map((t) => h("span", { class: "tag" }, t)),
          h("span", {}, `importance ${m.importance}`),
          m.score !== undefined ? h("span", {}, `score ${m.score.toFixed(3)}`) : null,
          m.createdAt ? h("span", { title: m.createdAt }, age(m.createdAt)) : null,
          // When the fact was stated, if that is not when it was stored.
          m.observedAt && m.observedAt !== m.createdAt
            ? h("span", { class: "observed" }, "observed ", time(m.observedAt))
            : null,
        ),
        h(
          "div",
          { class: "actions" },
          link(memoryHref(m.id), "History", { "aria-label": `History of: ${m.content.slice(0, 60)}` }),
          canWrite() && asOf === null
            ? [action("Edit", "edit", () => editForm()), action("Delete", "delete danger", () => remove())]
            : null,
        ),
      );
    const editForm = () => {
      editing = true;
      const id = m.id;
      const content = h("textarea", { id: `c-${id}`, rows: "3", required: true }, m.content);
      const cat = h("input", { id: `k-${id}`, value: m.category, required: true });
      const imp = h("input", { id: `i-${id}`, type: "number", min: "0", max: "1", step: "any", value: m.importance });
      const tags = h("input", { id: `t-${id}`, value: (m.tags ?? []).join(", ") });
      const form = h(
        "form",
        { class: "edit-form", "aria-label": "Edit memory" },
        h("label", { for: `c-${id}` }, "Content"),
        content,
        h(
          "div",
          { class: "row" },
          h("div", {}, h("label", { for: `k-${id}` }, "Category"), cat),
          h("div", {}, h("label", { for: `i-${id}` }, "Importance"), imp),
          h("div", {}, h("label", { for: `t-${id}` }, "Tags (comma separated)"), tags),
        ),
        h(
          "div",
          { class: "actions" },
          h("button", { type: "submit" }, "Save"),
          h("button", { type: "button", onclick: () => done() }, "Cancel"),
        ),
      );
      const done = () => {
        editing = false;
        show();
        // Back where the keyboard was: the memory's own Edit button.
        li.querySelector<HTMLElement>("button.edit")?.focus();
        if (stale) {
          stale = false;
          refresh().catch(showError);
        }
      };
      form.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const patch: Record<string, unknown> = {};
        if (content.value !== m.content) patch.content = content.value;
        if (cat.value !== m.category) patch.category = cat.value;
        if (Number(imp.value) !== m.importance) patch.importance = Number(imp.value);
        const newTags = tags.value
          .split(",")
          .map((t) => t.trim())
          .filter(Boolean);
        if (newTags.join("\n") !== (m.tags ?? []).join("\n")) patch.tags = newTags.length ? newTags : null;
        try {
          Object.assign(m, await api<Memory>("PATCH", `/v1/memory/${enc(m.id)}`, patch));
          done();
        } catch (e) {
          showError(e);
        }
      });
      form.addEventListener("keydown", (ev) => {
        if (ev.key === "Escape") done();
      });
      fill(li, form);
      content.focus();
    };
    const remove = async () => {
      const ok = await confirmDialog({
        title: "Delete this memory?",
        text: m.content,
        confirm: "Delete",
      });
      if (!ok) return;
      try {
        await api("DELETE", `/v1/memory/${enc(m.id)}`);
        all = all.filter((x) => x.id !== m.id);
        if (results) results = results.filter((x) => x.id !== m.id);
        render();
        // The deleted memory's place is gone: the keyboard continues from the list's heading.
        main.querySelector<HTMLElement>("h1")?.focus();
      } catch (e) {
        showError(e);
      }
    };
    show();
    return li;
  };

  const search = async () => {
    const q = query.value.trim();
    if (!q) {
      results = null;
      searchNote = "";
      return render();
    }
    // As of a moment, search is by words only (older versions have no embeddings).
    const r = await api<{ results: Memory[]; mode: string }>("POST", "/v1/memory/search", {
      namespace: ns,
      entity,
      query: q,
      limit: 100,
      ...(asOf === null ? {} : { asOf, mode: "keyword" }),
    });
    results = r.results;
    searchNote = `Search (${r.mode}) for “${q}”: `;
    shown = pageRows;
    render();
  };

  const refresh = async () => {
    await load(true);
    if (results !== null && query.value.trim()) await search();
    else render();
  };

  const searchForm = h(
    "form",
    { class: "search", role: "search" },
    h("label", { for: "q" }, "Search memories"),
    query,
    h("button", { type: "submit" }, "Search"),
    h(
      "button",
      {
        type: "button",
        onclick: () => {
          query.value = "";
          search().catch(showError);
        },
      },
      "Clear",
    ),
  );
  searchForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    search().catch(showError);
  });
  const restoreButton = h("button", { type: "button", class: "restore", hidden: true }, "Restore to this moment");
  restoreButton.addEventListener("click", async () => {
    if (asOf === null) return;
    try {
      const body = { namespace: ns, entity, asOf };
      const dry = await api<RestoreResponse>("POST", "/v1/memory/restore", { ...body, dryRun: true });
      const counts = ["add", "update", "delete"].map(
        (a) =>
          `${dry.memories.filter((m) => m.action === a).length} ${a === "add" ? "brought back" : a === "update" ? "changed back" : "deleted"}`,
      );
      const erased = dry.memories.filter((m) => m.action === "erased").length;
      const ok = await confirmDialog({
        title: `Restore ${entity} to ${new Date(asOf).toLocaleString()}?`,
        text:
          dry.changed === 0
            ? "Nothing to do: the entity is as it was then."
            : `${counts.join(", ")}, in one change, recorded as events of their own.${erased ? ` ${erased} erased since cannot come back.` : ""}`,
        confirm: dry.changed === 0 ? "OK" : "Restore",
      });
      if (!ok || dry.changed === 0) return;
      await api("POST", "/v1/memory/restore", body);
      asOfInput.value = "";
      await showAsOf(null);
    } catch (e) {
      showError(e);
    }
  });
  const showAsOf = async (value: string | null) => {
    asOf = value;
    asOfNote.textContent =
      asOf === null
        ? ""
        : `As of ${new Date(asOf).toLocaleString()}: the memories exactly as they were then, from the audit trail (read-only).`;
    restoreButton.hidden = asOf === null || !canWrite();
    shown = pageRows;
    await refresh();
  };
  const asOfForm = h(
    "form",
    { class: "as-of", "aria-label": "As of a moment" },
    h("div", {}, h("label", { for: "as-of" }, "As of (local time)"), asOfInput),
    h("button", { type: "submit" }, "Show as of"),
    restoreButton,
    h(
      "button",
      {
        type: "button",
        onclick: () => {
          asOfInput.value = "";
          showAsOf(null).catch(showError);
        },
      },
      "Now",
    ),
  );
  asOfForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const ms = new Date(asOfInput.value).getTime();
    showAsOf(asOfInput.value && !Number.isNaN(ms) ? new Date(ms).toISOString() : null).catch(showError);
  });
  const filters = h(
    "div",
    { class: "filters" },
    h("div", {}, h("label", { for: "f-category" }, "Category"), category),
    h("div", {}, h("label", { for: "f-tag" }, "Tag"), tag),
    asOfForm,
  );
  for (const s of [category, tag])
    s.addEventListener("change", () => {
      shown = pageRows;
      render();
    });
  more.addEventListener("click", () => {
    shown += pageRows;
    render();
  });
  loadMore.addEventListener("click", () => load(false).then(render).catch(showError));

  const erase = canErase()
    ? h(
        "button",
        {
          type: "button",
          class: "danger erase",
          onclick: async () => {
            const ok = await confirmDialog({
              title: `Erase ${entity}?`,
              text: `Every memory of ${entity} in ${ns}, current or not, loses its content, and the content of its audit events is removed. This cannot be undone.`,
              confirm: "Erase",
              typed: entity,
            });
            if (!ok) return;
            try {
              await api("POST", "/v1/memory/erase", { namespace: ns, entity });
              await refresh();
            } catch (e) {
              showError(e);
            }
          },
        },
        "Erase entity…",
      )
    : null;

  fill(
    main,
    title(
      entity,
      link(changesHref(ns, entity), "What changed since…", { class: "button" }),
      canWrite() ? consolidateButton(ns, entity) : "",
      erase ?? "",
    ),
    h("p", { class: "hint" }, `Entity in namespace ${ns}`),
    searchForm,
    filters,
    asOfNote,
    count,
    list,
    more,
    loadMore,
  );
  await load(true);
  if (!current(token)) return;
  render();
  // A view as of a past moment does not change; only the current one follows the stream.
  watch(ns, entity, () => (asOf === null ? refresh().catch(showError) : undefined));
}

/**
 * "Consolidate…": the dry run of POST /v1/memory/consolidate shown first (each group: what is
 * kept, what is merged into it), then applied on confirmation.
 */
function consolidateButton(ns: string, entity: string) {
  return h(
    "button",
    {
      type: "button",
      class: "consolidate",
      onclick: async () => {
        try {
          const dry = await api<ConsolidateResponse>("POST", "/v1/memory/consolidate", {
            namespace: ns,
            entity,
            dryRun: true,
          });
          const groups = dry.groups
            .map((g) => `Keep "${g.kept.content}", merging ${g.merged.map((m) => `"${m.content}"`).join(", ")}`)
            .join("\n");
          const ok = await confirmDialog({
            title: dry.groups.length ? `Consolidate ${entity}?` : "Nothing to consolidate",
            text: dry.groups.length
              ? `${dry.memoriesMerged} memories would be merged, in ${dry.groups.length} groups:\n${groups}\nEach merge is recorded (MERGE and DELETE events); restoring to this moment undoes it.`
              : "No two memories of this entity state the same fact.",
            confirm: dry.groups.length ? "Consolidate" : "OK",
          });
          if (ok && dry.groups.length) await api("POST", "/v1/memory/consolidate", { namespace: ns, entity });
        } catch (e) {
          showError(e);
        }
      },
    },
    "Consolidate…",
  );
}

// ---------------------------------------------------------------- history of a memory

function diffView(oldText: string | null, newText: string | null) {
  if (oldText !== null && newText !== null)
    return h(
      "p",
      { class: "diff" },
      wordDiff(oldText, newText).map((p) =>
        p.kind === "same" ? p.text : h(p.kind === "added" ? "ins" : "del", {}, p.text),
      ),
    );
  if (newText !== null) return h("p", { class: "diff" }, h("ins", {}, newText));
  if (oldText !== null) return h("p", { class: "diff" }, h("del", {}, oldText));
  return h("p", { class: "diff hint" }, "(no content: erased)");
}

/** Event kinds that change a memory's state: the ones a user can take back. */
const changes = new Set(["ADD", "UPDATE", "MERGE", "REPLACE", "DELETE"]);

/**
 * "Undo this change": the memory goes back to its state right after the event before `e` in its
 * history (POST /v1/memory/{id}/revert, shown first as a dry run); for its first event, it is
 * deleted. The view follows by the stream.
 */
function undoButton(id: string, e: AuditEvent, evs: AuditEvent[]) {
  return h(
    "button",
    {
      type: "button",
      class: "undo",
      onclick: async () => {
        const older = evs.slice(evs.indexOf(e) + 1).find((x) => changes.has(x.event));
        try {
          if (!older) {
            const ok = await confirmDialog({
              title: "Undo this change?",
              text: "This is the memory's first event: undoing it deletes the memory (event DELETE). It can be taken back from its history.",
              confirm: "Delete",
            });
            if (ok) await api("DELETE", `/v1/memory/${enc(id)}`);
            return;
          }
          const dry = await api<RevertResponse>("POST", `/v1/memory/${enc(id)}/revert`, {
            toEvent: older.id,
            dryRun: true,
          });
          const what =
            dry.action === "unchanged"
              ? "The memory is already as it was before this change: nothing to do."
              : dry.action === "delete"
                ? "The memory will be deleted (event DELETE), as it was before this change."
                : `The memory becomes what it was before this change${dry.after ? `: "${dry.after.content}"` : ""} (changes: ${dry.fields.join(", ")}). The undo is recorded as an event of its own.`;
          if (dry.action === "unchanged") {
            await confirmDialog({ title: "Nothing to undo", text: what, confirm: "OK" });
            return;
          }
          if (await confirmDialog({ title: "Undo this change?", text: what, confirm: "Undo" }))
            await api("POST", `/v1/memory/${enc(id)}/revert`, { toEvent: older.id });
        } catch (err) {
          showError(err);
        }
      },
    },
    "Undo this change",
  );
}

async function historyView(id: string, token: number) {
  setCrumbs(["Namespaces", "#/"], ["History", null]);
  const [events, memory] = await Promise.all([
    api<AuditEvent[]>("GET", `/v1/memory/events${qs({ memoryId: id, limit: 1000 })}`),
    api<Memory>("GET", `/v1/memory/${enc(id)}`).catch((e) => {
      if (e instanceof ApiError && e.status === 404) return null;
      throw e;
    }),
  ]);
  if (!current(token)) return;
  const first = events.at(-1);
  const ns = memory?.namespace ?? first?.namespace;
  const entity = memory?.entity ?? first?.entity;
  if (ns !== undefined && entity !== undefined)
    setCrumbs(["Namespaces", "#/"], [ns, nsHref(ns)], [entity, entityHref(ns, entity)], ["History", null]);
  const list = h("ol", { class: "timeline", "aria-label": "Events, newest first" });
  const more = h("button", { type: "button" }, "Show more");
  let shown = pageRows;
  let evs = events;
  const render = () => {
    fill(
      list,
      evs
        .slice(0, shown)
        .map((e) =>
          h(
            "li",
            { class: `event kind-${e.event}` },
            h(
              "div",
              { class: "meta" },
              h("span", { class: "badge kind" }, e.event),
              time(e.createdAt),
              h("span", {}, `by ${e.actorKeyId ?? "(system)"}`),
              e.reason ? h("span", {}, `reason: ${e.reason}`) : null,
              e.observedAt ? h("span", { class: "observed" }, "observed ", time(e.observedAt)) : null,
              e.oldObservedAt && e.event !== "DELETE"
                ? h("span", { class: "observed old" }, "was observed ", time(e.oldObservedAt))
                : null,
            ),
            diffView(e.oldContent, e.newContent),
            e.mergedFromId && e.mergedFromId !== id
              ? h(
                  "p",
                  {},
                  `${e.event === "REPLACE" ? "Replaced" : "Merged from"} `,
                  link(memoryHref(e.mergedFromId), "the earlier memory"),
                )
              : null,
            e.memoryId !== id ? h("p", {}, "Replaced by ", link(memoryHref(e.memoryId), "a newer memory")) : null,
            e.revertOf ? h("p", { class: "hint" }, `Takes back to: ${e.revertOf}`) : null,
            canWrite() && changes.has(e.event) && e.reason !== "erased" ? undoButton(id, e, evs) : null,
          ),
        ),
    );
    more.hidden = evs.length <= shown;
    more.textContent = `Show more (${evs.length - shown} more)`;
  };
  more.addEventListener("click", () => {
    shown += pageRows;
    render();
  });
  fill(
    main,
    title("History of a memory"),
    memory
      ? h(
          "div",
          { class: "card" },
          h("p", { class: "content" }, memory.content),
          h("p", { class: "hint" }, `Current · ${memory.category} · id ${id}`),
          h("p", { class: "hint" }, "Observed ", time(memory.observedAt)),
        )
      : h(
          "p",
          { class: "card hint" },
          `This memory is no longer current (deleted, replaced, erased or expired). Id ${id}.`,
        ),
    h("p", { class: "hint", role: "status" }, `${events.length} ${events.length === 1 ? "event" : "events"}`),
    list,
    more,
  );
  render();
  if (ns !== undefined)
    watch(ns, entity, async (e) => {
      if (e.memoryId !== id && e.mergedFromId !== id) return;
      evs = await api<AuditEvent[]>("GET", `/v1/memory/events${qs({ memoryId: id, limit: 1000 })}`);
      render();
    });
}

// ---------------------------------------------------------------- what changed since

/** "2026-01-31T12:00:00" in local time, for a datetime-local input. */
function localInput(ms: number) {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 19);
}

async function changesView(ns: string, entity?: string) {
  setCrumbs(
    ["Namespaces", "#/"],
    [ns, nsHref(ns)],
    ...(entity === undefined ? [] : [[entity, entityHref(ns, entity)] as [string, string]]),
    ["Changes", null],
  );
  const since = h("input", { id: "since", name: "since", type: "datetime-local", step: "1", required: true });
  since.value = localInput(Date.now() - 86400000);
  const out = h("div", { class: "changes", "aria-live": "polite" });
  const pages: (string | null)[] = [];
  const show = async (from: string, refocus?: string) => {
    const d = await api<Diff>("POST", "/v1/memory/diff", { namespace: ns, entity, since: from, limit: 200 });
    pages.push(from);
    const next = h("button", { type: "button", class: "next" }, "Next page");
    next.hidden = !d.hasMore;
    // After paging, the keyboard stays on the same button of the new page.
    next.addEventListener("click", () => d.nextSince && show(d.nextSince, "button.next").catch(showError));
    const prev = h("button", { type: "button", class: "prev" }, "Previous page");
    prev.hidden = pages.length < 2;
    prev.addEventListener("click", () => {
      pages.pop();
      show(pages.pop()!, "button.prev").catch(showError);
    });
    const section = (name: string, items: Node[]) =>
      h(
        "section",
        {},
        h("h2", {}, `${name} (${items.length})`),
        items.length ? h("ul", { class: "diff-list" }, items) : h("p", { class: "hint" }, "none"),
      );
    fill(
      out,
      h(
        "p",
        { class: "summary", role: "status", tabindex: "-1" },
        `${d.summary} (${d.changeCount} changes, page ${pages.length})`,
      ),
      section(
        "Created",
        d.created.map((c) =>
          h("li", { class: "diff-item" }, diffView(null, c.content), meta(c.category, c.createdAt, c.id)),
        ),
      ),
      section(
        "Updated",
        d.updated.map((u) =>
          h("li", { class: "diff-item" }, diffView(u.previousContent, u.content), meta(u.category, u.updatedAt, u.id)),
        ),
      ),
      section(
        "Deleted",
        d.deleted.map((x) =>
          h(
            "li",
            { class: "diff-item" },
            diffView(x.content, null),
            meta(x.category, x.deletedAt, x.id, x.reason ? `reason: ${x.reason}` : ""),
          ),
        ),
      ),
      section(
        "Replaced",
        d.replaced.map((r) =>
          h(
            "li",
            { class: "diff-item" },
            diffView(r.oldContent, r.newContent),
            meta(r.category, r.replacedAt, r.newId, `reason: ${r.reason}`),
            h("p", { class: "hint" }, "old: ", link(memoryHref(r.oldId), r.oldId)),
          ),
        ),
      ),
      h("div", { class: "actions" }, prev, next),
      h("details", {}, h("summary", {}, "The answer as JSON"), h("pre", {}, JSON.stringify(d, null, 2))),
    );
    if (refocus) {
      const again = out.querySelector<HTMLElement>(refocus);
      // A page without that button (the last one has no Next): its summary takes the focus.
      (again && !again.hidden ? again : out.querySelector<HTMLElement>(".summary"))?.focus();
    }
  };
  const meta = (category: string, at: string, id: string, extra = "") =>
    h(
      "div",
      { class: "meta" },
      h("span", { class: "badge" }, category),
      time(at),
      link(memoryHref(id), "History"),
      extra ? h("span", {}, extra) : null,
    );
  const form = h(
    "form",
    { class: "inline" },
    h("label", { for: "since" }, "Changes since (your local time)"),
    since,
    h("button", { type: "submit" }, "Show changes"),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const ms = new Date(since.value).getTime();
    if (Number.isNaN(ms)) return showError(new Error("pick a date and time"));
    pages.length = 0;
    show(new Date(ms).toISOString()).catch(showError);
  });
  fill(main, title(`What changed in ${entity ?? ns}`), form, out);
}

// ---------------------------------------------------------------- start

// ---------------------------------------------------------------- webhooks (issue 34)

interface WebhookInfo {
  id: string;
  url: string;
  namespaces: string[];
  events: string[];
  description: string | null;
  state: "active" | "paused" | "disabled";
  stateReason: string | null;
  cursor: number;
  failingSince: string | null;
  lastDeliveredAt: string | null;
  lastError: string | null;
}
interface DeliveryInfo {
  seq: number;
  messageId: string;
  event: string;
  namespace: string;
  at: string;
  attempt: number;
  status: number | null;
  ok: boolean;
  error: string | null;
  durationMs: number;
}

const stateBadge = (w: WebhookInfo) =>
  h("span", { class: `badge webhook-${w.state}`, title: w.stateReason ?? "" }, w.state);

/** The subscriptions this key manages: state, filter, cursor, last delivery and error. */
async function webhooksView(token: number) {
  setCrumbs(["Namespaces", "#/"], ["Webhooks", null]);
  const list = await api<WebhookInfo[]>("GET", "/v1/webhooks");
  if (!current(token)) return;
  const table = h(
    "table",
    { class: "webhooks" },
    h("caption", {}, `${list.length} webhook subscription${list.length === 1 ? "" : "s"}`),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["URL", "Namespaces", "Events", "State", "Cursor", "Last delivered", "Last error"].map((c) => h("th", {}, c)),
      ),
    ),
    h(
      "tbody",
      {},
      list.map((w) =>
        h(
          "tr",
          {},
          h("td", {}, link(`#/webhooks/${enc(w.id)}`, w.url)),
          h("td", {}, w.namespaces.join(", ")),
          h("td", {}, w.events.length === 7 ? "all" : w.events.join(", ")),
          h("td", {}, stateBadge(w), w.stateReason ? h("div", { class: "reason" }, w.stateReason) : null),
          h("td", {}, String(w.cursor)),
          h("td", {}, w.lastDeliveredAt ? time(w.lastDeliveredAt) : "never"),
          h("td", { class: "error" }, w.lastError ?? ""),
        ),
      ),
    ),
  );
  fill(
    main,
    title("Webhooks"),
    list.length ? table : h("p", {}, "This key manages no webhook subscription. See docs/webhooks.md to make one."),
  );
}

/** One subscription: its settings and state, pause or resume, and its recent delivery attempts. */
async function webhookView(id: string, token: number) {
  setCrumbs(["Namespaces", "#/"], ["Webhooks", "#/webhooks"], [id, null]);
  const [w, deliveries] = await Promise.all([
    api<WebhookInfo>("GET", `/v1/webhooks/${enc(id)}`),
    api<DeliveryInfo[]>("GET", `/v1/webhooks/${enc(id)}/deliveries?limit=100`),
  ]);
  if (!current(token)) return;
  const toggle = h(
    "button",
    {
      type: "button",
      onclick: async () => {
        try {
          await api("PATCH", `/v1/webhooks/${enc(id)}`, { state: w.state === "active" ? "paused" : "active" });
          await route();
        } catch (e) {
          showError(e);
        }
      },
    },
    w.state === "active" ? "Pause" : "Resume",
  );
  const facts: [string, Node | string][] = [
    ["URL", w.url],
    ["Namespaces", w.namespaces.join(", ")],
    ["Events", w.events.join(", ")],
    ["Description", w.description ?? ""],
    ["State", h("span", {}, stateBadge(w), w.stateReason ? ` ${w.stateReason}` : "")],
    ["Cursor (seq)", String(w.cursor)],
    ["Failing since", w.failingSince ? time(w.failingSince) : "—"],
    ["Last delivered", w.lastDeliveredAt ? time(w.lastDeliveredAt) : "never"],
    ["Last error", w.lastError ?? "—"],
  ];
  const log = h(
    "table",
    { class: "deliveries" },
    h("caption", {}, `Recent deliveries (${deliveries.length})`),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Seq", "Event", "Attempt", "Time", "Status", "Error"].map((c) => h("th", {}, c)),
      ),
    ),
    h(
      "tbody",
      {},
      deliveries.map((d) =>
        h(
          "tr",
          { class: d.ok ? "ok" : "failed" },
          h("td", {}, String(d.seq)),
          h("td", {}, `${d.event} (${d.namespace})`),
          h("td", {}, String(d.attempt)),
          h("td", {}, time(d.at)),
          h("td", {}, d.status === null ? "no answer" : String(d.status)),
          h("td", { class: "error" }, d.error ?? ""),
        ),
      ),
    ),
  );
  fill(
    main,
    title(`Webhook ${w.id}`, toggle),
    h(
      "dl",
      { class: "facts" },
      facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
    ),
    deliveries.length ? log : h("p", {}, "No delivery attempt yet."),
  );
}

window.addEventListener("hashchange", () => {
  route();
});

async function start() {
  if (session.get()) {
    try {
      me = await api<Me>("GET", "/v1/me");
    } catch (e) {
      session.clear();
      showError(e);
    }
  }
  showWho();
  await route();
}
start();
