// Accept-Ranges on every snapshot answer (issue 13, item 4).
// Covers extensions.txt §2.5 (a server that honors byte ranges MUST send
// Accept-Ranges: bytes on every snapshot answer, the 416 included) for both
// URL forms of a snapshot read: {stream}/snapshot/{offset} and the
// immutable {stream}/incarnation/{token}/snapshot/{offset} of §4.1; every
// status either form answers, for GET and HEAD.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { get, head, otherToken, req } from "./lib/bucket.mjs";
import { append, createStream, enc, h, offsetAfter, publishOk, stopAndRemove } from "./lib/snap.mjs";

const OCTET = "application/octet-stream";
const server = new Server();
before(() => server.start());
after(() => stopAndRemove(server));

let n = 0;

// A stream of 20 bytes, a snapshot of 20 bytes at `snap` (after 15 bytes),
// retention at `retained` (after 5 bytes).
async function setup() {
  const url = `${server.url}/ranges/s${++n}`;
  const c = await createStream(url, { type: OCTET });
  await append(url, Buffer.from("0123456789abcdefghij"), OCTET);
  const retained = await offsetAfter(url, 5);
  const other = await offsetAfter(url, 10);
  const snap = await offsetAfter(url, 15);
  const digest = await publishOk(url, snap, "snapshot-body-20-byte");
  const r = await req(`${url}/retention/${enc(retained)}`, { method: "PUT" });
  assert.equal(r.status, 204);
  return { url, token: c.token, first: c.tail, retained, other, snap, digest };
}

const FORMS = {
  "{stream}/snapshot/{offset}": {
    url: (s, offset, token = s.token) => ({ url: `${s.url}/snapshot/${offset}`, headers: token === s.token ? {} : { "stream-incarnation": token } }),
  },
  "{stream}/incarnation/{token}/snapshot/{offset}": {
    url: (s, offset, token = s.token) => ({ url: `${s.url}/incarnation/${token}/snapshot/${offset}`, headers: {} }),
  },
};

// Each case: what, expected status, and the request.
const CASES = [
  ["200", 200, (f, s) => f.url(s, enc(s.snap))],
  ["206 for a range", 206, (f, s) => ({ ...f.url(s, enc(s.snap)), range: "bytes=0-3" })],
  ["304 for If-None-Match", 304, (f, s) => ({ ...f.url(s, enc(s.snap)), inm: `"${s.digest}"` })],
  ["416 for a range past the end", 416, (f, s) => ({ ...f.url(s, enc(s.snap)), range: "bytes=100-" })],
  ["404 at an offset that holds no snapshot", 404, (f, s) => f.url(s, enc(s.other))],
  ["410 below the retained offset", 410, (f, s) => f.url(s, enc(s.first))],
  ["412 for another token", 412, (f, s) => f.url(s, enc(s.snap), otherToken(s.token))],
  ["400 for a malformed offset", 400, (f, s) => f.url(s, "not-an-offset")],
  ["404 for a missing stream", 404, (f, s) => f.url({ ...s, url: `${server.url}/ranges/missing${++n}` }, enc(s.snap))],
];

describe("§2.5 Accept-Ranges: bytes on every snapshot answer", () => {
  for (const [form, f] of Object.entries(FORMS)) {
    for (const [what, status, make] of CASES) {
      for (const method of ["GET", "HEAD"]) {
        test(`${form}: ${method} ${what}`, async () => {
          const s = await setup();
          const { url, headers, range, inm } = make(f, s);
          const hs = { ...headers };
          if (range) hs.range = range;
          if (inm) hs["if-none-match"] = inm;
          const r = method === "GET" ? await get(url, hs) : await head(url, hs);
          assert.equal(r.status, status, `${method} ${url} answered ${r.status} ${r.text}`);
          assert.equal(h(r, "accept-ranges"), "bytes", `${method} ${what}: Accept-Ranges`);
        });
      }
    }
  }
});
