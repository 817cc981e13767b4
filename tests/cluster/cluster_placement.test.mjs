// Cluster mode, black-box: groups placed on R of N nodes (issue 26). A
// 6-node cluster with --replicas 3 and 6 groups: every group on exactly 3
// nodes and each node holding half of them, the same table on every node;
// a node without a replica answers with the group-only redirect of
// extensions §5.7 and a hosting follower with the leader's, and the CLI's
// cluster-aware client follows both to a write applied through every
// node; a node SIGKILLed under write load loses no acknowledged write;
// drain moves every leadership off a node within seconds while writes go
// on, and undrain lets leaderships come back.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import path from "node:path";
import { after, before, test } from "node:test";
import {
  BIN, Cluster, assertAcked, follow, groupOf, keysPerGroup, req, sleep, waitFor, writeLoad,
} from "./runnel_cluster.mjs";

const NODES = 6;
const GROUPS = 6;
let c;

before(async () => {
  c = await Cluster.start({ nodes: NODES, groups: GROUPS, replicas: 3, args: ["--election-timeout-ms", "500"] });
});

after(() => {
  c.stopChecked();
});

// Waits until no group moves and every group's leader is its preferred one;
// returns node 1's report.
async function settled() {
  return waitFor("the placement to settle", async () => {
    const r = await c.report(1);
    return r.moves.length === 0 && r.groups.every((g) => g.leader !== null && g.leader === g.preferred_leader) ? r : null;
  }, 30000, 200);
}

test("every group is on exactly 3 of the 6 nodes, each node holds half the groups, every node agrees", async () => {
  const r = await settled();
  assert.equal(r.replicas, 3);
  const held = new Map();
  for (const g of r.groups) {
    assert.equal(g.placement.length, 3, `group ${g.group} on 3 nodes: ${g.placement}`);
    assert.deepEqual(g.replicas.filter((x) => x.role === "voter").map((x) => x.node).sort(), [...g.placement].sort(),
      `group ${g.group}: its voters are its placement`);
    for (const n of g.placement) held.set(n, (held.get(n) ?? 0) + 1);
  }
  for (let n = 1; n <= NODES; n++) assert.equal(held.get(n), GROUPS / 2, `node ${n} holds half the groups`);
  const leads = r.nodes.map((n) => n.leading);
  assert.ok(Math.max(...leads) - Math.min(...leads) <= 1, `leaderships spread evenly: ${leads}`);
  for (let n = 2; n <= NODES; n++) {
    const other = await c.report(n);
    assert.deepEqual(other.groups.map((g) => g.placement), r.groups.map((g) => g.placement), `node ${n} has the same table`);
    for (const g of other.groups) assert.equal(g.hosted, g.placement.includes(n), `node ${n} runs group ${g.group} iff placed there`);
  }
});

