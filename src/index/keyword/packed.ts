// A packed keyword space's documents (space.ts, `packing`): every live document as one binary
// record in one byte array, instead of a line of JSON in one string (issue 32: on PostgreSQL a
// held namespace of 20 memories freed ~4.9 KiB of heap with JSON lines, ~4.0 KiB with records).
// A record: its size in bytes (varint), the id (0 and a UUID's 16 bytes, or 1 and a string),
// then the DocTerms: length (varint), createdAt (float64, the machine's byte order), entity (a string), and each term (a
// string) with its tf (varint). A string: a varint of its length in UTF-16 units times 2, plus 1
// when it is not all ASCII; then a byte a unit (ASCII) or two (every string exactly as it was,
// lone surrogates included).
import { hex8, words } from "./ids";

/** A memory's indexed terms: [length, createdAt, entity, term, tf, term, tf, ...]. */
export type DocTerms = (string | number)[];

export class PackedDocs {
  bytes = new Uint8Array(0);
  /** Bytes used (the rest is room). */
  end = 0;
  /** The read position of the reads below (no tuple a number read). */
  private at = 0;

  /** Appends a document (its id not packed already). */
  add(id: string, v: DocTerms) {
    // At most: 2 bytes each string's UTF-16 unit, 5 each varint, 8 the time; and 5 in front for
    // the record's size, written once known and moved to sit right before it.
    let most = 5 + 1 + 5 + id.length * 2 + 5 + 8 + 5 + (v[2] as string).length * 2;
    for (let i = 3; i < v.length; i += 2) most += 10 + (v[i] as string).length * 2;
    const need = this.end + most + 5;
    if (need > this.bytes.length) {
      const grown = new Uint8Array(Math.max(need, this.bytes.length * 2));
      grown.set(this.bytes.subarray(0, this.end));
      this.bytes = grown;
    }
    const b = this.bytes;
    const start = this.end + 5;
    let k = start;
    const w = words(id);
    if (w) {
      b[k++] = 0;
      for (const x of w) {
        b[k++] = x >>> 24;
        b[k++] = (x >>> 16) & 0xff;
        b[k++] = (x >>> 8) & 0xff;
        b[k++] = x & 0xff;
      }
    } else {
      b[k++] = 1;
      k = putString(b, k, id);
    }
    k = putVarint(b, k, v[0] as number);
    time[0] = v[1] as number;
    for (let i = 0; i < 8; i++) b[k++] = timeBytes[i];
    k = putString(b, k, v[2] as string);
    for (let i = 3; i < v.length; i += 2) {
      k = putString(b, k, v[i] as string);
      k = putVarint(b, k, v[i + 1] as number);
    }
    const size = k - start;
    const at = putVarint(b, this.end, size);
    b.copyWithin(at, start, k);
    this.end = at + size;
  }

  /** Removes the document of `id`; its length (DocTerms' first), or undefined if not packed. */
  remove(id: string): number | undefined {
    for (let at = 0; at < this.end; ) {
      const size = this.readVarint(at);
      const from = this.at;
      if (this.idAt(from) === id) {
        this.skipId(from);
        const length = this.readVarint(this.at);
        this.bytes.copyWithin(at, from + size, this.end);
        this.end -= from + size - at;
        return length;
      }
      at = from + size;
    }
    return undefined;
  }

  /**
   * Each document's id and terms, in the order added; with `terms`, of its terms only those
   * (its length still that of all its terms).
   */
  *docs(terms?: ReadonlySet<string>): Generator<[string, DocTerms]> {
    const b = this.bytes;
    // The terms looked for, as their records' bytes: compared in place, none decoded.
    const wanted = terms && [...terms].map((t) => encoded(t));
    for (let at = 0; at < this.end; ) {
      const size = this.readVarint(at);
      const end = this.at + size;
      const id = this.idAt(this.at);
      this.skipId(this.at);
      const length = this.readVarint(this.at);
      for (let i = 0; i < 8; i++) timeBytes[i] = b[this.at + i];
      const v: DocTerms = [length, time[0]];
      v.push(this.readString(this.at + 8));
      while (this.at < end) {
        let term: string | undefined;
        if (wanted) {
          const k = this.at;
          for (const [t, bytes] of wanted) if (this.sameBytes(k, bytes)) term = t;
          this.skipString(k);
        } else term = this.readString(this.at);
        const tf = this.readVarint(this.at);
        if (term !== undefined) v.push(term, tf);
      }
      yield [id, v];
      at = end;
    }
  }

