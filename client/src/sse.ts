// Server-Sent Events, read in one place: the client's stream(), the page's live view
// (ui/src/stream.ts) and the tests (test/sse.ts) all parse the wire format with this.

/** One message: its fields, and its comment lines (": keepalive"), without the colon. */
export interface SseMessage {
  id?: string;
  event?: string;
  data?: string;
  comments: string[];
}

/**
 * Splits a text/event-stream body into messages: lines of `field: value` (CRLF, CR or LF line
 * ends), a blank line ends a message, repeated `data` lines join with "\n", comments are kept
 * apart. Ends when the body ends.
 */
export async function* sseMessages(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let ended = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        ended = true;
        return;
      }
      buf += dec.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
      let end = buf.indexOf("\n\n");
      while (end !== -1) {
        const m: SseMessage = { comments: [] };
        for (const line of buf.slice(0, end).split("\n")) {
          if (line.startsWith(":")) {
            m.comments.push(line.slice(1).trim());
            continue;
          }
          const i = line.indexOf(":");
          const field = i === -1 ? line : line.slice(0, i);
          const v = i === -1 ? "" : line.slice(i + 1).replace(/^ /, "");
          if (field === "id") m.id = v;
          else if (field === "event") m.event = v;
          else if (field === "data") m.data = m.data === undefined ? v : `${m.data}\n${v}`;
        }
        buf = buf.slice(end + 2);
        yield m;
        end = buf.indexOf("\n\n");
      }
    }
  } finally {
    // A reader that stops early (break, an error) closes the stream: nothing else will read it.
    if (ended) reader.releaseLock();
    else await reader.cancel().catch(() => {});
  }
}
