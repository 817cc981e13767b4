// SSE fan-out over HTTP/2 against HTTP/1.1 (issue 17's target): R readers
// of one stream, on C HTTP/2 connections (R/C streams each) or on R
// HTTP/1.1 connections; A appends, one at a time; the figure is the time
// from sending an append to each reader's receiving its data event, over
// every reader and append (p50, p99, max).
// Usage: node bench/h2_fanout.mjs --url http://127.0.0.1:4437 [--readers 1000]
//        [--conns 10] [--appends 50] [--proto h2|h1]
import http from "node:http";
import http2 from "node:http2";
import { parseArgs } from "node:util";

const { values: o } = parseArgs({
  options: {
    url: { type: "string", default: "http://127.0.0.1:4437" },
    readers: { type: "string", default: "1000" },
    conns: { type: "string", default: "10" },
    appends: { type: "string", default: "50" },
    proto: { type: "string", default: "h2" },
  },
});
const R = Number(o.readers), C = Number(o.conns), A = Number(o.appends);
const stream = `${o.url}/v1/stream/bench/fanout-${o.proto}-${process.pid}`;
const path = new URL(stream).pathname;
await fetch(stream, { method: "PUT", headers: { "Content-Type": "text/plain" } });

const seen = []; // seen[k]: times readers got append k
let sentAt = [];
function onText(state, text) {
  state.buf += text;
  let m;
  while ((m = /event: data\ndata:a(\d+)\n\n/.exec(state.buf))) {
    const k = Number(m[1]);
    (seen[k] ??= []).push(performance.now() - sentAt[k]);
    state.buf = state.buf.slice(m.index + m[0].length);
  }
  if (state.buf.length > 1 << 16) state.buf = state.buf.slice(-4096);
}

const closers = [];
let open = 0;
const target = `${path}?offset=now&live=sse`;
if (o.proto === "h2") {
  for (let c = 0; c < C; c++) {
    const s = http2.connect(o.url, { settings: { initialWindowSize: 1 << 20 } });
    closers.push(() => s.destroy());
    for (let i = c; i < R; i += C) {
      const r = s.request({ ":path": target });
      const st = { buf: "" };
      r.setEncoding("utf8");
      r.on("response", () => open++);
      r.on("data", (d) => onText(st, d));
      r.on("error", () => {});
    }
  }
} else {
  const agent = new http.Agent({ keepAlive: true, maxSockets: R + 10 });
  for (let i = 0; i < R; i++) {
    const rq = http.get(`${o.url}${target}`, { agent }, (res) => {
      open++;
      const st = { buf: "" };
      res.setEncoding("utf8");
      res.on("data", (d) => onText(st, d));
    });
    rq.on("error", () => {});
    closers.push(() => rq.destroy());
  }
}
const t0 = Date.now();
while (open < R && Date.now() - t0 < 60000) await new Promise((r) => setTimeout(r, 50));
if (open < R) throw new Error(`only ${open} of ${R} readers opened`);
for (let k = 0; k < A; k++) {
  sentAt[k] = performance.now();
  await fetch(stream, { method: "POST", headers: { "Content-Type": "text/plain" }, body: `a${k}` });
  const end = Date.now() + 10000;
  while ((seen[k]?.length ?? 0) < R && Date.now() < end) await new Promise((r) => setTimeout(r, 1));
}
const all = seen.flat().sort((a, b) => a - b);
const q = (p) => all[Math.min(all.length - 1, Math.floor(all.length * p))].toFixed(1);
console.log(`${o.proto}: ${R} readers on ${o.proto === "h2" ? C : R} connections, ${A} appends, ${all.length}/${R * A} events: p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, max ${all[all.length - 1].toFixed(1)} ms`);
for (const c of closers) c();
process.exit(0);
