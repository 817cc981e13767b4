// Producer expiry and the epoch floor (extensions.txt §5.4), with a short
// --producer-ttl-ms: idle state is discarded (on access and by the sweep),
// the stream's floor rises to the highest discarded epoch, writes that carry
// Stream-Incarnation are refused with producer-expired at or below it, state
// opened below the floor is marked and lifted by a claim above it, and a
// stream holding --producer-cap producers displaces its least recently
// written one only once that one is idle (else 429 PRODUCER_LIMIT). The floor
// and the marks survive restarts.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { assertError, sleep } from "./lib/bucket.mjs";
import { answer, assert403, assertReceipt, createStream, pwrite } from "./lib/producer.mjs";

const TTL = 1000;
const IDLE = TTL + 600; // long enough for the state to expire
const server = new Server({ args: ["--producer-ttl-ms", String(TTL), "--expiry-sweep-ms", "100"] });
before(() => server.start());
after(() => server.stop());

let n = 0;
async function fresh(srv = server) {
  const url = `${srv.url}/v1/stream/exp/s${++n}`;
  return { url, inc: await createStream(url) };
}

describe("producer expiry and the epoch floor", () => {
  test("idle state is discarded: a write without Stream-Incarnation is then a new producer's", async () => {
    const { url } = await fresh();
    await pwrite(url, { epoch: 3, seq: 0, body: "a" });
    await pwrite(url, { epoch: 3, seq: 1, body: "b" });
    await sleep(IDLE);
    const r = await pwrite(url, { epoch: 3, seq: 2, body: "c" });
    assertError(r, 409, "PRODUCER_SEQ_CONFLICT");
    assert.equal(answer(r).expectedSeq, "0");
    const claim = await pwrite(url, { epoch: 0, seq: 0, body: "c" });
    assert.equal(claim.status, 200, "any epoch, without Stream-Incarnation");
    assert.equal(answer(claim).closedEpoch, null);
  });

  test("a new producer with Stream-Incarnation claims above the floor; at or below it is producer-expired", async () => {
    const { url, inc } = await fresh();
    await pwrite(url, { id: "old", epoch: 3, seq: 0, body: "a" });
    await sleep(IDLE);
    assert403(await pwrite(url, { id: "new", epoch: 3, seq: 0, body: "x", incarnation: inc }), "producer-expired", 3);
    assert403(await pwrite(url, { id: "new", epoch: 0, seq: 0, body: "x", incarnation: inc }), "producer-expired", 3);
    assert403(await pwrite(url, { id: "old", epoch: 3, seq: 1, body: "x", incarnation: inc }), "producer-expired", 3, { what: "the expired producer" });
    assert403(await pwrite(url, { id: "new", epoch: 2, seq: 5, body: "x", incarnation: inc }), "producer-expired", 3, { what: "before Producer-Expected-Seq" });
    const r = await pwrite(url, { id: "new", epoch: 4, seq: 0, body: "x", incarnation: inc });
    assertReceipt(r, { status: 200, start: 1, end: 2, epoch: 4, seq: 0 });
  });

  test("state opened at or below the floor without Stream-Incarnation: refused with it until a claim above the floor", async () => {
    const { url, inc } = await fresh();
    await pwrite(url, { id: "p", epoch: 5, seq: 0, body: "a" });
    await sleep(IDLE); // floor 5
    assert.equal((await pwrite(url, { id: "p", epoch: 1, seq: 0, body: "b" })).status, 200, "opened below the floor");
    assert.equal((await pwrite(url, { id: "p", epoch: 1, seq: 1, body: "c" })).status, 200);
    assert403(await pwrite(url, { id: "p", epoch: 1, seq: 1, body: "c", incarnation: inc }), "producer-expired", 5, { what: "even a repeat" });
    assert403(await pwrite(url, { id: "p", epoch: 1, seq: 2, body: "d", incarnation: inc }), "producer-expired", 5);
    assert403(await pwrite(url, { id: "p", epoch: 5, seq: 0, body: "d", incarnation: inc }), "producer-expired", 5, { what: "a claim at the floor" });
    // A claim above the floor lifts the state and reports no closure.
    const r = await pwrite(url, { id: "p", epoch: 6, seq: 0, body: "d", incarnation: inc });
    assert.equal(r.status, 200);
    assert.equal(answer(r).closedEpoch, null);
    assert403(await pwrite(url, { id: "p", epoch: 1, seq: 2, body: "x" }), "stale-epoch", 6, { what: "the replaced epoch" });
    assert.equal((await pwrite(url, { id: "p", epoch: 6, seq: 1, body: "e", incarnation: inc })).status, 200);
  });

  test("a claim without Stream-Incarnation above the floor lifts the state too", async () => {
    const { url, inc } = await fresh();
    await pwrite(url, { id: "p", epoch: 2, seq: 0, body: "a" });
    await sleep(IDLE); // floor 2
    await pwrite(url, { id: "p", epoch: 0, seq: 0, body: "b" });
    const r = await pwrite(url, { id: "p", epoch: 3, seq: 0, body: "c" });
    assert.equal(r.status, 200);
    assert.equal(answer(r).closedEpoch, null, "no closure for an epoch opened below the floor");
    assert403(await pwrite(url, { id: "p", epoch: 0, seq: 1, body: "x" }), "stale-epoch", 3);
    assert.equal((await pwrite(url, { id: "p", epoch: 3, seq: 1, body: "d", incarnation: inc })).status, 200);
  });

  test("state opened above the floor keeps claiming later epochs after the floor rises", async () => {
    const { url, inc } = await fresh();
    await pwrite(url, { id: "keeper", epoch: 1, seq: 0, body: "k", incarnation: inc });
    await pwrite(url, { id: "gone", epoch: 9, seq: 0, body: "g" });
    // "keeper" keeps writing while "gone" expires (floor 9).
    let seq = 0;
    for (let t = 0; t < IDLE; t += TTL / 4) {
      await sleep(TTL / 4);
      assert.equal((await pwrite(url, { id: "keeper", epoch: 1, seq: ++seq, body: "k", incarnation: inc })).status, 200);
    }
    assert403(await pwrite(url, { id: "newcomer", epoch: 9, seq: 0, body: "n", incarnation: inc }), "producer-expired", 9);
    const r = await pwrite(url, { id: "keeper", epoch: 2, seq: 0, body: "k2", incarnation: inc });
    assert.equal(r.status, 200, `a claim below the floor on state above it: ${r.text}`);
    assert.equal(answer(r).closedEpoch, "1");
    assert.equal(answer(r).closedSeq, String(seq));
  });

  test("the sweep discards idle state without access: the floor rises for writers it never saw", async () => {
    const a = await fresh();
    const b = await fresh();
    await pwrite(a.url, { id: "idle", epoch: 7, seq: 0, body: "a" });
    await sleep(IDLE);
    assert403(await pwrite(a.url, { id: "other", epoch: 7, seq: 0, body: "x", incarnation: a.inc }), "producer-expired", 7);
    // The floor is per stream.
    assert.equal((await pwrite(b.url, { id: "other", epoch: 0, seq: 0, body: "x", incarnation: b.inc })).status, 200);
  });

  test("the floor and the below-floor marks survive restarts", async () => {
    const { url, inc } = await fresh();
    await pwrite(url, { id: "p", epoch: 4, seq: 0, body: "a" });
    await sleep(IDLE); // floor 4
    await pwrite(url, { id: "q", epoch: 1, seq: 0, body: "b" }); // below the floor
    // Restarts may take longer than the TTL: keep q's state through them.
    const args = server.args;
    server.args = ["--producer-ttl-ms", "3600000"];
    try {
      for (const signal of ["SIGKILL", "SIGTERM"]) {
        await server.restart(signal);
        assert403(await pwrite(url, { id: "r", epoch: 4, seq: 0, body: "x", incarnation: inc }), "producer-expired", 4, { what: `new producer after ${signal}` });
        assert403(await pwrite(url, { id: "q", epoch: 1, seq: 0, body: "b", incarnation: inc }), "producer-expired", 4, { what: `below-floor state after ${signal}` });
        assertReceipt(await pwrite(url, { id: "q", epoch: 1, seq: 0, body: "b" }), { status: 204, start: 1, end: 2, epoch: 1, seq: 0 });
      }
    } finally {
      server.args = args;
      await server.restart();
    }
  });
});

