// Cluster mode, black-box: membership changes through the admin route. A
// dead node is replaced by an empty one: node 3 is SIGKILLed for good,
// node 4 starts empty with --join, POST /__runnel/cluster/members adds it
// and DELETE .../members/3 decommissions the dead one (each on any node:
// it goes to the metadata group's leader), so node 3's replicas move to
// node 4. Node 4 catches up on everything (groups snapshot every
// 16 entries, so it installs snapshots and fetches their bytes), serves
// every stream byte for byte, and then the cluster survives losing node 1:
// nodes 2 and 4 elect leaders and take writes.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Cluster, follow, operatorReq, req, settledFollow, waitFor } from "./runnel_cluster.mjs";

const GROUPS = 2;
let c;

before(async () => {
  c = await Cluster.start({ groups: GROUPS, args: ["--raft-snapshot-entries", "16", "--raft-snapshot-trailing", "4"] });
});

after(() => {
  c.stopChecked();
});

// The voters of group g as a report shows them.
const members = (report, g) => report.groups[g].replicas.filter((r) => r.role === "voter").map((r) => r.node).sort();

describe("replacing a dead node with an empty one", () => {
  test("node 4 joins, node 3 leaves, node 4 holds everything, nodes 2 and 4 carry on without 1", async () => {
    const keys = Array.from({ length: 6 }, (_, i) => `members/s${i}`);
    const want = new Map();
    for (const key of keys) {
      assert.equal((await follow(`${c.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } })).status, 201);
      let text = "";
      for (let i = 0; i < 30; i++) {
        const r = await follow(`${c.url(1)}/${key}`, { method: "POST", headers: { "content-type": "text/plain" }, body: `${key}:${i};` });
        assert.equal(r.status, 204, r.text);
        text += `${key}:${i};`;
      }
      want.set(key, text);
    }
    await c.crash(3);
    const four = await c.addNode(4);
    const add = await operatorReq(`${c.url(1)}/__runnel/cluster/members?id=4&raft=${four.raft}&url=${encodeURIComponent(four.url)}`, { method: "POST", headers: c.admin });
    assert.equal(add.status, 202, add.text);
    assert.deepEqual(JSON.parse(add.text), { node: 4, intent: "voter", state: "active", drained: false, raft: four.raft, url: four.url });
    const del = await operatorReq(`${c.url(2)}/__runnel/cluster/members/3`, { method: "DELETE", headers: c.admin });
    assert.equal(del.status, 202, del.text);
    /* "removed" promises that node 3 counts toward no majority: no report
     * (one node's view at one moment) lists it removed and still voting in
     * the metadata group */
    const removedVoting = [];
    await waitFor("node 3 removed", async () => {
      let removed = 0;
      for (const n of [1, 2, 4]) {
        const r = await c.report(n);
        if (r.nodes.find((x) => x.id === 3)?.state !== "removed") continue;
        if (r.metadata.voters.includes(3)) removedVoting.push(`node ${n}: voters ${r.metadata.voters}`);
        removed++;
      }
      return removed === 3;
    }, 60000, 10);
    assert.deepEqual(removedVoting, [], "reports of node 3 removed and still voting in the metadata group");
    await waitFor("every group on nodes 1, 2 and 4", async () => {
      for (const n of [1, 2]) {
        const r = await c.report(n);
        for (let g = 0; g < GROUPS; g++) if (members(r, g).join() !== "1,2,4") return false;
      }
      return true;
    }, 60000, 250);
    await waitFor("node 4 ready (caught up, every gap filled)", async () => (await req(`${c.url(4)}/__runnel/readyz`)).status === 200, 60000, 250);
    for (const [key, text] of want) {
      const r = await req(`${c.url(4)}/${key}`);
      assert.equal(r.text, text, `node 4 serves ${key} (${r.status} ${r.headers.get("location") ?? ""})`);
    }
    const report4 = await c.report(4);
    assert.ok(report4.nodes.some((x) => x.id === 4), "node 4 lists itself");

    /* node 3 removed, out of every majority: losing node 1 leaves 2 and 4 a majority everywhere */
    await c.crash(1);
    for (let g = 0; g < GROUPS; g++) {
      const { node } = await c.leaderOf(g, 30000);
      assert.ok(node === 2 || node === 4, `group ${g} is led by node 2 or 4`);
    }
    for (const key of keys) {
      const r = await settledFollow(`${c.url(4)}/${key}`, { method: "POST", headers: { "content-type": "text/plain" }, body: "after;" });
      assert.equal(r.status, 204, `a write to ${key} with node 1 gone: ${r.status} ${r.text}`);
      const back = await settledFollow(`${c.url(2)}/${key}?consistency=leader`);
      assert.equal(back.text, `${want.get(key)}after;`);
    }
  });

  test("bad requests to the admin route are refused", async () => {
    const r = await req(`${c.url(2)}/__runnel/cluster/members?id=9&raft=nohost&url=http://x:1`, { method: "POST", headers: c.admin });
    assert.equal(r.status, 400);
    /* the metadata group's leader may have been node 1, lost above: it elects another */
    const missing = await operatorReq(`${c.url(2)}/__runnel/cluster/members/77`, { method: "DELETE", headers: c.admin });
    assert.equal(missing.status, 404, missing.text);
    assert.equal((await req(`${c.url(2)}/__runnel/cluster/members`, { method: "GET", headers: c.admin })).status, 405);
  });
});
