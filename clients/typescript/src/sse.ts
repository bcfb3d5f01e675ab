// Owns reading a Server-Sent Events body into messages, as the HTML standard's event stream
// interpretation does: lines end in CRLF, LF or CR (a CRLF may be split between two chunks), comment
// lines start with a colon, a data field may come on several lines, and the last event id is kept from
// one message to the next. Does not own the connection: events.ts feeds it the decoded text.

/** One dispatched message. */
export interface SseMessage {
  /** The last event id the stream set, at this message: what a reconnect sends as Last-Event-ID. */
  id: string;
  /** The event field, "message" when none was given. */
  event: string;
  /** The data lines joined with "\n". */
  data: string;
}

export class SseParser {
  /** A line begun in an earlier chunk. */
  private partial = "";
  /** The previous chunk ended in CR: an LF starting the next one belongs to that line end. */
  private skipLf = false;
  private started = false;
  private data: string[] = [];
  private event = "";
  private lastId = "";
  /** The reconnection time the stream asked for (a retry field), in milliseconds. */
  retryMs: number | undefined;

  /** Reads a chunk of decoded text; returns the messages it completed. */
  push(chunk: string): SseMessage[] {
    if (!this.started && chunk.length > 0) {
      this.started = true;
      if (chunk.charCodeAt(0) === 0xfeff) chunk = chunk.slice(1);
    }
    const out: SseMessage[] = [];
    let i = 0;
    if (this.skipLf && chunk.length > 0) {
      if (chunk[0] === "\n") i = 1;
      this.skipLf = false;
    }
    while (i < chunk.length) {
      const end = lineEnd(chunk, i);
      if (end < 0) {
        this.partial += chunk.slice(i);
        break;
      }
      const line = this.partial + chunk.slice(i, end);
      this.partial = "";
      i = end + 1;
      if (chunk[end] === "\r") {
        if (i === chunk.length) this.skipLf = true;
        else if (chunk[i] === "\n") i++;
      }
      const message = this.line(line);
      if (message) out.push(message);
    }
    return out;
  }

  private line(line: string): SseMessage | undefined {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    // A field other than these four is ignored.
    switch (field) {
      case "event":
        this.event = value;
        break;
      case "data":
        this.data.push(value);
        break;
      case "id":
        if (!value.includes("\0")) this.lastId = value;
        break;
      case "retry":
        if (/^\d+$/.test(value)) this.retryMs = Number(value);
        break;
    }
    return undefined;
  }

  private dispatch(): SseMessage | undefined {
    const data = this.data;
    const event = this.event;
    this.data = [];
    this.event = "";
    if (data.length === 0) return undefined;
    return { id: this.lastId, event: event || "message", data: data.join("\n") };
  }
}

function lineEnd(text: string, from: number): number {
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x0a || c === 0x0d) return i;
  }
  return -1;
}