  /** Drops spare room. */
  trim() {
    if (this.bytes.length > this.end) this.bytes = this.bytes.slice(0, this.end);
  }

  private sameBytes(k: number, bytes: Uint8Array): boolean {
    const b = this.bytes;
    for (let i = 0; i < bytes.length; i++) if (b[k + i] !== bytes[i]) return false;
    return true;
  }

  /** The varint at k; `at` after it. */
  private readVarint(k: number): number {
    const b = this.bytes;
    let n = 0;
    for (let scale = 1; ; scale *= 128) {
      const x = b[k++];
      n += (x & 0x7f) * scale;
      if (x < 0x80) {
        this.at = k;
        return n;
      }
    }
  }

  /** The string at k; `at` after it. */
  private readString(k: number): string {
    const x = this.readVarint(k);
    const from = this.at;
    const b = this.bytes;
    const n = x >>> 1;
    let s = "";
    if ((x & 1) === 0) {
      this.at = from + n;
      // (Terms and entities are short: a few codes at a time.)
      for (let i = from; i < from + n; i += 8)
        s += String.fromCharCode(b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5], b[i + 6], b[i + 7]);
      return s.length === n ? s : s.slice(0, n);
    }
    this.at = from + 2 * n;
    for (let i = from; i < from + 2 * n; i += 2) s += String.fromCharCode((b[i] << 8) | b[i + 1]);
    return s;
  }

  /** `at` after the id at k. */
  private skipId(k: number) {
    if (this.bytes[k] === 0) this.at = k + 17;
    else this.skipString(k + 1);
  }

  /** `at` after the string at k. */
  private skipString(k: number) {
    const x = this.readVarint(k);
    this.at += x & 1 ? x - 1 : x >>> 1;
  }

  /** The id at k; `at` left at k. */
  private idAt(k: number): string {
    const b = this.bytes;
    if (b[k] === 1) {
      const id = this.readString(k + 1);
      this.at = k;
      return id;
    }
    this.at = k;
    const w = (i: number) =>
      ((b[k + 1 + i * 4] << 24) | (b[k + 2 + i * 4] << 16) | (b[k + 3 + i * 4] << 8) | b[k + 4 + i * 4]) >>> 0;
    const a = hex8(w(0));
    const c = hex8(w(1));
    const d = hex8(w(2));
    const e = hex8(w(3));
    return `${a}-${c.slice(0, 4)}-${c.slice(4)}-${d.slice(0, 4)}-${d.slice(4)}${e}`;
  }
}

/**
 * A record's time goes through these, in the machine's byte order (records never leave the
 * process): not a DataView of the record array, whose `buffer` would be made for it, an object
 * more for every small namespace held (issue 32).
 */
const time = new Float64Array(1);
const timeBytes = new Uint8Array(time.buffer);

function putVarint(b: Uint8Array, k: number, n: number): number {
  for (; n >= 0x80; n = Math.floor(n / 128)) b[k++] = (n % 128) | 0x80;
  b[k++] = n;
  return k;
}

function putString(b: Uint8Array, k: number, s: string): number {
  const n = s.length;
  let ascii = true;
  for (let i = 0; i < n; i++) if (s.charCodeAt(i) >= 0x80) ascii = false;
  k = putVarint(b, k, n * 2 + (ascii ? 0 : 1));
  if (ascii) for (let i = 0; i < n; i++) b[k++] = s.charCodeAt(i);
  else
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      b[k++] = c >>> 8;
      b[k++] = c & 0xff;
    }
  return k;
}

/** A string and its bytes in a record (putString's), to compare in place. */
function encoded(s: string): [string, Uint8Array] {
  const b = new Uint8Array(5 + s.length * 2);
  return [s, b.subarray(0, putString(b, 0, s))];
}
