// Producers under concurrency and restarts (extensions.txt §5.2, §5.3,
// §5.6): pipelined writes of one producer on one keep-alive socket,
// concurrent claimants of one epoch with different bodies (one wins, the
// other gets key-conflict), and retries after SIGTERM and SIGKILL restarts
// (receipts, identities and claim closures come back from the checkpoint
// and from log replay).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { get } from "./lib/bucket.mjs";
import {
  answer, assert403, assertEvicted, assertReceipt, createStream, off, pipeline, producerHeaders, pwrite, rawPost,
} from "./lib/producer.mjs";

const server = new Server();
before(() => server.start());
after(() => server.stop());

let n = 0;
async function fresh() {
  const path = `/v1/stream/conc/s${++n}`;
  const url = `${server.url}${path}`;
  return { path, url, inc: await createStream(url) };
}

describe("pipelined producers", () => {
  test("writes sent back to back on one socket apply in order, each with its receipt", async () => {
    const { path, url } = await fresh();
    const bodies = Array.from({ length: 20 }, (_, i) => `m${String(i).padStart(2, "0")};`);
    const answers = await pipeline(server.port, bodies.map((b, seq) => rawPost(path, producerHeaders({ seq, body: b, digest: true }), b)));
    answers.forEach((r, seq) => assertReceipt(r, { status: 200, start: seq * 4, end: seq * 4 + 4, epoch: 0, seq }, `seq ${seq}`));
    assert.equal((await get(`${url}?offset=-1`)).text, bodies.join(""));
  });

  test("a pipelined batch with a gap, a repeat and a conflict gets each its own answer", async () => {
    const { path, url } = await fresh();
    const w = (seq, body, extra = {}) => rawPost(path, producerHeaders({ seq, body, digest: true, ...extra }), body);
    const answers = await pipeline(server.port, [
      w(0, "aa"),
      w(2, "cc"), // gap: expected 1
      w(1, "bb"),
      w(1, "bb"), // repeat of the newest
      w(1, "XX"), // another identity
      w(0, "aa"), // repeat of the claim, receipt evicted
      w(2, "cc"),
    ]);
    assertReceipt(answers[0], { status: 200, start: 0, end: 2, epoch: 0, seq: 0 });
    assert.equal(answers[1].status, 409);
    assert.equal(answer(answers[1]).expectedSeq, "1");
    assertReceipt(answers[2], { status: 200, start: 2, end: 4, epoch: 0, seq: 1 });
    assertReceipt(answers[3], { status: 204, start: 2, end: 4, epoch: 0, seq: 1 });
    assert.equal(answers[4].status, 403);
    assert.equal(answer(answers[4]).outcome, "key-conflict");
    assertEvicted(answers[5], { epoch: 0, seq: 1 });
    assertReceipt(answers[6], { status: 200, start: 4, end: 6, epoch: 0, seq: 2 });
    assert.equal((await get(`${url}?offset=-1`)).text, "aabbcc");
  });
});

describe("concurrent claimants", () => {
  test("two claims of one epoch with different bodies: one applies, the other gets key-conflict", async () => {
    for (let round = 0; round < 5; round++) {
      const { url } = await fresh();
      await pwrite(url, { epoch: 0, seq: 0, body: "old" });
      const bodies = [`claimant-A-${round}`, `claimant-B-${round}`];
      const answers = await Promise.all(bodies.map((body) => pwrite(url, { epoch: 1, seq: 0, body, digest: true })));
      const won = answers.findIndex((r) => r.status === 200);
      assert.ok(won >= 0, `one claim applies: ${answers.map((r) => r.status)}`);
      assert403(answers[1 - won], "key-conflict", 1, { what: "the other claimant" });
      assert.equal((await get(`${url}?offset=-1`)).text, "old" + bodies[won]);
      // The loser's retry keeps getting key-conflict; the winner's repeats.
      assert403(await pwrite(url, { epoch: 1, seq: 0, body: bodies[1 - won], digest: true }), "key-conflict", 1);
      assert.equal((await pwrite(url, { epoch: 1, seq: 0, body: bodies[won], digest: true })).status, 204);
    }
  });

  test("claims of one epoch without digests cannot be told apart: the second is a repeat", async () => {
    const { url } = await fresh();
    const answers = await Promise.all(["one", "two"].map((body) => pwrite(url, { epoch: 0, seq: 0, body })));
    assert.deepEqual(answers.map((r) => r.status).sort(), [200, 204]);
  });
});

for (const signal of ["SIGTERM", "SIGKILL"]) {
  describe(`retries after a ${signal} restart`, () => {
    test("receipts, identities and claim closures survive", async () => {
      const { url, inc } = await fresh();
      await pwrite(url, { epoch: 0, seq: 0, body: "e0s0", digest: true });
      await pwrite(url, { epoch: 0, seq: 1, body: "e0s1", digest: true });
      await pwrite(url, { epoch: 1, seq: 0, body: "e1s0", digest: true });
      await pwrite(url, { epoch: 1, seq: 1, body: "e1s1", digest: true, close: true });
      const other = await fresh();
      await pwrite(other.url, { id: "lost", seq: 0, body: "first" });
      // A response "lost" just before the crash: the client retries after it.
      await server.restart(signal);
      assertReceipt(await pwrite(url, { epoch: 1, seq: 1, body: "e1s1", digest: true, close: true, incarnation: inc }),
        { status: 204, start: 12, end: 16, epoch: 1, seq: 1, closed: true }, "the newest write");
      assert403(await pwrite(url, { epoch: 1, seq: 1, body: "else", digest: true, close: true }), "key-conflict", 1);
      assert403(await pwrite(url, { epoch: 1, seq: 0, body: "else", digest: true }), "key-conflict", 1, { what: "the claim" });
      const a = assertEvicted(await pwrite(url, { epoch: 1, seq: 0, body: "e1s0", digest: true }), { epoch: 1, seq: 1 });
      assert.equal(a.closedEpoch, "0");
      assert.equal(a.closedSeq, "1");
      assert403(await pwrite(url, { epoch: 0, seq: 2, body: "late" }), "epoch-closed;by=claim", 1, { closed: [0, 1] });
      assertReceipt(await pwrite(other.url, { id: "lost", seq: 0, body: "first" }), { status: 204, start: 0, end: 5, epoch: 0, seq: 0 });
      assert.equal((await get(`${url}?offset=-1`)).text, "e0s0e0s1e1s0e1s1");
      assert.equal(answer(await pwrite(other.url, { id: "lost", seq: 1, body: "second" })).next, off(11));
    });
  });
}
