// A raw HTTP/1.1 connection for the tests that speak to the transport on
// the wire (answers before the body, half-closed connections, malformed
// requests): it records every byte the server sends and when the server
// closes, waits for a condition with a bound, parses the answers received so
// far, and can shut its own sending side (a half-close) like a client that
// has nothing more to send.
import net from "node:net";

export class Conn {
  constructor(port) {
    this.sock = net.connect(port, "127.0.0.1");
    this.data = Buffer.alloc(0);
    this.closed = false;
    this.waiters = [];
    this.sock.on("data", (d) => {
      this.data = Buffer.concat([this.data, d]);
      this.wake();
    });
    this.sock.on("close", () => {
      this.closed = true;
      this.closedAt = Date.now();
      this.wake();
    });
    this.sock.on("error", () => {});
  }
  wake() {
    for (const w of this.waiters.splice(0)) w();
  }
  send(bytes) {
    this.sock.write(bytes);
  }
  // Shuts the sending side (FIN) and keeps reading: shutdown(SHUT_WR).
  halfClose() {
    this.sock.end();
  }
  get text() {
    return this.data.toString("latin1");
  }
  // Waits until pred() holds, the socket closes, or ms pass; returns pred().
  async until(pred, ms = 5000) {
    const deadline = Date.now() + ms;
    while (!pred() && !this.closed && Date.now() < deadline) {
      await new Promise((resolve) => {
        const t = setTimeout(resolve, deadline - Date.now());
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return pred();
  }
  // Parses the responses received so far (heads, and bodies by
  // Content-Length or chunked framing; a 1xx, 204 or 304 has no body).
  responses() {
    const out = [];
    let buf = this.data;
    for (;;) {
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return out;
      const lines = buf.subarray(0, end).toString("latin1").split("\r\n");
      const headers = {};
      for (const line of lines.slice(1)) {
        const i = line.indexOf(":");
        (headers[line.slice(0, i).trim().toLowerCase()] ??= []).push(line.slice(i + 1).trim());
      }
      const status = Number(lines[0].split(" ")[1]);
      let body;
      let next;
      if (/chunked/i.test(headers["transfer-encoding"]?.[0] ?? "")) {
        const parts = [];
        let at = end + 4;
        for (;;) {
          const eol = buf.indexOf("\r\n", at);
          if (eol < 0) return out;
          const size = parseInt(buf.subarray(at, eol).toString("latin1"), 16);
          if (buf.length < eol + 2 + size + 2) return out;
          parts.push(buf.subarray(eol + 2, eol + 2 + size));
          at = eol + 2 + size + 2;
          if (size === 0) break;
        }
        body = Buffer.concat(parts);
        next = at;
      } else {
        const len = status < 200 || status === 204 || status === 304 ? 0 : Number(headers["content-length"]?.[0] ?? 0);
        if (buf.length < end + 4 + len) return out;
        body = buf.subarray(end + 4, end + 4 + len);
        next = end + 4 + len;
      }
      out.push({ status, headers, header: (n) => headers[n]?.[0] ?? null, body: body.toString() });
      buf = buf.subarray(next);
    }
  }
  close() {
    this.sock.destroy();
  }
}
