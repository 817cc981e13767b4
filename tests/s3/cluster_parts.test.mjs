// Staged snapshot parts in a cluster (issue 27, item 2): a 3-node cluster
// of one group over one S3 cold store, where parts are staged.
//
// WHAT IT PROVES
//   - Parts staged through the leader are objects of the store every node
//     shares: after the leader is SIGKILLed, the new leader commits them
//     (it counts and finds them in the store), and every node serves the
//     assembled snapshot byte-exact.
//   - A discard through the new leader removes the parts the old one
//     staged.
// About 15 s.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Cluster, req, waitFor } from "../cluster/runnel_cluster.mjs";
import { commit, createStream, pseudoRandom, snapshotDigest, stagePart } from "../blackbox/lib/snap.mjs";
import { objectsUnder } from "./objects.mjs";

const { S3_ENDPOINT, S3_BUCKET, S3_TEST_DIR } = process.env;
assert.ok(S3_ENDPOINT && S3_BUCKET && S3_TEST_DIR, "run through tests/s3/run_with_endpoint.sh");
const OCTET = "application/octet-stream";
const KEY = "cparts/snap";

let c;
before(async () => {
  c = await Cluster.start({
    groups: 1,
    args: ["--cold-store=s3", "--s3-endpoint", S3_ENDPOINT, "--s3-bucket", S3_BUCKET, "--s3-prefix", "cp/",
      "--s3-timeout-ms", "20000"],
  });
  await c.converged(); // the leadership placement hands out, moved before the first part
});
after(() => c.stopChecked());

// A request repeated while it answers 503 NO_LEADER (nothing applied: a
// leadership still settling after the kill), for up to 20 s, as a client
// obeying Retry-After would.
async function untilLed(call) {
  for (let tries = 0; ; tries++) {
    const r = await call();
    if (r.status !== 503 || tries === 80 || !r.text.includes('"NO_LEADER"')) return r;
    await new Promise((done) => setTimeout(done, 250));
  }
}

async function newLeader(old) {
  return waitFor("a new leader", async () => {
    const l = await c.leaderOf(0, 30000);
    return l.node !== old ? l.node : null;
  }, 30000);
}

describe("staged parts survive a leader change", () => {
  test("parts staged, the leader SIGKILLed, the commit succeeds through the new leader", async () => {
    const leader = (await c.leaderOf(0)).node;
    const url = `${c.url(leader)}/${KEY}`;
    await createStream(url, { body: "records" });
    const tail = (await req(url, { method: "HEAD" })).headers.get("stream-next-offset");
    const bodies = [pseudoRandom(700000, "p1"), pseudoRandom(300001, "p2")];
    const ids = [];
    for (const b of bodies) ids.push(await stagePart(url, tail, b));
    assert.equal(objectsUnder("cp/parts/").length, 2, "two parts in the shared store");
    await c.crash(leader);
    const next = await newLeader(leader);
    const whole = Buffer.concat(bodies);
    const r = await untilLed(() => commit(`${c.url(next)}/${KEY}`, tail, ids, snapshotDigest(OCTET, whole)));
    assert.equal(r.status, 204, `the commit through node ${next}: ${r.status} ${r.text}`);
    await waitFor("the used parts removed", () => objectsUnder("cp/parts/").length === 0, 10000);
    await c.restart(leader);
    await waitFor(`node ${leader} ready`, async () => (await req(`${c.url(leader)}/__runnel/readyz`)).status === 200, 60000, 250);
    for (let n = 1; n <= 3; n++) {
      const s = await req(`${c.url(n)}/${KEY}/snapshot/${encodeURIComponent(tail)}`, { timeoutMs: 60000 });
      assert.equal(s.status, 200, `node ${n}: ${s.status} ${s.text.slice(0, 200)}`);
      assert.ok(s.body.equals(whole), `node ${n} serves the assembled snapshot byte-exact`);
    }
  });

  test("a discard through the new leader removes the parts the old one staged", async () => {
    const leader = (await c.leaderOf(0)).node;
    const url = `${c.url(leader)}/${KEY}`;
    const tail = (await req(url, { method: "HEAD" })).headers.get("stream-next-offset");
    await stagePart(url, tail, pseudoRandom(1000, "d1"));
    await stagePart(url, tail, pseudoRandom(1000, "d2"));
    assert.equal(objectsUnder("cp/parts/").length, 2, "two parts in the shared store");
    await c.crash(leader);
    const next = await newLeader(leader);
    const d = await untilLed(() => req(`${c.url(next)}/${KEY}/snapshot/parts`, { method: "DELETE" }));
    assert.equal(d.status, 204, `the discard through node ${next}: ${d.status} ${d.text}`);
    assert.equal(objectsUnder("cp/parts/").length, 0, "the discard removed them");
    await c.restart(leader);
    await waitFor(`node ${leader} ready`, async () => (await req(`${c.url(leader)}/__runnel/readyz`)).status === 200, 60000, 250);
  });
});
