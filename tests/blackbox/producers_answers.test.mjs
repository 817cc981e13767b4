// Producer write answers (extensions.txt §5.1–§5.3), on both surfaces:
// receipts on 200 and on 204 repeats, receipt-evicted for older writes,
// Producer-Seq as the epoch's highest seq, closure reports of claims,
// every row of the Producer-Outcome table that needs no rewrite or expiry
// (those are in producers_history and producers_expiry), write identity
// with Producer-Digest (key conflicts for the newest write and for the
// claim of the current epoch), and the Producer-Expected-Seq answers.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { assertError, get } from "./lib/bucket.mjs";
import {
  SURFACES, answer, assert403, assertEvicted, assertReceipt, b3, createStream, pwrite,
} from "./lib/producer.mjs";

const server = new Server();
before(() => server.start());
after(() => server.stop());

let n = 0;
for (const surface of SURFACES) {
  const fresh = async () => {
    const url = surface.url(server, `a${++n}`);
    return { url, inc: await createStream(url) };
  };

  describe(`producer answers (${surface.name} surface)`, () => {
    test("a new write answers 200 with its receipt; a repeat of it 204 with the same receipt", async () => {
      const { url, inc } = await fresh();
      let r = await pwrite(url, { seq: 0, body: "hello" });
      const a = assertReceipt(r, { status: 200, start: 0, end: 5, epoch: 0, seq: 0 }, "seq 0");
      assert.equal(a.incarnation, inc);
      r = await pwrite(url, { seq: 1, body: "world!" });
      assertReceipt(r, { status: 200, start: 5, end: 11, epoch: 0, seq: 1 }, "seq 1");
      r = await pwrite(url, { seq: 1, body: "world!" });
      assertReceipt(r, { status: 204, start: 5, end: 11, epoch: 0, seq: 1 }, "repeat of seq 1");
      assert.equal(r.headers.get("stream-incarnation"), inc);
      assert.equal((await get(`${url}?offset=-1`)).text, "helloworld!");
    });

    test("a repeat of an older write answers 204 receipt-evicted with the epoch's highest seq", async () => {
      const { url } = await fresh();
      for (let s = 0; s < 3; s++) assert.equal((await pwrite(url, { seq: s, body: `m${s}` })).status, 200);
      assertEvicted(await pwrite(url, { seq: 1, body: "m1" }), { epoch: 0, seq: 2 }, "seq 1");
      assertEvicted(await pwrite(url, { seq: 0, body: "m0" }), { epoch: 0, seq: 2 }, "the claim");
      assertReceipt(await pwrite(url, { seq: 2, body: "m2" }), { status: 204, start: 4, end: 6, epoch: 0, seq: 2 });
      assert.equal((await get(`${url}?offset=-1`)).text, "m0m1m2");
    });

    test("the write that closed the stream repeats with Stream-Closed: true; close-only answers 204 with a receipt", async () => {
      const { url } = await fresh();
      assert.equal((await pwrite(url, { seq: 0, body: "ab" })).status, 200);
      let r = await pwrite(url, { seq: 1, body: "cd", close: true });
      assertReceipt(r, { status: 200, start: 2, end: 4, epoch: 0, seq: 1, closed: true }, "append and close");
      r = await pwrite(url, { seq: 1, body: "cd", close: true });
      assertReceipt(r, { status: 204, start: 2, end: 4, epoch: 0, seq: 1, closed: true }, "its repeat");
      // The earlier write's repeat is no closing write.
      assertEvicted(await pwrite(url, { seq: 0, body: "ab" }), { epoch: 0, seq: 1 });

      const other = await fresh();
      await pwrite(other.url, { id: "w", seq: 0, body: "xyz" });
      r = await pwrite(other.url, { id: "w", seq: 1, close: true, type: null });
      assertReceipt(r, { status: 204, start: 3, end: 3, epoch: 0, seq: 1, closed: true }, "close-only");
      r = await pwrite(other.url, { id: "w", seq: 1, close: true, type: null });
      assertReceipt(r, { status: 204, start: 3, end: 3, epoch: 0, seq: 1, closed: true }, "close-only repeat");
    });

    test("a claim reports the epoch it closed, on its answer and its repeats; that epoch answers epoch-closed;by=claim", async () => {
      const { url } = await fresh();
      for (let s = 0; s < 3; s++) await pwrite(url, { epoch: 2, seq: s, body: `e2s${s}` });
      let r = await pwrite(url, { epoch: 5, seq: 0, body: "claim" });
      let a = assertReceipt(r, { status: 200, start: 12, end: 17, epoch: 5, seq: 0 }, "claim");
      assert.equal(a.closedEpoch, "2");
      assert.equal(a.closedSeq, "2");
      r = await pwrite(url, { epoch: 5, seq: 0, body: "claim" });
      a = assertReceipt(r, { status: 204, start: 12, end: 17, epoch: 5, seq: 0 }, "claim repeat");
      assert.equal(a.closedEpoch, "2");
      assert.equal(a.closedSeq, "2");
      // Writes of epoch 2, applied or not, learn what applied.
      assert403(await pwrite(url, { epoch: 2, seq: 1, body: "e2s1" }), "epoch-closed;by=claim", 5, { closed: [2, 2] });
      assert403(await pwrite(url, { epoch: 2, seq: 3, body: "late" }), "epoch-closed;by=claim", 5, { closed: [2, 2] });
      // Writes after the claim keep reporting nothing; the claim's repeat still does.
      r = await pwrite(url, { epoch: 5, seq: 1, body: "next" });
      a = assertReceipt(r, { status: 200, start: 17, end: 21, epoch: 5, seq: 1 });
      assert.equal(a.closedEpoch, null);
      a = assertEvicted(await pwrite(url, { epoch: 5, seq: 0, body: "claim" }), { epoch: 5, seq: 1 });
      assert.equal(a.closedEpoch, "2");
      assert.equal(a.closedSeq, "2");
      // A first claim closes nothing.
      a = answer(await pwrite(url, { id: "other", epoch: 3, seq: 0, body: "o" }));
      assert.equal(a.status, 200);
      assert.equal(a.closedEpoch, null);
    });

    test("epochs older than the one the current claim closed answer stale-epoch", async () => {
      const { url } = await fresh();
      await pwrite(url, { epoch: 0, seq: 0, body: "a" });
      await pwrite(url, { epoch: 1, seq: 0, body: "b" });
      await pwrite(url, { epoch: 4, seq: 0, body: "c" });
      assert403(await pwrite(url, { epoch: 1, seq: 0, body: "b" }), "epoch-closed;by=claim", 4, { closed: [1, 0] });
      assert403(await pwrite(url, { epoch: 0, seq: 0, body: "a" }), "stale-epoch", 4);
      assert403(await pwrite(url, { epoch: 3, seq: 0, body: "x" }), "stale-epoch", 4, { what: "never claimed" });
      assert.equal((await get(`${url}?offset=-1`)).text, "abc");
    });

    test("the newest write's identity: another Producer-Digest, or none against one, is a key conflict", async () => {
      const { url } = await fresh();
      await pwrite(url, { seq: 0, body: "zero", digest: true });
      let r = await pwrite(url, { seq: 1, body: "one", digest: true });
      assert.equal(r.status, 200);
      assertReceipt(await pwrite(url, { seq: 1, body: "one", digest: true }), { status: 204, start: 4, end: 7, epoch: 0, seq: 1 });
      assert403(await pwrite(url, { seq: 1, body: "uno", digest: true }), "key-conflict", 0);
      assert403(await pwrite(url, { seq: 1, body: "one" }), "key-conflict", 0, { what: "no digest" });
      // Without digests on either side, a different body is the same write.
      const other = await fresh();
      await pwrite(other.url, { seq: 0, body: "same" });
      assertReceipt(await pwrite(other.url, { seq: 0, body: "different" }), { status: 204, start: 0, end: 4, epoch: 0, seq: 0 });
      assert403(await pwrite(other.url, { seq: 0, body: "same", digest: true }), "key-conflict", 0, { what: "a digest against none" });
      assert.equal((await get(`${url}?offset=-1`)).text, "zeroone");
    });

    test("the claim's identity is held for its epoch: a conflicting claim repeat is refused after later writes", async () => {
      const { url } = await fresh();
      await pwrite(url, { epoch: 1, seq: 0, body: "mine", digest: true });
      for (let s = 1; s <= 3; s++) await pwrite(url, { epoch: 1, seq: s, body: `s${s}`, digest: true });
      assert403(await pwrite(url, { epoch: 1, seq: 0, body: "theirs", digest: true }), "key-conflict", 1);
      assertEvicted(await pwrite(url, { epoch: 1, seq: 0, body: "mine", digest: true }), { epoch: 1, seq: 3 });
      // A middle write's identity is not held: its repeat is a duplicate, whatever its digest.
      assertEvicted(await pwrite(url, { epoch: 1, seq: 2, body: "other", digest: true }), { epoch: 1, seq: 3 });
    });

    test("seq above 0 on an unclaimed epoch names Producer-Expected-Seq: 0 (409 unknown producer, 400 older epoch held)", async () => {
      const { url } = await fresh();
      let r = await pwrite(url, { id: "new", epoch: 0, seq: 3, body: "x" });
      assertError(r, 409, "PRODUCER_SEQ_CONFLICT");
      assert.equal(answer(r).expectedSeq, "0");
      assert.equal(answer(r).receivedSeq, "3");
      await pwrite(url, { id: "old", epoch: 0, seq: 0, body: "y" });
      r = await pwrite(url, { id: "old", epoch: 1, seq: 2, body: "z" });
      assertError(r, 400, "INVALID_PRODUCER");
      assert.equal(answer(r).expectedSeq, "0");
      // A gap in the current epoch names the next seq.
      r = await pwrite(url, { id: "old", epoch: 0, seq: 5, body: "z" });
      assertError(r, 409, "PRODUCER_SEQ_CONFLICT");
      assert.equal(answer(r).expectedSeq, "1");
      assert.equal(answer(r).receivedSeq, "5");
      assert.equal((await get(`${url}?offset=-1`)).text, "y");
    });

    test("Producer-Digest that matches the body applies; its identity is logged with the write", async () => {
      const { url } = await fresh();
      const body = "digest me";
      const r = await pwrite(url, { seq: 0, body, headers: { "producer-digest": b3(body) } });
      assertReceipt(r, { status: 200, start: 0, end: body.length, epoch: 0, seq: 0 });
      assertReceipt(await pwrite(url, { seq: 0, body, digest: b3(body) }), { status: 204, start: 0, end: body.length, epoch: 0, seq: 0 });
    });

    test("producer answers on JSON streams give stored-text offsets", async () => {
      const url = surface.url(server, `json${++n}`);
      await createStream(url, { type: "application/json" });
      let r = await pwrite(url, { seq: 0, body: '[ {"a": 1}, {"b": 2} ]', type: "application/json" });
      assertReceipt(r, { status: 200, start: 0, end: 16, epoch: 0, seq: 0 }, "two messages");
      r = await pwrite(url, { seq: 1, body: '{"c": 3}', type: "application/json" });
      assertReceipt(r, { status: 200, start: 16, end: 24, epoch: 0, seq: 1 });
    });
  });
}
