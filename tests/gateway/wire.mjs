// The gateway tests' HTTP/1.1 client over raw sockets: answers kept as sent
// (the status line, every header line in its order and case, the body's
// bytes), for the byte-for-byte comparisons of concealment, for requests
// whose body is sent a piece at a time (slow bodies, uploads cut
// mid-forward) and for several requests on one kept-alive connection. Also
// a fetch-based call() for everything else, answers in the same shape.
import net from "node:net";

// An answer: {statusLine, status, headers: [[name, value], ...] in the
// order sent, header(name) (the first value, case-insensitive, or null),
// body (Buffer), text, interim (1xx answers before it)}.
function makeAnswer(statusLine, headers, body, interim = []) {
  const status = Number(/^HTTP\/\d(?:\.\d)? (\d{3})/.exec(statusLine)?.[1] ?? 0);
  const header = (name) => {
    const n = name.toLowerCase();
    const h = headers.find(([k]) => k.toLowerCase() === n);
    return h ? h[1] : null;
  };
  return { statusLine, status, headers, header, body, text: body.toString("utf8"), interim };
}

// Parses the head at the start of buf: {statusLine, headers, end} or null
// when it is not complete yet.
function parseHead(buf) {
  const end = buf.indexOf("\r\n\r\n");
  if (end < 0) return null;
  const lines = buf.subarray(0, end).toString("latin1").split("\r\n");
  const headers = lines.slice(1).map((l) => {
    const i = l.indexOf(":");
    return [l.slice(0, i), l.slice(i + 1).trim()];
  });
  return { statusLine: lines[0], headers, end: end + 4 };
}

// Decodes a chunked body at the start of buf: {body, used} once the last
// chunk came, else null.
function dechunk(buf) {
  const parts = [];
  let at = 0;
  for (;;) {
    const eol = buf.indexOf("\r\n", at);
    if (eol < 0) return null;
    const size = parseInt(buf.subarray(at, eol).toString("latin1").split(";")[0], 16);
    if (Number.isNaN(size)) throw new Error("bad chunk size");
    if (size === 0) {
      const fin = buf.indexOf("\r\n\r\n", eol);
      if (fin < 0) return null;
      return { body: Buffer.concat(parts), used: fin + 4 };
    }
    if (buf.length < eol + 2 + size + 2) return null;
    parts.push(buf.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}

// One HTTP/1.1 connection to 127.0.0.1:port. write() sends bytes as they
// are given; answer() resolves with the next whole answer (1xx answers are
// kept in its `interim`), or rejects when the connection ends without one.
export class Conn {
  static open(port, { timeoutMs = 15000 } = {}) {
    return new Promise((resolve, reject) => {
      const c = new Conn(port, timeoutMs);
      c.sock.once("connect", () => resolve(c));
      c.sock.once("error", reject);
    });
  }

  constructor(port, timeoutMs) {
    this.buf = Buffer.alloc(0);
    this.ended = false;
    this.error = null;
    this.waiters = [];
    this.timeoutMs = timeoutMs;
    this.sock = net.connect(port, "127.0.0.1");
    this.sock.on("data", (d) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.#wake();
    });
    this.sock.on("error", (e) => {
      this.error = e;
      this.#wake();
    });
    this.sock.on("close", () => {
      this.ended = true;
      this.#wake();
    });
  }

  #wake() {
    for (const w of this.waiters.splice(0)) w();
  }

  // Sends bytes; false when the connection is gone (the peer closed it).
  write(bytes) {
    if (this.ended || this.sock.destroyed) return false;
    try {
      this.sock.write(bytes);
      return true;
    } catch {
      return false;
    }
  }

  // The next answer; `head` says it answers a HEAD (no body follows).
  async answer({ head = false, timeoutMs = this.timeoutMs } = {}) {
    const deadline = Date.now() + timeoutMs;
    const interim = [];
    for (;;) {
      const got = this.#take(head, interim);
      if (got) return got;
      if (this.ended || (this.error && !this.sock.readable)) {
        const tail = this.#take(head, interim, true);
        if (tail) return tail;
        throw new Error(`the connection ended without an answer${this.error ? ` (${this.error.code ?? this.error.message})` : ""}; got ${JSON.stringify(this.buf.toString("latin1").slice(0, 300))}`);
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no answer within ${timeoutMs} ms; got ${JSON.stringify(this.buf.toString("latin1").slice(0, 300))}`);
      await new Promise((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  // Takes one whole answer off the buffer (atEnd: the connection ended, so
  // an answer without a length ends here).
  #take(head, interim, atEnd = false) {
    for (;;) {
      const h = parseHead(this.buf);
      if (!h) return null;
      const status = Number(/^HTTP\/\d\.\d (\d{3})/.exec(h.statusLine)?.[1] ?? 0);
      if (status >= 100 && status < 200) {
        interim.push(makeAnswer(h.statusLine, h.headers, Buffer.alloc(0)));
        this.buf = this.buf.subarray(h.end);
        continue;
      }
      const get = (n) => h.headers.find(([k]) => k.toLowerCase() === n)?.[1];
      let body;
      let used;
      if (head || status === 204 || status === 304) {
        body = Buffer.alloc(0);
        used = h.end;
      } else if (/chunked/i.test(get("transfer-encoding") ?? "")) {
        const d = dechunk(this.buf.subarray(h.end));
        if (!d) return null;
        body = d.body;
        used = h.end + d.used;
      } else if (get("content-length") !== undefined) {
        const n = Number(get("content-length"));
        if (this.buf.length < h.end + n) return null;
        body = this.buf.subarray(h.end, h.end + n);
        used = h.end + n;
      } else {
        if (!atEnd) return null;
        body = this.buf.subarray(h.end);
        used = this.buf.length;
      }
      this.buf = this.buf.subarray(used);
      return makeAnswer(h.statusLine, h.headers, Buffer.from(body), interim);
    }
  }

  close() {
    this.sock.destroy();
  }
}

// The head of a request: method, path and headers ({name: value}, in
// order; Host added first unless given). A body given as a Buffer or
// string gets its Content-Length unless the headers name a length or
// Transfer-Encoding.
export function requestHead(method, path, headers = {}, body) {
  const lines = [`${method} ${path} HTTP/1.1`];
  const names = Object.keys(headers).map((k) => k.toLowerCase());
  if (!names.includes("host")) lines.push("Host: 127.0.0.1");
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  if (body !== undefined && !names.includes("content-length") && !names.includes("transfer-encoding")) {
    lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  }
  return `${lines.join("\r\n")}\r\n\r\n`;
}

// One request on a connection of its own; the answer as sent.
export async function rawRequest(port, method, path, { headers = {}, body, timeoutMs = 15000 } = {}) {
  const c = await Conn.open(port, { timeoutMs });
  try {
    c.write(requestHead(method, path, headers, body));
    if (body !== undefined) c.write(body);
    return await c.answer({ head: method === "HEAD", timeoutMs });
  } finally {
    c.close();
  }
}

// One request through fetch (redirects not followed); the answer in the
// shape above (header names lowercased, their order not kept).
export async function call(url, { method = "GET", headers = {}, body, timeoutMs = 15000 } = {}) {
  const res = await fetch(url, { method, headers, body, redirect: "manual", signal: AbortSignal.timeout(timeoutMs) });
  const buf = Buffer.from(await res.arrayBuffer());
  const answer = makeAnswer(`HTTP/1.1 ${res.status}`, [...res.headers.entries()], buf);
  answer.res = res;
  return answer;
}