test("both redirect shapes of §5.7, followed by the cluster-aware client through every node", async () => {
  const r = await settled();
  const keys = keysPerGroup("placed/s", GROUPS);
  for (const key of keys)
    assert.equal((await follow(`${c.url(1)}/v1/stream/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } })).status, 201);
  let groupOnly = 0, leaderShape = 0;
  for (const key of keys) {
    const g = r.groups[groupOf(key, GROUPS)];
    for (let n = 1; n <= NODES; n++) {
      if (n === g.leader) continue;
      const a = await req(`${c.url(n)}/v1/stream/${key}`, { method: "POST", headers: { "content-type": "text/plain" }, body: "x;" });
      assert.equal(a.status, 307, `node ${n}, ${key}`);
      const to = new URL(a.headers.get("location")).origin;
      assert.equal(a.headers.get("x-ursula-raft-group"), String(g.group));
      if (g.placement.includes(n)) { /* a follower: the leader, its id and term */
        leaderShape++;
        assert.equal(a.headers.get("x-ursula-raft-leader-id"), String(g.leader));
        assert.ok(Number(a.headers.get("x-ursula-raft-term")) >= 1);
        assert.equal(to, c.url(g.leader));
      } else { /* no replica here: the group only, to a node that hosts it */
        groupOnly++;
        assert.equal(a.headers.get("x-ursula-raft-leader-id"), null);
        assert.equal(a.headers.get("x-ursula-raft-term"), null);
        assert.ok(g.placement.some((p) => c.url(p) === to), `${to} hosts group ${g.group}`);
      }
      // a read on a node without a replica is redirected the same way, not served
      const read = await req(`${c.url(n)}/v1/stream/${key}?offset=-1`);
      assert.equal(read.status, g.placement.includes(n) ? 200 : 307, `read of ${key} through node ${n}`);
    }
  }
  assert.ok(groupOnly > 0 && leaderShape > 0, `both shapes seen (${groupOnly} group-only, ${leaderShape} leader)`);
  // the client library (the CLI's --cluster-aware) follows both to the leader
  for (const key of keys) {
    for (let n = 1; n <= NODES; n++) {
      execFileSync(BIN, ["append", "--cluster-aware", "-q", "--url", c.url(n), key, `via${n};`], { timeout: 20000 });
    }
    const text = (await follow(`${c.url(1)}/v1/stream/${key}?offset=-1&consistency=leader`)).text;
    assert.equal(text, Array.from({ length: NODES }, (_, i) => `via${i + 1};`).join(""), key);
  }
});

test("a node SIGKILLed under write load loses no acknowledged write", async () => {
  const r = await settled();
  const keys = keysPerGroup("killed/s", GROUPS);
  for (const key of keys)
    assert.equal((await follow(`${c.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } })).status, 201);
  const victim = r.nodes.reduce((a, b) => (b.leading > a.leading ? b : a)).id; /* the busiest leader */
  const load = writeLoad(c, keys);
  await sleep(1500);
  await c.crash(victim);
  await sleep(4000);
  const { acked, count, worstGap } = await load.stop();
  console.log(`# node ${victim} SIGKILLed under load: ${count} appends acknowledged, longest gap ${worstGap} ms`);
  assert.ok(count > 0);
  await assertAcked(c, keys, acked, victim === 1 ? 2 : 1);
  await c.restart(victim);
  await waitFor(`node ${victim} ready again`, async () => (await req(`${c.url(victim)}/__runnel/readyz`)).status === 200, 30000, 200);
});

test("drain moves every leadership off a node while writes go on; undrain lets them back", async () => {
  await settled();
  const r0 = await c.report(1);
  const node = r0.nodes.reduce((a, b) => (b.leading > a.leading ? b : a)).id;
  const keys = keysPerGroup("drained/s", GROUPS);
  for (const key of keys)
    assert.equal((await follow(`${c.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } })).status, 201);
  const load = writeLoad(c, keys);
  await sleep(500);
  const started = Date.now();
  execFileSync(BIN, ["cluster", "-q", "--url", c.url(1), "--token", c.admin.authorization?.slice(7) ?? "", "drain", String(node)], { timeout: 20000 });
  await waitFor(`node ${node} to lead nothing`, async () => {
    const r = await c.report(node);
    return r.groups.every((g) => g.leader !== node) && r.metadata.leader !== node;
  }, 10000, 100);
  const tookMs = Date.now() - started;
  await sleep(1500);
  let r = await c.report(1);
  assert.ok(r.nodes.find((n) => n.id === node).drained, "the report shows the node drained");
  assert.ok(r.groups.every((g) => g.leader !== node), "still leads nothing");
  const { acked, count, worstGap } = await load.stop();
  console.log(`# drain of node ${node}: leading nothing after ${tookMs} ms; ${count} appends acknowledged, longest gap ${worstGap} ms`);
  await assertAcked(c, keys, acked);
  const un = await req(`${c.url(2)}/__runnel/cluster/drain/${node}`, { method: "DELETE", headers: c.admin });
  assert.equal(un.status, 202, un.text);
  assert.equal(JSON.parse(un.text).drained, false);
  await waitFor(`node ${node} to lead again`, async () => (await c.report(node)).groups.some((g) => g.leader === node), 20000, 200);
  // refusals: a node that does not exist, a malformed id
  const missing = await req(`${c.url(3)}/__runnel/cluster/drain/77`, { method: "POST", headers: c.admin });
  assert.equal(missing.status, 404, missing.text);
  assert.equal((await req(`${c.url(3)}/__runnel/cluster/drain/x`, { method: "POST", headers: c.admin })).status, 400);
  r = await c.report(3);
  assert.ok(!r.nodes.some((n) => n.drained), "nothing drained now");
});
