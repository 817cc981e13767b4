// Answers before the body (extensions.txt §5.5), observed on raw sockets: a
// producer write with Stream-Incarnation that is a repeat (204 and its
// receipt) or a key conflict (403) is answered from its headers after
// Expect: 100-continue (no 100 Continue is sent, the body is never needed,
// the connection then closes) or for a declared body of at least 64 KiB
// without Expect (the body is then read and dropped, and the connection
// stays usable; a client that never sends it is cut off after 5 s). Every
// other write gets 100 Continue and is answered after its body.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { get, otherToken, sleep } from "./lib/bucket.mjs";
import { b3, createStream, off, pwrite } from "./lib/producer.mjs";
import { Conn } from "./lib/wire.mjs";

const server = new Server();
before(() => server.start());
after(() => server.stop());

function head(path, headers) {
  const lines = [`POST ${path} HTTP/1.1`, "Host: 127.0.0.1"];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  return lines.join("\r\n") + "\r\n\r\n";
}

let n = 0;
async function fresh(base = "/v1/stream/early/") {
  const path = `${base}s${++n}`;
  const url = `${server.url}${path}`;
  const inc = await createStream(url);
  return { path, url, inc };
}

const BIG = 64 * 1024;
const bigBody = (c) => Buffer.alloc(BIG, c);

function producer({ seq = 0, epoch = 0, body, inc, expect = false, length }) {
  const h = {
    "Content-Type": "text/plain",
    "Producer-Id": "p",
    "Producer-Epoch": String(epoch),
    "Producer-Seq": String(seq),
    "Producer-Digest": b3(body),
    "Content-Length": String(length ?? Buffer.byteLength(body)),
  };
  if (inc) h["Stream-Incarnation"] = inc;
  if (expect) h.Expect = "100-continue";
  return h;
}

describe("answers before the body", () => {
  for (const base of ["/v1/stream/early/", "/earlyb/"]) {
    test(`Expect: 100-continue: a repeat gets 204 with its receipt, no 100 Continue, no body read (${base})`, async () => {
      const { path, url, inc } = await fresh(base);
      assert.equal((await pwrite(url, { seq: 0, body: "hello", digest: true })).status, 200);
      const c = new Conn(server.port);
      const t0 = Date.now();
      c.send(head(path, producer({ body: "hello", inc, expect: true })));
      assert.ok(await c.until(() => c.responses().length === 1), `an answer: ${c.text}`);
      assert.ok(Date.now() - t0 < 2000, "answered without waiting for the body");
      const [r] = c.responses();
      assert.equal(r.status, 204, c.text);
      assert.ok(!c.text.includes("100 Continue"), c.text);
      assert.equal(r.header("stream-offset"), off(0));
      assert.equal(r.header("stream-next-offset"), off(5));
      assert.equal(r.header("producer-seq"), "0");
      assert.equal(r.header("connection"), "close");
      assert.ok(await c.until(() => c.closed, 2000), "the server closes the connection");
      c.close();
      assert.equal((await get(`${url}?offset=-1`)).text, "hello");
    });
  }

  test("Expect: 100-continue: a key conflict gets 403 key-conflict at once", async () => {
    const { path, url, inc } = await fresh();
    await pwrite(url, { seq: 0, body: "mine", digest: true });
    const c = new Conn(server.port);
    c.send(head(path, producer({ body: "theirs", inc, expect: true })));
    assert.ok(await c.until(() => c.responses().length === 1), c.text);
    const [r] = c.responses();
    assert.equal(r.status, 403);
    assert.equal(r.header("producer-outcome"), "key-conflict");
    assert.equal(r.header("producer-epoch"), "0");
    assert.equal(JSON.parse(r.body).error.code, "PRODUCER_KEY_CONFLICT");
    assert.ok(!c.text.includes("100 Continue"));
    c.close();
  });

  test("Expect: 100-continue: a write that would apply gets 100 Continue, then its answer after the body", async () => {
    const { path, url, inc } = await fresh();
    const cases = [
      { what: "a new write", h: producer({ body: "new", inc, expect: true }), body: "new", status: 200 },
      { what: "another incarnation", h: producer({ body: "new", inc: otherToken(inc), expect: true }), body: "new", status: 412 },
      { what: "no Stream-Incarnation", h: producer({ body: "new", expect: true }), body: "new", status: 204 },
    ];
    for (const k of cases) {
      const c = new Conn(server.port);
      c.send(head(path, k.h));
      assert.ok(await c.until(() => c.text.startsWith("HTTP/1.1 100 Continue\r\n\r\n")), `${k.what}: ${c.text}`);
      assert.equal(c.responses().length, 1, "only the interim answer before the body");
      c.send(k.body);
      assert.ok(await c.until(() => c.responses().length === 2), `${k.what}: ${c.text}`);
      assert.equal(c.responses()[1].status, k.status, `${k.what}: ${c.text}`);
      c.close();
    }
    assert.equal((await get(`${url}?offset=-1`)).text, "new");
  });

  test("no Expect, Content-Length of 64 KiB: the repeat is answered before the body, which is then dropped", async () => {
    const { path, url, inc } = await fresh();
    const body = bigBody("a");
    assert.equal((await pwrite(url, { seq: 0, body, digest: true })).status, 200);
    const c = new Conn(server.port);
    c.send(head(path, producer({ body, inc })));
    assert.ok(await c.until(() => c.responses().length === 1), c.text);
    assert.equal(c.responses()[0].status, 204);
    assert.equal(c.responses()[0].header("stream-next-offset"), off(BIG));
    assert.equal(c.responses()[0].header("connection"), null, "the connection stays open");
    // The body follows in pieces and is dropped; then the connection serves the next request.
    c.send(body.subarray(0, 1000));
    await sleep(100);
    c.send(body.subarray(1000));
    c.send(`HEAD ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    assert.ok(await c.until(() => c.responses().length === 2), c.text);
    assert.equal(c.responses()[1].status, 200);
    assert.equal(c.responses()[1].header("stream-next-offset"), off(BIG));
    c.close();
  });

  test("below 64 KiB without Expect the server waits for the body", async () => {
    const { path, url, inc } = await fresh();
    const body = Buffer.alloc(BIG - 1, "b");
    assert.equal((await pwrite(url, { seq: 0, body, digest: true })).status, 200);
    const c = new Conn(server.port);
    c.send(head(path, producer({ body, inc })));
    assert.equal(await c.until(() => c.data.length > 0, 500), false, `no answer before the body: ${c.text}`);
    c.send(body);
    assert.ok(await c.until(() => c.responses().length === 1), c.text);
    assert.equal(c.responses()[0].status, 204);
    c.close();
  });

  test("a body that never comes after an early answer: the connection closes after 5 s of silence", async () => {
    const { path, url, inc } = await fresh();
    const body = bigBody("c");
    await pwrite(url, { seq: 0, body, digest: true });
    const c = new Conn(server.port);
    const t0 = Date.now();
    c.send(head(path, producer({ body, inc })));
    assert.ok(await c.until(() => c.responses().length === 1), c.text);
    assert.equal(c.responses()[0].status, 204);
    assert.ok(await c.until(() => c.closed, 9000), "closed");
    const waited = c.closedAt - t0;
    assert.ok(waited >= 4500 && waited < 9000, `closed after ${waited} ms`);
  });
});
