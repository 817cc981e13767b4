// History rewrites and producer epochs (extensions.txt §2.4: "a rewrite
// closes every producer epoch claimed before it"; §5.3 epoch-closed;by=
// history). Rewrites come from the test hook POST /__runnel/test/rewrite/
// {key}?keep=<offset> (runnel serve --test-hooks). The server knows only
// each producer's newest write range, so Producer-Closed-Seq is last_seq when
// that write survived, last_seq - 1 when the cut falls inside it, and the
// epoch answers stale-epoch when the cut is below it.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { head, req } from "./lib/bucket.mjs";
import { answer, assert403, assertEvicted, assertReceipt, createStream, off, pwrite } from "./lib/producer.mjs";

const server = new Server({ args: ["--test-hooks"] });
before(() => server.start());
after(() => server.stop());

let n = 0;
async function fresh() {
  const key = `hist/s${++n}`;
  const url = `${server.url}/v1/stream/${key}`;
  await createStream(url);
  return { key, url };
}

// Three writes of epoch 2: [0,4) [4,8) [8,12).
async function threeWrites(url) {
  for (let s = 0; s < 3; s++) {
    const r = await pwrite(url, { epoch: 2, seq: s, body: `w${s}..`, digest: true });
    assert.equal(r.status, 200);
  }
}

async function rewrite(key, keep) {
  const r = await req(`${server.url}/__runnel/test/rewrite/${key}?keep=${off(keep)}`, { method: "POST" });
  assert.equal(r.status, 204, `rewrite answered ${r.status} ${r.text}`);
  return r.headers.get("stream-incarnation");
}

describe("epochs closed by a history rewrite", () => {
  test("the newest write survived: later seqs answer by=history with it as Closed-Seq; it repeats with its receipt", async () => {
    const { key, url } = await fresh();
    await threeWrites(url);
    const inc = await rewrite(key, 12);
    assert.equal((await head(url)).headers.get("stream-incarnation"), inc);
    assert403(await pwrite(url, { epoch: 2, seq: 3, body: "w3.." }), "epoch-closed;by=history", 2, { closed: [2, 2] });
    assert403(await pwrite(url, { epoch: 2, seq: 3, body: "w3..", incarnation: inc }), "epoch-closed;by=history", 2, { closed: [2, 2] });
    assertReceipt(await pwrite(url, { epoch: 2, seq: 2, body: "w2..", digest: true }), { status: 204, start: 8, end: 12, epoch: 2, seq: 2 });
    assertEvicted(await pwrite(url, { epoch: 2, seq: 1, body: "w1..", digest: true }), { epoch: 2, seq: 2 });
    assert403(await pwrite(url, { epoch: 2, seq: 2, body: "xx", digest: true }), "key-conflict", 2);
  });

  test("a cut inside the newest write: Closed-Seq is the one before it, and the cut write is refused", async () => {
    const { key, url } = await fresh();
    await threeWrites(url);
    await rewrite(key, 10);
    assert403(await pwrite(url, { epoch: 2, seq: 2, body: "w2..", digest: true }), "epoch-closed;by=history", 2, { closed: [2, 1] });
    assertEvicted(await pwrite(url, { epoch: 2, seq: 1, body: "w1..", digest: true }), { epoch: 2, seq: 1 });
    // A cut exactly at the newest write's start says the same.
    const other = await fresh();
    await threeWrites(other.url);
    await rewrite(other.key, 8);
    assert403(await pwrite(other.url, { epoch: 2, seq: 2, body: "w2.." }), "epoch-closed;by=history", 2, { closed: [2, 1] });
  });

  test("a cut below the newest write: the server cannot say, so the epoch answers stale-epoch", async () => {
    const { key, url } = await fresh();
    await threeWrites(url);
    await rewrite(key, 3);
    for (let s = 0; s <= 3; s++) assert403(await pwrite(url, { epoch: 2, seq: s, body: "w" }), "stale-epoch", 2, { what: `seq ${s}` });
    // A claim of a later epoch reports no closure, and epoch 2 stays stale.
    const r = await pwrite(url, { epoch: 3, seq: 0, body: "new" });
    assert.equal(r.status, 200);
    assert.equal(answer(r).closedEpoch, null);
    assert403(await pwrite(url, { epoch: 2, seq: 0, body: "w" }), "stale-epoch", 3);
  });

  test("a claim after the rewrite closes the epoch at its surviving seq; epochs closed before the rewrite turn stale", async () => {
    const { key, url } = await fresh();
    await pwrite(url, { epoch: 1, seq: 0, body: "e1.." });
    await threeWrites(url); // claim of epoch 2 closes epoch 1 at seq 0
    assert403(await pwrite(url, { epoch: 1, seq: 0, body: "e1.." }), "epoch-closed;by=claim", 2, { closed: [1, 0] });
    await rewrite(key, 16);
    // What the claim reported about epoch 1 may not hold any more.
    assert403(await pwrite(url, { epoch: 1, seq: 0, body: "e1.." }), "stale-epoch", 2);
    const r = await pwrite(url, { epoch: 4, seq: 0, body: "e4.." });
    const a = assertReceipt(r, { status: 200, start: 16, end: 20, epoch: 4, seq: 0 });
    assert.equal(a.closedEpoch, "2");
    assert.equal(a.closedSeq, "2");
    assert403(await pwrite(url, { epoch: 2, seq: 3, body: "w3.." }), "epoch-closed;by=claim", 4, { closed: [2, 2] });
  });

  test("two rewrites: the surviving seq only goes down", async () => {
    const { key, url } = await fresh();
    await threeWrites(url);
    await rewrite(key, 10); // closes epoch 2 at seq 1
    await pwrite(url, { id: "filler", seq: 0, body: "0123456789" }); // tail 20
    await rewrite(key, 20); // keeps everything, yet seq 2 did not survive the first cut
    assert403(await pwrite(url, { epoch: 2, seq: 2, body: "w2.." }), "epoch-closed;by=history", 2, { closed: [2, 1] });
  });

  test("the history closure survives restarts (checkpoint and log replay)", async () => {
    const { key, url } = await fresh();
    await threeWrites(url);
    await rewrite(key, 10);
    for (const signal of ["SIGKILL", "SIGTERM"]) {
      await server.restart(signal);
      assert403(await pwrite(url, { epoch: 2, seq: 2, body: "w2.." }), "epoch-closed;by=history", 2, { closed: [2, 1], what: signal });
    }
  });
});
