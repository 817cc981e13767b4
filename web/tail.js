// tail.js: a live tail of one stream by Server-Sent Events, read with
// fetch() (EventSource cannot send the Authorization header a gateway
// needs) from the /v1/stream/ surface, whose data events carry JSON
// messages as an array, text as lines and binary types in base64
// (Stream-SSE-Data-Encoding). Each message is shown as it comes: text as
// is, JSON compact, binary as its length and first bytes in hex.

import { headers, segments } from "./api.js";

const KEEP = 200; // lines shown

function hex(bytes) {
  return [...bytes.slice(0, 32)].map((b) => b.toString(16).padStart(2, "0")).join(" ");
}

export class Tail {
  // path: bucket/name; box: the element the lines go to; status: a line of text.
  constructor(path, box, status) {
    Object.assign(this, { path, box, status });
    this.ctrl = null;
    this.count = 0;
  }

  line(text, meta = false) {
    const d = document.createElement("div");
    if (meta) d.className = "meta";
    d.textContent = text;
    this.box.append(d);
    while (this.box.childElementCount > KEEP) this.box.firstElementChild.remove();
    this.box.scrollTop = this.box.scrollHeight;
  }

  show(data, base64, json) {
    if (base64) {
      const raw = Uint8Array.from(atob(data.replace(/\s+/g, "")), (c) => c.charCodeAt(0));
      this.line(`${raw.length} bytes  ${hex(raw)}${raw.length > 32 ? " …" : ""}`);
    } else if (json) {
      let msgs;
      try {
        msgs = JSON.parse(data);
      } catch {
        msgs = [data];
      }
      for (const m of Array.isArray(msgs) ? msgs : [msgs]) this.line(JSON.stringify(m));
    } else {
      this.line(data);
    }
    this.count++;
  }

  async start() {
    this.stop();
    const ctrl = (this.ctrl = new AbortController());
    this.status.textContent = "connecting…";
    let offset = "now";
    while (!ctrl.signal.aborted) {
      try {
        const r = await fetch(`/v1/stream/${segments(this.path)}?offset=${encodeURIComponent(offset)}&live=sse`,
          { headers: headers(), signal: ctrl.signal, cache: "no-store" });
        if (!r.ok) {
          this.status.textContent = `stopped: ${r.status}`;
          return;
        }
        const base64 = r.headers.get("stream-sse-data-encoding") === "base64";
        const json = /json/i.test(r.headers.get("stream-data-content-type") ?? "");
        this.status.textContent = "live";
        this.box.dataset.live = "1";
        offset = await this.pump(r, base64, json, offset);
        if (offset === null) return;
      } catch (e) {
        if (ctrl.signal.aborted) return;
        this.status.textContent = `reconnecting (${e.message})`;
        await new Promise((res) => setTimeout(res, 1000));
      }
    }
  }

  // Reads events until the answer ends; returns the offset to go on from,
  // or null when the stream is closed and read.
  async pump(r, base64, json, offset) {
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let pending = "", type = null, data = [];
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return offset;
      pending += dec.decode(value, { stream: true });
      let i;
      while ((i = pending.search(/\r\n|\n|\r/)) >= 0) {
        const line = pending.slice(0, i);
        pending = pending.slice(pending[i] === "\r" && pending[i + 1] === "\n" ? i + 2 : i + 1);
        if (line === "") {
          if (type === "data") this.show(data.join("\n"), base64, json);
          else if (type === "control") {
            try {
              const c = JSON.parse(data.join("\n"));
              if (c.streamNextOffset) offset = c.streamNextOffset;
              this.status.textContent = `live · ${this.count} event${this.count === 1 ? "" : "s"} · next offset ${offset}`;
              if (c.streamClosed) {
                this.status.textContent += " · closed";
                return null;
              }
            } catch { /* not ours */ }
          } else if (type === "error") this.line(`error: ${data.join("\n")}`, true);
          type = null;
          data = [];
        } else if (line.startsWith("event:")) type = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
    }
  }

  stop() {
    if (this.ctrl) this.ctrl.abort();
    this.ctrl = null;
    delete this.box.dataset.live;
    this.status.textContent = "stopped";
  }
}
