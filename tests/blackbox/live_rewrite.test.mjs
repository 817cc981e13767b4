// Live reads across a history rewrite (extensions.txt §2.4 History rewrites
// and Stream-Incarnation as a request precondition; §11 error events).
// A rewrite retires the stream's token: every live read open at that moment
// ends, so no response mixes the old history with the new one.
//   - a parked long-poll answers 412 INCARNATION_MISMATCH with the new
//     Stream-Incarnation (with or without the precondition header);
//   - an SSE read on the bucket surface ends with an error event whose data
//     is the §11 body (INCARNATION_MISMATCH); on the v1 surface, which has no
//     error events, the response ends;
// and every live read that carries the retired token is refused 412 with the
// current one: a long-poll answered at once, a parked one, an SSE start and
// an SSE resumed from its last control event.
// Rewrites come from the test hook POST /__runnel/test/rewrite/{key}?keep=
// (runnel serve --test-hooks), which answers 204 with the new token.
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { assertError, assertToken, get, head, openSse, post, put, req, sleep } from "./lib/bucket.mjs";

const server = new Server({ args: ["--test-hooks", "--sse-queue-bytes", "65536"] });
before(() => server.start());
after(() => server.stop());

const tok = (r) => r.headers.get("stream-incarnation");
const OFF = (n) => `0000000000000000_${String(n).padStart(16, "0")}`;

let n = 0;
// A text stream holding "abcdef" on the given surface; returns its URL,
// engine key and token.
async function fresh(surface) {
  const key = `lrwb/s${++n}`;
  const url = surface === "v1" ? `${server.url}/v1/stream/${key}` : `${server.url}/${key}`;
  const r = await put(url, { body: "abcdef" });
  assert.equal(r.status, 201, `create answered ${r.status} ${r.text}`);
  return { url, key, token: assertToken(tok(r)) };
}

async function rewrite(s, keep) {
  const r = await req(`${server.url}/__runnel/test/rewrite/${s.key}?keep=${OFF(keep)}`, { method: "POST" });
  assert.equal(r.status, 204, `the rewrite hook answered ${r.status} ${r.text}`);
  const t = assertToken(tok(r), "Stream-Incarnation of the rewrite");
  assert.notEqual(t, s.token, "a rewrite changes the token");
  return t;
}

// Asserts a 412 that names the current token.
function assert412(r, current, what) {
  assertError(r, 412, "INCARNATION_MISMATCH", { what });
  assert.equal(tok(r), current, `${what}: the 412 carries the current Stream-Incarnation`);
}

describe("a parked long-poll ends at a rewrite", () => {
  for (const surface of ["bucket", "v1"]) {
    for (const withToken of [true, false]) {
      test(`${surface} surface, ${withToken ? "with" : "without"} Stream-Incarnation: 412 with the new token, never new-history bytes`, async () => {
        const s = await fresh(surface);
        const headers = withToken ? { "stream-incarnation": s.token } : {};
        const wait = surface === "v1" ? "" : "&timeout_ms=20000";
        const t0 = performance.now();
        const lp = req(`${s.url}?offset=${OFF(6)}&live=long-poll${wait}`, { headers, timeoutMs: 30000 });
        await sleep(300);
        const t1 = await rewrite(s, 3);
        // New history past the poll's offset: before the fix the parked poll
        // answered these bytes as if they followed "abcdef".
        assert.equal((await post(s.url, "XYZW")).status, 204);
        const r = await lp;
        assert412(r, t1, "the parked long-poll");
        assert.ok(!r.text.includes("W"), `no new-history bytes: ${r.text}`);
        assert.ok(performance.now() - t0 < 10000, "it ended at the rewrite, not at its timeout");
      });
    }
  }
});

describe("a live read that carries a retired token gets 412 with the current one", () => {
  for (const surface of ["bucket", "v1"]) {
    test(`${surface} surface: long-poll answered at once, long-poll that would park, SSE start`, async () => {
      const s = await fresh(surface);
      const t1 = await rewrite(s, 3);
      assert.equal((await post(s.url, "XYZW")).status, 204); // tail 7
      const h = { "stream-incarnation": s.token };
      const wait = surface === "v1" ? "" : "&timeout_ms=5000";
      assert412(await get(`${s.url}?offset=-1&live=long-poll${wait}`, h), t1, "a long-poll with data");
      assert412(await get(`${s.url}?offset=${OFF(7)}&live=long-poll${wait}`, h), t1, "a long-poll at the tail");
      assert412(await get(`${s.url}?offset=now&live=long-poll${wait}`, h), t1, "a long-poll at now");
      const sse = await openSse(`${s.url}?offset=-1&live=sse`, { headers: h });
      try {
        assert.equal(sse.status, 412, "an SSE read with the retired token");
        assert.equal(tok(sse.res), t1);
      } finally {
        sse.close();
      }
      // The current token reads.
      assert.equal((await get(`${s.url}?offset=-1&live=long-poll${wait}`, { "stream-incarnation": t1 })).status, 200);
    });
  }
});

