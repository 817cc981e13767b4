// Cluster mode, black-box: replicas move (issue 26). A 6-node cluster with
// --replicas 3 under write load gains a seventh node (`runnel cluster add
// $(scripts/cluster.sh join DIR 7)`, as docs/CLUSTER_OPERATIONS.md has it)
// and loses node 2 (`runnel cluster remove`: decommissioned): replicas move onto node 7 and off node 2, one
// change per group at a time, until node 2 holds nothing and is removed.
// Groups snapshot every 16 entries, so a new replica installs a snapshot
// and fetches its streams' bytes from its peers (paced by
// --move-rate-bytes). No acknowledged write is lost, every replica of every
// stream holds the same bytes at the end, and the longest gap between two
// acknowledged writes is printed.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { after, before, test } from "node:test";
import {
  BIN, Cluster, assertAcked, follow, groupOf, keysPerGroup, req, sleep, waitFor, writeLoad,
} from "./runnel_cluster.mjs";

const GROUPS = 6;
let c;

before(async () => {
  c = await Cluster.start({
    nodes: 6, groups: GROUPS, replicas: 3,
    args: ["--election-timeout-ms", "500", "--raft-snapshot-entries", "16", "--raft-snapshot-trailing", "4",
      "--move-rate-bytes", "1048576"],
  });
});

after(() => {
  c.stopChecked();
});

const token = () => c.admin.authorization?.slice(7) ?? "";
const cli = (...args) => execFileSync(BIN, ["cluster", "--url", c.url(1), "--token", token(), ...args],
  { encoding: "utf8", timeout: 20000 });

test("a node joins and another is decommissioned under write load: replicas move, nothing is lost", async () => {
  const keys = keysPerGroup("moved/s", GROUPS);
  for (const key of keys) {
    assert.equal((await follow(`${c.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } })).status, 201);
    /* history a new replica gets from its peers, not from the log */
    for (let i = 0; i < 40; i++)
      assert.equal((await follow(`${c.url(1)}/${key}`, { method: "POST", headers: { "content-type": "text/plain" }, body: `pre${i}-${"x".repeat(200)};` })).status, 204);
  }
  const before = await c.report(1);
  const load = writeLoad(c, keys, { skip: (n) => n === 2 });
  await sleep(1000);
  const added = JSON.parse(cli("add", ...c.join(7)));
  assert.equal(added.node, 7);
  assert.equal(added.state, "active");
  const removed = JSON.parse(cli("remove", "2"));
  assert.equal(removed.state, "leaving");
  let sawMove = null;
  const started = Date.now();
  const done = await waitFor("node 2 removed, node 7 holding replicas, nothing moving", async () => {
    const r = await c.report(1);
    if (r.moves.length && !sawMove) sawMove = r.moves[0];
    const two = r.nodes.find((n) => n.id === 2), n7 = r.nodes.find((n) => n.id === 7);
    return two?.state === "removed" && n7?.replicas > 0 && r.moves.length === 0 &&
      r.groups.every((g) => !g.placement.includes(2) && g.placement.length === 3 && g.leader !== null) ? r : null;
  }, 75000, 250);
  const movedMs = Date.now() - started;
  await sleep(1000);
  const { acked, count, worstGap } = await load.stop();
  console.log(`# node 7 added and node 2 decommissioned in ${movedMs} ms under load: ${count} appends acknowledged, longest gap between acknowledgements ${worstGap} ms`);
  assert.ok(sawMove && "step" in sawMove && "to" in sawMove && "from" in sawMove, `a move was reported: ${JSON.stringify(sawMove)}`);
  for (const n of done.nodes.filter((x) => x.state === "active"))
    assert.ok(n.replicas >= 2 && n.replicas <= 3, `node ${n.id} holds ${n.replicas} replicas (balanced)`);
  assert.ok(done.groups.some((g, i) => g.placement.join() !== before.groups[i].placement.join()), "placements changed");
  await assertAcked(c, keys, acked, 3);

  // every replica of every stream holds the same bytes (a balancing move
  // may still follow: moves are throttled, slower on the sanitizer build)
  await c.converged(90000);
  for (const key of keys) {
    const g = done.groups[groupOf(key, GROUPS)];
    const want = (await follow(`${c.url(g.leader)}/${key}?offset=-1&consistency=leader`)).body;
    for (const n of g.placement) {
      await waitFor(`node ${n} to be ready`, async () => (await req(`${c.url(n)}/__runnel/readyz`)).status === 200, 30000, 200);
      const got = await req(`${c.url(n)}/${key}?offset=-1&consistency=local`);
      assert.equal(got.status, 200, `node ${n} serves ${key}`);
      assert.ok(got.body.equals(want), `node ${n}'s replica of ${key} is byte-identical (${got.body.length} vs ${want.length} bytes)`);
    }
  }
  // the decommissioned node dropped every replica and serves nothing itself
  const r2 = await c.report(2);
  assert.ok(r2.groups.every((g) => !g.hosted), "node 2 runs no group any more");
  const viaTwo = await req(`${c.url(2)}/${keys[0]}?offset=-1`);
  assert.equal(viaTwo.status, 307, "node 2 redirects a read");
  assert.equal(viaTwo.headers.get("x-ursula-raft-leader-id"), null, "with the group-only shape");
});

test("operator refusals: a removed id, a conflicting address, a malformed node", async () => {
  const r = await req(`${c.url(3)}/__runnel/cluster/members?id=2&raft=127.0.0.1:1&url=http://127.0.0.1:1`, { method: "POST", headers: c.admin });
  assert.equal(r.status, 409, r.text);
  assert.equal(JSON.parse(r.text).error.code, "NODE_CONFLICT");
  const me = (await c.report(1)).nodes.find((n) => n.id === 3);
  const taken = await req(`${c.url(4)}/__runnel/cluster/members?id=9&raft=${me.raft}&url=http://127.0.0.1:9`, { method: "POST", headers: c.admin });
  assert.equal(taken.status, 409, taken.text);
  const bad = await req(`${c.url(4)}/__runnel/cluster/members?id=0&raft=127.0.0.1:1&url=http://x:1`, { method: "POST", headers: c.admin });
  assert.equal(bad.status, 400, bad.text);
  const unknown = await req(`${c.url(4)}/__runnel/cluster/members/99`, { method: "DELETE", headers: c.admin });
  assert.equal(unknown.status, 404, unknown.text);
  const noToken = await req(`${c.url(4)}/__runnel/cluster/members/3`, { method: "DELETE" });
  assert.equal(noToken.status, 401, noToken.text);
});