describe("the producer cap", () => {
  const CAP_TTL = 1500;
  const capped = new Server({ args: ["--producer-cap", "2", "--producer-ttl-ms", String(CAP_TTL), "--expiry-sweep-ms", "3600000"] });
  before(() => capped.start());
  after(() => capped.stop());

  test("one producer too many waits (429) until the least recently written one is idle, then displaces it", async () => {
    const { url, inc } = await fresh(capped);
    await pwrite(url, { id: "A", epoch: 4, seq: 0, body: "a" });
    await sleep(CAP_TTL / 2 + 100);
    await pwrite(url, { id: "B", epoch: 0, seq: 0, body: "b" });
    let r = await pwrite(url, { id: "C", epoch: 0, seq: 0, body: "c" });
    assertError(r, 429, "PRODUCER_LIMIT");
    const retry = Number(r.headers.get("retry-after"));
    assert.ok(retry >= 1 && retry <= 2, `Retry-After ${retry}`);
    assert.equal(answer(r).outcome, null);
    // Refusals of known producers are unaffected by the cap.
    assertReceipt(await pwrite(url, { id: "B", epoch: 0, seq: 0, body: "b" }), { status: 204, start: 1, end: 2, epoch: 0, seq: 0 });
    await sleep(CAP_TTL / 2 + 100);
    r = await pwrite(url, { id: "C", epoch: 0, seq: 0, body: "c" });
    assertReceipt(r, { status: 200, start: 2, end: 3, epoch: 0, seq: 0 }, "admitted once A is idle");
    assert403(await pwrite(url, { id: "A", epoch: 4, seq: 1, body: "x", incarnation: inc }), "producer-expired", 4, { what: "A was displaced" });
    assert.equal((await pwrite(url, { id: "B", epoch: 0, seq: 1, body: "b" })).status, 200, "B kept its state");
  });
});