describe("an SSE read open at a rewrite ends", () => {
  for (const surface of ["bucket", "v1"]) {
    const how = surface === "bucket" ? "an error event with the §11 body, then the end" : "the response ends";
    test(`${surface} surface: ${how}; nothing of the new history`, async () => {
      const s = await fresh(surface);
      const sse = await openSse(`${s.url}?offset=-1&live=sse`);
      try {
        assert.equal(sse.status, 200);
        assert.ok(await sse.waitFor((ev) => ev.some((e) => e.type === "control")), "the first control event");
        await rewrite(s, 3);
        await post(s.url, "XYZW");
        assert.ok(await sse.waitEnd(5000), "the response ended at the rewrite");
        const data = sse.events.filter((e) => e.type === "data").map((e) => e.data).join("");
        assert.equal(data, "abcdef", "only the old history's bytes");
        const last = sse.events.at(-1);
        if (surface === "v1") {
          assert.equal(last.type, "control", "v1 sends no error events");
          return;
        }
        assert.equal(last.type, "error", `the last event is an error event: ${JSON.stringify(sse.events)}`);
        assert.equal(last.lines.length, 1, "its data is one line");
        const body = JSON.parse(last.data);
        assert.equal(body.error.code, "INCARNATION_MISMATCH");
        assert.equal(typeof body.error.message, "string");
      } finally {
        sse.close();
      }
    });
  }

  test("resumed from its last control event with the old token: 412 with the current one", async () => {
    const s = await fresh("bucket");
    const h = { "stream-incarnation": s.token };
    const sse = await openSse(`${s.url}?offset=-1&live=sse`, { headers: h });
    let resumeAt;
    try {
      assert.ok(await sse.waitFor((ev) => ev.some((e) => e.type === "control")));
      resumeAt = sse.controls.at(-1).streamNextOffset;
      const t1 = await rewrite(s, 3);
      assert.ok(await sse.waitEnd(5000));
      await post(s.url, "XYZWXYZW");
      const again = await openSse(`${s.url}?offset=${resumeAt}&live=sse`, { headers: h });
      again.close();
      assert.equal(again.status, 412);
      assert.equal(tok(again.res), t1);
    } finally {
      sse.close();
    }
  });

  test("a reader paused on a full socket ends too, and never sends the new history", async () => {
    // The reader's socket takes nothing while 16 MiB are appended, so the
    // server pauses it (--sse-queue-bytes); then the rewrite, 16 MiB of new
    // history, and only then does the client read what it was sent.
    const s = await fresh("bucket");
    const sock = net.connect(server.port, "127.0.0.1");
    await new Promise((resolve, reject) => sock.once("connect", resolve).once("error", reject));
    // The response ends with the last chunk of its chunked body (the
    // connection itself stays open for the next request).
    const chunks = [];
    let ended = false;
    let endedNow;
    const endedP = new Promise((resolve) => (endedNow = resolve));
    sock.on("data", (d) => {
      chunks.push(d);
      if (Buffer.concat(chunks.slice(-2)).toString("latin1").endsWith("\r\n0\r\n\r\n")) {
        ended = true;
        endedNow();
      }
    });
    sock.on("close", endedNow);
    sock.write(`GET /${s.key}?offset=-1&live=sse HTTP/1.1\r\nHost: x\r\n\r\n`);
    await sleep(200);
    sock.pause();
    const mib = Buffer.alloc(1 << 20, "o");
    for (let i = 0; i < 16; i++) assert.equal((await post(s.url, mib)).status, 204);
    await rewrite(s, 3);
    // New history past the offset the paused reader had reached.
    const newHistory = Buffer.alloc(1 << 20, "N");
    for (let i = 0; i < 16; i++) assert.equal((await post(s.url, newHistory)).status, 204);
    sock.resume();
    await Promise.race([endedP, sleep(15000)]);
    sock.destroy();
    const text = Buffer.concat(chunks).toString("latin1");
    assert.ok(!text.includes("NNNN"), "no byte of the new history was sent");
    assert.ok(ended, "the server ended the response");
    assert.match(text, /event: error\r?\ndata:\{"error":\{"code":"INCARNATION_MISMATCH"/, "the error event ends it");
    // Sanity: the stream reads the new history at the current token.
    const hd = await head(s.url);
    assert.equal(hd.headers.get("stream-next-offset"), OFF(3 + 16 * (1 << 20)));
  });
});
