// A raw HTTP/2 client for the tests that look at frames (resets, floods,
// windows the client never opens): it sends the connection preface and
// frames built byte by byte (header blocks as HPACK literals, no table),
// and parses every frame the server sends (header blocks are not decoded:
// the tests look at types, flags, stream ids, error codes and lengths).
import net from "node:net";

export const T = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8 };
export const F = { END_STREAM: 1, ACK: 1, END_HEADERS: 4 };
export const E = { NO_ERROR: 0, CANCEL: 8, ENHANCE_YOUR_CALM: 11 };
export const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

export function frame(type, flags, id, payload = Buffer.alloc(0)) {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(id, 5);
  return Buffer.concat([h, payload]);
}

// An HPACK integer with an n-bit prefix whose high bits are `mask`.
function hpackInt(v, n, mask) {
  const max = (1 << n) - 1;
  if (v < max) return Buffer.from([mask | v]);
  const out = [mask | max];
  v -= max;
  while (v >= 128) {
    out.push((v % 128) + 128);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return Buffer.from(out);
}

// A header block of literal fields without indexing, new names.
export function headerBlock(fields) {
  const parts = [];
  for (const [name, value] of fields) {
    const n = Buffer.from(name, "latin1");
    const v = Buffer.from(String(value), "latin1");
    parts.push(Buffer.from([0]), hpackInt(n.length, 7, 0), n, hpackInt(v.length, 7, 0), v);
  }
  return Buffer.concat(parts);
}

export function settings(pairs = []) {
  const p = Buffer.alloc(6 * pairs.length);
  pairs.forEach(([id, v], i) => {
    p.writeUInt16BE(id, 6 * i);
    p.writeUInt32BE(v, 6 * i + 2);
  });
  return frame(T.SETTINGS, 0, 0, p);
}

export function request(id, method, path, { headers = [], endStream = true } = {}) {
  const block = headerBlock([[":method", method], [":scheme", "http"], [":path", path], [":authority", "127.0.0.1"], ...headers]);
  return frame(T.HEADERS, F.END_HEADERS | (endStream ? F.END_STREAM : 0), id, block);
}

export const rst = (id, code = E.CANCEL) => {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(code);
  return frame(T.RST_STREAM, 0, id, p);
};
export const ping = (n) => {
  const p = Buffer.alloc(8);
  p.writeUInt32BE(n >>> 0, 4);
  return frame(T.PING, 0, 0, p);
};

export class H2Conn {
  constructor(port, { settings: s = [] } = {}) {
    this.frames = [];
    this.buf = Buffer.alloc(0);
    this.closed = false;
    this.waiters = [];
    this.sock = net.connect(port, "127.0.0.1");
    this.sock.on("data", (d) => {
      this.buf = Buffer.concat([this.buf, d]);
      while (this.buf.length >= 9) {
        const len = this.buf.readUIntBE(0, 3);
        if (this.buf.length < 9 + len) break;
        const f = { type: this.buf[3], flags: this.buf[4], id: this.buf.readUInt32BE(5) & 0x7fffffff, payload: this.buf.subarray(9, 9 + len) };
        if (f.type === T.RST_STREAM || f.type === T.GOAWAY) f.code = f.payload.readUInt32BE(f.type === T.GOAWAY ? 4 : 0);
        this.frames.push(f);
        this.buf = this.buf.subarray(9 + len);
      }
      this.wake();
    });
    this.sock.on("close", () => {
      this.closed = true;
      this.wake();
    });
    this.sock.on("error", () => {});
    this.send(Buffer.concat([PREFACE, settings(s)]));
  }
  wake() {
    for (const w of this.waiters.splice(0)) w();
  }
  send(bytes) {
    if (!this.sock.destroyed) this.sock.write(bytes);
  }
  of(type, id) {
    return this.frames.filter((f) => f.type === type && (id === undefined || f.id === id));
  }
  // Waits until pred() holds, the socket closes, or ms pass; returns pred().
  async until(pred, ms = 5000) {
    const end = Date.now() + ms;
    while (!pred() && !this.closed && Date.now() < end) {
      await new Promise((r) => {
        this.waiters.push(r);
        setTimeout(r, Math.max(1, Math.min(100, end - Date.now())));
      });
    }
    return pred();
  }
  close() {
    this.sock.destroy();
  }
}
