// The evaluation order of extensions.txt §5.3, step by step, on both
// surfaces: 1 request shape (400, including producer headers on a create,
// §5.1) → 2 the stream (404, 410, 412) → 3 the producer rules (decided by
// the headers alone) → 4 a closed stream (409 Stream-Closed) → 5 content
// (Content-Type, empty body, JSON text, Producer-Digest last). Each test
// pits two steps against each other and expects the earlier one to answer.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { assertError, get, head, otherToken, post, put, req } from "./lib/bucket.mjs";
import {
  SURFACES, answer, assert403, assertReceipt, b3, createStream, pwrite,
} from "./lib/producer.mjs";

const server = new Server();
before(() => server.start());
after(() => server.stop());

let n = 0;
for (const surface of SURFACES) {
  const fresh = async (opts) => {
    const url = surface.url(server, `o${++n}`);
    return { url, inc: await createStream(url, opts) };
  };

  describe(`§5.3 order (${surface.name} surface)`, () => {
    test("step 1: producer headers on a create answer 400 and create nothing", async () => {
      const url = surface.url(server, `o${++n}`);
      for (const h of [
        { "producer-id": "p", "producer-epoch": "0", "producer-seq": "0" },
        { "producer-id": "p" },
        { "producer-digest": b3("") },
      ]) {
        const r = await put(url, { headers: h });
        assertError(r, 400, "INVALID_PRODUCER", { what: JSON.stringify(h) });
      }
      assert.equal((await head(url)).status, 404);
      // Without them the create works, and a producer then claims an epoch.
      await createStream(url);
      assert.equal((await pwrite(url, { seq: 0, body: "x" })).status, 200);
    });

    test("step 1 before step 2: malformed producer headers answer 400 on a missing stream", async () => {
      const url = surface.url(server, `missing${++n}`);
      const cases = [
        [{ "producer-id": "p", "producer-epoch": "0" }, "INVALID_PRODUCER"],
        [{ "producer-id": "p", "producer-epoch": "x", "producer-seq": "0" }, "INVALID_PRODUCER"],
        [{ "producer-id": "p", "producer-epoch": "0", "producer-seq": "0", "producer-digest": "ABC" }, "INVALID_PRODUCER"],
        [{ "producer-id": "p", "producer-epoch": "0", "producer-seq": "0", "producer-digest": b3("x").toUpperCase() }, "INVALID_PRODUCER"],
        [{ "producer-digest": b3("x") }, "INVALID_PRODUCER"],
        [{ "producer-id": "p", "producer-epoch": "0", "producer-seq": "0", "stream-incarnation": "12" }, "INVALID_HEADER"],
      ];
      for (const [h, code] of cases) {
        const r = await post(url, "x", { headers: h });
        assertError(r, 400, code, { what: JSON.stringify(h) });
      }
    });

    test("step 2 before step 3: a missing stream answers 404, another incarnation 412, even for a repeat", async () => {
      assert.equal((await pwrite(surface.url(server, `none${++n}`), { seq: 0, body: "x" })).status, 404);
      const { url, inc } = await fresh();
      await pwrite(url, { seq: 0, body: "x" });
      const r = await pwrite(url, { seq: 0, body: "x", incarnation: otherToken(inc) });
      assertError(r, 412, "INCARNATION_MISMATCH");
      assert.equal(r.headers.get("stream-incarnation"), inc);
      assert.equal(answer(r).outcome, null);
      assertReceipt(await pwrite(url, { seq: 0, body: "x", incarnation: inc }), { status: 204, start: 0, end: 1, epoch: 0, seq: 0 });
    });

    test("step 2: a soft-deleted stream answers 410 to producer writes", async () => {
      const { url } = await fresh();
      await pwrite(url, { seq: 0, body: "src" });
      const fork = surface.url(server, `fork${++n}`);
      const key = new URL(url).pathname.replace(/^\/(v1\/stream\/)?/, "");
      const f = await put(fork, { headers: { "stream-forked-from": `/v1/stream/${key}` } });
      assert.equal(f.status, 201, f.text);
      assert.equal((await req(url, { method: "DELETE" })).status, 204);
      assertError(await pwrite(url, { seq: 0, body: "src" }), 410, "STREAM_GONE");
    });

    test("step 3 before step 4: on a closed stream the closing tuple repeats, stale and conflicting writes get 403", async () => {
      const { url } = await fresh();
      await pwrite(url, { epoch: 0, seq: 0, body: "first", digest: true });
      await pwrite(url, { epoch: 1, seq: 0, body: "claim", digest: true });
      let r = await pwrite(url, { epoch: 1, seq: 1, body: "final", digest: true, close: true });
      assertReceipt(r, { status: 200, start: 10, end: 15, epoch: 1, seq: 1, closed: true });
      assertReceipt(await pwrite(url, { epoch: 1, seq: 1, body: "final", digest: true, close: true }),
        { status: 204, start: 10, end: 15, epoch: 1, seq: 1, closed: true }, "the closing tuple");
      assert403(await pwrite(url, { epoch: 0, seq: 1, body: "zombie", close: true }), "epoch-closed;by=claim", 1, { closed: [0, 0] });
      assert403(await pwrite(url, { epoch: 1, seq: 1, body: "other", digest: true, close: true }), "key-conflict", 1);
      // Writes that would apply are refused for the closure.
      for (const w of [
        { epoch: 1, seq: 2, body: "more" },
        { epoch: 2, seq: 0, body: "claim" },
        { id: "other", epoch: 0, seq: 0, body: "x" },
        { id: "other", epoch: 0, seq: 0, close: true, type: null },
      ]) {
        r = await pwrite(url, w);
        assertError(r, 409, "STREAM_CLOSED", { what: JSON.stringify(w) });
        assert.equal(r.headers.get("stream-closed"), "true");
        assert.equal(r.headers.get("stream-next-offset"), "0000000000000000_0000000000000015");
      }
      // Step 3 still answers first for an unclaimed seq.
      r = await pwrite(url, { id: "other", epoch: 0, seq: 4, body: "x" });
      assertError(r, 409, "PRODUCER_SEQ_CONFLICT");
    });

    test("step 3 before step 5: a repeat or a key conflict is decided whatever the body holds", async () => {
      const { url } = await fresh({ type: "application/json" });
      const body = '{"k":1}';
      await pwrite(url, { seq: 0, body, digest: true, type: "application/json" });
      const bodies = [
        { body: "not json", type: "application/json", what: "invalid JSON" },
        { body, type: "text/plain", what: "another content type" },
        { body, type: null, what: "no content type" },
        { body: undefined, type: "application/json", what: "empty body" },
        { body: '{"k":2}', type: "application/json", what: "a body that does not match the digest" },
      ];
      for (const b of bodies) {
        const r = await pwrite(url, { seq: 0, body: b.body, type: b.type, digest: b3(body) });
        assertReceipt(r, { status: 204, start: 0, end: 8, epoch: 0, seq: 0 }, `repeat with ${b.what}`);
        assert403(await pwrite(url, { seq: 0, body: b.body, type: b.type, digest: b3("other") }), "key-conflict", 0, { what: b.what });
      }
      const stored = (await get(`${url}?offset=-1`)).text;
      assert.ok(stored === `[${body}]` || stored === `${body}\n`, `one message stored: ${stored}`);
    });

    test("step 4 before step 5: a closed stream answers 409 before content faults", async () => {
      const { url } = await fresh();
      await post(url, undefined, { type: null, headers: { "stream-closed": "true" } });
      for (const w of [
        { seq: 0, body: "x", type: "application/json" },
        { seq: 0, body: "x", type: null },
        { seq: 0, body: undefined },
        { seq: 0, body: "x", digest: b3("y") },
      ]) {
        const r = await pwrite(url, w);
        assertError(r, 409, "STREAM_CLOSED", { what: JSON.stringify(w) });
        assert.equal(r.headers.get("stream-closed"), "true");
      }
    });

    test("step 5 order: content type, emptiness, JSON text, then the digest; none applies anything", async () => {
      const { url } = await fresh();
      assertError(await pwrite(url, { seq: 0, body: "x", type: "application/json", digest: b3("y") }), 409, "CONTENT_TYPE_MISMATCH");
      assertError(await pwrite(url, { seq: 0, body: "x", type: null, digest: b3("y") }), 400, "MISSING_CONTENT_TYPE");
      assertError(await pwrite(url, { seq: 0, body: undefined, digest: b3("y") }), 400, "EMPTY_APPEND");
      assertError(await pwrite(url, { seq: 0, body: "x", digest: b3("y") }), 400, "PRODUCER_DIGEST_MISMATCH");
      const json = await fresh({ type: "application/json" });
      const r = await pwrite(json.url, { seq: 0, body: "{bad", type: "application/json", digest: b3("y") });
      assertError(r, 400, "INVALID_REQUEST", { what: "JSON is checked before the digest" });
      // Nothing applied: the producer is still unknown, the streams empty.
      for (const u of [url, json.url]) {
        const h = await head(u);
        assert.equal(h.headers.get("stream-next-offset"), "0000000000000000_0000000000000000");
        const gap = await pwrite(u, { seq: 1, body: "x" });
        assert.equal(gap.status, 409);
        assert.equal(answer(gap).expectedSeq, "0");
      }
      assertReceipt(await pwrite(url, { seq: 0, body: "x", digest: b3("x") }), { status: 200, start: 0, end: 1, epoch: 0, seq: 0 });
    });

    test("a write without producer headers may answer its content faults before the stream", async () => {
      const url = surface.url(server, `nostream${++n}`);
      assertError(await post(url, undefined), 400, "EMPTY_APPEND");
      assertError(await post(url, Buffer.from("x"), { type: null }), 400, "MISSING_CONTENT_TYPE");
      // With producer headers the stream comes first.
      assert.equal((await pwrite(url, { seq: 0, body: undefined })).status, 404);
      assert.equal((await pwrite(url, { seq: 0, body: "x", type: null })).status, 404);
    });
  });
}
