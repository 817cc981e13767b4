// Cluster mode, black-box: followers an off-the-shelf client can use
// (issue 28). The cluster runs with a 5 s election timeout, so its
// heartbeat (a tenth of it) is 500 ms: a follower that learnt commits only
// from heartbeats would lag by up to 500 ms, 250 ms on average.
//   - A commit reaches the followers at once (the leader's commit nudge):
//     after an acknowledged append through the leader, a follower's local
//     HEAD shows it long before any heartbeat could have told it. The
//     distribution is printed; BENCHMARKS.md has the figures of a quiet
//     machine.
//   - Read-your-writes by default: appends through a node, each followed by
//     a read on the same node without a consistency parameter, never read
//     stale and never 404, whichever node leads (writes through followers
//     are forwarded, the default).
//   - A follower whose leader refuses its ReadIndex ask (failure point
//     `read-index`: 503 NO_LEADER, as a leader whose leadership is not yet
//     confirmed answers) asks again and serves the read itself; only asks
//     failing for about a second make it redirect to the leader.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Cluster, groupOf, req } from "./runnel_cluster.mjs";

const GROUPS = 2;
let c;
before(async () => {
  c = await Cluster.start({ groups: GROUPS, args: ["--election-timeout-ms", "5000", "--test-hooks"] });
});
after(() => c?.stopChecked());

const offsetOf = (tok) => BigInt(tok.split("_")[1]);

test("a follower applies an acknowledged append without waiting for a heartbeat", async () => {
  const key = "followers/lag";
  const { node: leader } = await c.leaderOf(groupOf(key, GROUPS), 60000);
  const follower = leader === 1 ? 2 : 1;
  assert.equal((await req(`${c.url(leader)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } })).status, 201);
  const lags = [];
  for (let i = 0; i < 40; i++) {
    const a = await req(`${c.url(leader)}/${key}`, { method: "POST", headers: { "content-type": "text/plain" }, body: "x" });
    assert.equal(a.status, 204);
    const next = offsetOf(a.headers.get("stream-next-offset"));
    const start = Date.now();
    for (;;) {
      const h = await req(`${c.url(follower)}/${key}?consistency=local`, { method: "HEAD" });
      if (h.status === 200 && offsetOf(h.headers.get("stream-next-offset")) >= next) break;
      // a heartbeat is up to 500 ms away: a follower told only by
      // heartbeats misses this bound on about 40 % of the appends
      assert.ok(Date.now() - start < 300, `the follower still lacks append ${i} after 300 ms`);
    }
    lags.push(Date.now() - start);
    await new Promise((r) => setTimeout(r, 25)); // each append alone, no batch to ride on
  }
  lags.sort((a, b) => a - b);
  console.log(`# follower lag over ${lags.length} appends (ms): p50 ${lags[20]} p90 ${lags[36]} max ${lags[39]}`);
});

test("read-your-writes through any node: 600 append/read pairs, none stale, none 404", async () => {
  const keys = Array.from({ length: 6 }, (_, i) => `followers/ryw-${i}`);
  for (const key of keys) {
    // created through a follower of its group, read at once on that follower
    const { node: leader } = await c.leaderOf(groupOf(key, GROUPS), 60000);
    const via = leader === 1 ? 2 : 1;
    assert.equal((await req(`${c.url(via)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" }, forward: true })).status, 201);
    assert.equal((await req(`${c.url(via)}/${key}`, { method: "HEAD" })).status, 200, "a create is read back at once");
  }
  let stale = 0;
  let missing = 0;
  for (let i = 0; i < 600; i++) {
    const node = 1 + (i % c.nodes);
    const key = keys[i % keys.length];
    const a = await req(`${c.url(node)}/${key}`, { method: "POST", headers: { "content-type": "text/plain" }, body: "y", forward: true });
    assert.equal(a.status, 204, `append ${i} through node ${node}: ${a.status} ${a.text}`);
    const next = offsetOf(a.headers.get("stream-next-offset"));
    const r = await req(`${c.url(node)}/${key}${i % 2 ? "?offset=-1" : ""}`, { method: i % 2 ? "GET" : "HEAD" });
    if (r.status === 404) missing++;
    else if (offsetOf(r.headers.get("stream-next-offset")) < next) stale++;
  }
  assert.equal(missing, 0, "no read answered 404");
  assert.equal(stale, 0, "no read missed its own write");
});

test("a follower whose ReadIndex ask is refused asks again before it redirects", async () => {
  const key = "followers/asked-again";
  const { node: leader } = await c.leaderOf(groupOf(key, GROUPS), 60000);
  const follower = leader === 1 ? 2 : 1;
  assert.equal((await req(`${c.url(leader)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" }, body: "kept" })).status, 201);
  const arm = async (n) => {
    const r = await req(`${c.url(leader)}/__runnel/test/fail?point=read-index&n=${n}&errno=EIO`, { method: "POST", headers: c.admin });
    assert.ok(r.status < 300, r.text);
  };
  try {
    // two refusals: the third ask, 100 ms later, confirms
    await arm(2);
    const r = await req(`${c.url(follower)}/${key}?offset=-1`);
    assert.equal(r.status, 200, `the follower served the read after two refused asks: ${r.status} ${r.text}`);
    assert.equal(r.text, "kept");
    // every ask refused: after about a second the read goes to the leader
    await arm(1000);
    const start = Date.now();
    const moved = await req(`${c.url(follower)}/${key}?offset=-1`);
    assert.equal(moved.status, 307, `${moved.status} ${moved.text}`);
    assert.equal(moved.headers.get("x-ursula-raft-leader-id"), String(leader));
    assert.ok(Date.now() - start >= 900, `redirected after ${Date.now() - start} ms of asks`);
  } finally {
    await arm(0);
  }
});
