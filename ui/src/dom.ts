// DOM building without HTML strings: every text goes in as a text node, so memory content can
// never become markup (no innerHTML anywhere in the page).

type Child = Node | string | number | null | undefined | false | Child[];
type Handler = (e: Event) => void;
export type Props = Record<string, string | number | boolean | Handler | undefined | null>;

/** Creates an element; `on*` props become listeners, `true` an empty attribute, false/null nothing. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (typeof value === "function") el.addEventListener(name.slice(2), value);
    else if (name === "value") (el as HTMLInputElement).value = String(value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

/** Appends children: strings and numbers as text nodes. */
export function append(el: Node, children: Child[]) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
}

/** Replaces an element's children. */
export function fill(el: Node, ...children: Child[]) {
  while (el.firstChild) el.removeChild(el.firstChild);
  append(el, children);
}

/** "3 min ago", "2 d ago": an age for lists. */
export function age(iso: string, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

/** A time element with the local date-time as text and the ISO time as its datetime. */
export function time(iso: string): HTMLTimeElement {
  const d = new Date(iso);
  return h("time", { datetime: iso, title: iso }, Number.isNaN(d.getTime()) ? iso : d.toLocaleString());
}
