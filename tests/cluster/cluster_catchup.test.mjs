// Cluster mode, black-box: a node that fell behind past the leader's log
// catches up from a snapshot, which is a manifest (metadata, producers,
// offsets), never stream bytes: the node fetches the bytes and append
// index entries it lacks from its peers, and then holds every stream, byte
// for byte, as the others do (their stream files compared), and reports
// ready. Groups snapshot every 16 entries and keep 4 behind, so a node down
// for 100 writes must install a snapshot.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Cluster, follow, req, waitFor } from "./runnel_cluster.mjs";

let c;

before(async () => {
  c = await Cluster.start({ groups: 1, args: ["--raft-snapshot-entries", "16", "--raft-snapshot-trailing", "4"] });
});

after(() => {
  c.stopChecked();
});

// Every stream file (data and append index) of node n, by name.
function streamFiles(n) {
  const root = path.join(c.dir, `node-${n}`, "streams");
  const out = new Map();
  for (const d of fs.readdirSync(root))
    for (const f of fs.readdirSync(path.join(root, d)))
      if (f.endsWith(".dat") || f.endsWith(".idx")) out.set(f, fs.readFileSync(path.join(root, d, f)));
  return out;
}

const post = (n, key, body) =>
  follow(`${c.url(n)}/${key}`, { method: "POST", headers: { "content-type": "text/plain" }, body });

describe("a node behind the leader's snapshot", () => {
  test("installs it, fetches the bytes it names from its peers, and holds what the others hold", async () => {
    const { node: leader } = await c.leaderOf(0);
    const behind = leader === 3 ? 2 : 3;
    for (const key of ["catchup/a", "catchup/b", "catchup/gone"]) {
      const r = await follow(`${c.url(leader)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } });
      assert.equal(r.status, 201);
    }
    let a = "";
    for (let i = 0; i < 10; i++) {
      assert.equal((await post(leader, "catchup/a", `a${i};`)).status, 204);
      a += `a${i};`;
    }
    await c.converged();
    await c.crash(behind);
    for (let i = 10; i < 110; i++) {
      assert.equal((await post(leader, "catchup/a", `a${i};`)).status, 204);
      a += `a${i};`;
    }
    assert.equal((await post(leader, "catchup/b", "b-bytes")).status, 204);
    assert.equal((await follow(`${c.url(leader)}/catchup/gone`, { method: "DELETE" })).status, 204);
    const made = await follow(`${c.url(leader)}/catchup/new`, { method: "PUT", headers: { "content-type": "text/plain" }, body: "new" });
    assert.equal(made.status, 201);
    await c.restart(behind);
    await c.converged();
    await waitFor("the node that was behind to report ready", async () => (await req(`${c.url(behind)}/__runnel/readyz`)).status === 200, 30000);
    assert.equal((await req(`${c.url(behind)}/catchup/a`)).text, a, "every byte, served by the node that was behind");
    assert.equal((await req(`${c.url(behind)}/catchup/b`)).text, "b-bytes");
    assert.equal((await req(`${c.url(behind)}/catchup/new`)).text, "new");
    assert.equal((await req(`${c.url(behind)}/catchup/gone`)).status, 404, "a stream deleted meanwhile is gone");
    assert.match(c.log(behind), /cluster_gap: stream [0-9a-f]+: the restored state names bytes/, "the node had a gap");
    assert.match(c.log(behind), /cluster_gap: stream [0-9a-f]+: filled/, "and filled it");
    const mine = streamFiles(behind);
    const theirs = streamFiles(leader);
    assert.deepEqual([...mine.keys()].sort(), [...theirs.keys()].sort(), "the same stream files");
    for (const [name, bytes] of theirs) assert.ok(bytes.equals(mine.get(name)), `${name} is the same on both`);
  });
});
