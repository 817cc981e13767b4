// Cluster mode, black-box: a 3-node cluster on loopback (scripts/cluster.sh)
// and the answers of extensions §5.7 (routing), §9.2 (leader reads) and §10
// (cluster id), the /__runnel/cluster report of the contract, and writes
// through every node read back from every replica.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Conn } from "../blackbox/lib/wire.mjs";
import { Cluster, assertIdentity, follow, groupOf, req, waitFor } from "./runnel_cluster.mjs";

const GROUPS = 4;
let c;

before(async () => {
  c = await Cluster.start({ groups: GROUPS });
});

after(() => {
  c.stopChecked();
});

// A key of the given group (keys are tried in order).
function keyIn(group, prefix) {
  for (let i = 0; ; i++) {
    const key = `clus/${prefix}-${i}`;
    if (groupOf(key, GROUPS) === group) return key;
  }
}

// The node that leads the group of key, and one that does not.
async function roles(key) {
  const group = groupOf(key, GROUPS);
  const { node, term } = await c.leaderOf(group);
  const follower = node === 1 ? 2 : 1;
  return { group, leader: node, term, follower };
}

function assertRedirect(r, { leader, group, term }, path) {
  assert.equal(r.status, 307, `307: ${r.status} ${r.text}`);
  assert.equal(r.headers.get("location"), `${c.url(leader)}${path}`);
  assert.equal(r.headers.get("x-ursula-raft-leader-id"), String(leader));
  assert.equal(r.headers.get("x-ursula-raft-group"), String(group));
  assert.equal(r.headers.get("x-ursula-raft-term"), String(term));
  assert.equal(r.body.length, 0, "a redirect carries no error body");
  assertIdentity(r, c, `the redirect of ${path}`);
}

describe("the /__runnel/cluster report", () => {
  test("every node reports the cluster id, the nodes and every group with a leader", async () => {
    for (let n = 1; n <= 3; n++) {
      const d = await c.report(n);
      assert.equal(d.cluster_id, c.clusterId);
      assert.equal(d.node_id, n);
      assert.deepEqual(d.nodes.map((x) => x.id), [1, 2, 3]);
      for (const x of d.nodes) {
        assert.equal(x.url, c.url(x.id));
        assert.match(x.raft, /^127\.0\.0\.1:\d+$/);
      }
      assert.equal(d.groups.length, GROUPS);
      d.groups.forEach((g, i) => {
        assert.equal(g.group, i);
        assert.ok([1, 2, 3].includes(g.leader), `group ${i} has a leader: ${g.leader}`);
        assert.ok(Number.isInteger(g.term) && g.term > 0);
        assert.ok(Number.isInteger(g.commit_index));
        assert.deepEqual(g.replicas.map((x) => x.node).sort(), [1, 2, 3]);
        const self = g.replicas.find((x) => x.node === n);
        assert.ok(Number.isInteger(self.applied_index) && Number.isInteger(self.lag));
      });
    }
  });

  test("every replica's applied index shows up on every node once the groups wrote", async () => {
    await c.converged();
    await waitFor("peers' applied indexes in the reports", async () => {
      for (let n = 1; n <= 3; n++)
        for (const g of (await c.report(n)).groups)
          if (g.replicas.some((x) => x.applied_index === null)) return false;
      return true;
    });
  });
});

describe("metrics", () => {
  test("every node reports each group's term, leader, indexes; proposals are counted", async () => {
    const key = keyIn(1, "metrics");
    const metric = (text, name) => Number(new RegExp(`^${name} (\\d+)$`, "m").exec(text)?.[1]);
    const total = async () => {
      let sum = 0;
      for (let n = 1; n <= 3; n++) sum += metric((await req(`${c.url(n)}/__runnel/metrics`)).text, "runnel_cluster_commands_total");
      return sum;
    };
    const before = await total();
    const made = await follow(`${c.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } });
    assert.equal(made.status, 201);
    assert.ok((await total()) > before, "the create was counted where it was proposed");
    const leading = Array.from({ length: GROUPS }, () => 0);
    for (let n = 1; n <= 3; n++) {
      const text = (await req(`${c.url(n)}/__runnel/metrics`)).text;
      for (let g = 0; g < GROUPS; g++) {
        for (const name of ["term", "leader", "leading", "commit_index", "applied_index", "leader_changes_total"])
          assert.match(text, new RegExp(`^runnel_cluster_${name}\\{group="${g}"\\} \\d+$`, "m"), `node ${n}: ${name} of group ${g}`);
        leading[g] += Number(new RegExp(`^runnel_cluster_leading\\{group="${g}"\\} (\\d)$`, "m").exec(text)[1]);
      }
      assert.match(text, /^runnel_cluster_proposal_seconds_count \d+$/m);
    }
    for (let g = 0; g < GROUPS; g++) assert.ok(leading[g] <= 1, `group ${g}: at most one node leads it`);
  });
});

describe("writes (§5.7)", () => {
  test("a create through each node: 201 on the leader, 307 with the leader's id, group and term elsewhere", async () => {
    for (let n = 1; n <= 3; n++) {
      const key = `clus/through-${n}`;
      const path = `/${key}`;
      const info = await roles(key);
      const r = await req(`${c.url(n)}${path}`, { method: "PUT", headers: { "content-type": "text/plain" }, body: `via ${n}` });
      if (n === info.leader) assert.equal(r.status, 201, r.text);
      else assertRedirect(r, info, path);
      const f = await follow(`${c.url(n)}${path}`, { method: "PUT", headers: { "content-type": "text/plain" }, body: `via ${n}` });
      assert.ok(f.status === 201 || f.status === 200, `create through node ${n}: ${f.status} ${f.text}`);
    }
    await c.converged();
    for (let m = 1; m <= 3; m++)
      for (let n = 1; n <= 3; n++) {
        const r = await req(`${c.url(m)}/clus/through-${n}`);
        assert.equal(r.status, 200);
        assert.equal(r.text, `via ${n}`, `node ${m} serves the write made through node ${n}`);
      }
  });

  test("appends, closes and deletes are redirected too; the redirect resends nothing itself", async () => {
    const key = keyIn(1, "verbs");
    const info = await roles(key);
    const f = await follow(`${c.url(info.follower)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } });
    assert.equal(f.status, 201);
    for (const [method, headers, body] of [
      ["POST", { "content-type": "text/plain" }, "abc"],
      ["POST", { "stream-closed": "true" }, undefined],
      ["DELETE", {}, undefined],
    ]) {
      const r = await req(`${c.url(info.follower)}/${key}`, { method, headers, body });
      assertRedirect(r, info, `/${key}`);
    }
    const r = await req(`${c.url(info.leader)}/${key}`);
    assert.equal(r.text, "", "nothing the follower redirected applied");
  });

  test("the redirect is decided before any body byte: a follower answers a POST whose body was not sent", async () => {
    const key = keyIn(2, "head");
    const info = await roles(key);
    await follow(`${c.url(info.leader)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } });
    const port = new URL(c.url(info.follower)).port;
    const conn = new Conn(Number(port));
    conn.send(`POST /${key} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nRunnel-No-Forward: test\r\nContent-Length: 10\r\n\r\n`);
    assert.ok(await conn.until(() => conn.responses().length === 1, 5000), "answered with the body unsent");
    const [r] = conn.responses();
    assert.equal(r.status, 307);
    assert.equal(r.headers["x-ursula-raft-leader-id"][0], String(info.leader));
    conn.sock.destroy();
    const e = new Conn(Number(port));
    e.send(`POST /${key} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nRunnel-No-Forward: test\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n`);
    assert.ok(await e.until(() => e.responses().length >= 1, 5000));
    assert.equal(e.responses()[0].status, 307, "no 100 Continue: the redirect comes first");
    e.sock.destroy();
  });

  test("producer writes through a follower apply once; a repeat answers its receipt", async () => {
    const key = keyIn(3, "producer");
    const info = await roles(key);
    await follow(`${c.url(info.follower)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } });
    const h = { "content-type": "text/plain", "producer-id": "p", "producer-epoch": "0", "producer-seq": "0" };
    const a = await follow(`${c.url(info.follower)}/${key}`, { method: "POST", headers: h, body: "one" });
    assert.equal(a.status, 200, a.text);
    const b = await follow(`${c.url(info.follower)}/${key}`, { method: "POST", headers: h, body: "one" });
    assert.equal(b.status, 204, "the repeat is answered from the receipt");
    const r = await follow(`${c.url(info.follower)}/${key}?consistency=leader`);
    assert.equal(r.text, "one");
  });

  test("a fork is created in its source's group and in another one (cluster_forks has the rest)", async () => {
    const src = keyIn(0, "fork-src");
    const info = await roles(src);
    await follow(`${c.url(info.leader)}/${src}`, { method: "PUT", headers: { "content-type": "text/plain" }, body: "base" });
    const far = keyIn(1, "fork-far");
    const farInfo = await roles(far);
    const r = await req(`${c.url(farInfo.leader)}/${far}`, { method: "PUT", headers: { "stream-forked-from": src } });
    assert.equal(r.status, 201, r.text);
    assert.equal((await req(`${c.url(farInfo.leader)}/${far}`)).text, "base");
    const near = keyIn(0, "fork-near");
    const f = await follow(`${c.url(info.follower)}/${near}`, { method: "PUT", headers: { "stream-forked-from": src } });
    assert.equal(f.status, 201, f.text);
    const g = await follow(`${c.url(info.leader)}/${near}?consistency=leader`);
    assert.equal(g.text, "base");
  });
});

describe("leader reads (§9.2)", () => {
  test("consistency=leader: a follower redirects it with the three headers, the leader serves it", async () => {
    const key = keyIn(2, "lread");
    const info = await roles(key);
    await follow(`${c.url(info.leader)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" }, body: "x" });
    const path = `/${key}?consistency=leader`;
    assertRedirect(await req(`${c.url(info.follower)}${path}`), info, path);
    const head = await req(`${c.url(info.follower)}${path}`, { method: "HEAD" });
    assert.equal(head.status, 307, "HEAD too");
    const r = await req(`${c.url(info.leader)}${path}`);
    assert.equal(r.status, 200);
    assert.equal(r.text, "x");
    // a leader read appends nothing, so the follower may apply the PUT a
    // heartbeat later: it answers from its own state meanwhile, never 307
    const seen = new Set();
    const local = await waitFor("the follower's local read", async () => {
      const l = await req(`${c.url(info.follower)}/${key}?consistency=local`);
      seen.add(l.status);
      return l.status === 200 ? l : null;
    }, 10000, 20);
    assert.deepEqual([...seen].filter((st) => st !== 200 && st !== 404), [], "answered from its own state");
    assert.equal(local.text, "x", "consistency=local is served by any replica");
  });

  test("malformed consistency answers 400 on every node, leader read with live too", async () => {
    const key = keyIn(0, "lbad");
    await follow(`${c.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } });
    for (let n = 1; n <= 3; n++) {
      const a = await req(`${c.url(n)}/${key}?consistency=eventual`);
      assert.equal(a.status, 400);
      assert.equal(JSON.parse(a.text).error.code, "INVALID_QUERY");
    }
    const info = await roles(key);
    const b = await req(`${c.url(info.leader)}/${key}?consistency=leader&live=long-poll&offset=-1`);
    assert.equal(b.status, 400);
  });

  test("read-your-writes: each acknowledged append is seen by a leader read through any node", async () => {
    const key = keyIn(1, "ryw");
    const info = await roles(key);
    await follow(`${c.url(info.leader)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } });
    let want = "";
    for (let i = 0; i < 20; i++) {
      const via = (i % 3) + 1;
      const a = await follow(`${c.url(via)}/${key}`, { method: "POST", headers: { "content-type": "text/plain" }, body: `${i};` });
      assert.equal(a.status, 204, a.text);
      want += `${i};`;
      const reader = ((i + 1) % 3) + 1;
      const r = await follow(`${c.url(reader)}/${key}?consistency=leader`);
      assert.equal(r.text, want, `read through node ${reader} after append ${i}`);
    }
  });

  test("a long-poll parked on a follower sees an append as it applies there", async () => {
    const key = keyIn(3, "live");
    const info = await roles(key);
    const made = await follow(`${c.url(info.leader)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } });
    assert.equal(made.status, 201);
    await c.converged();
    const tail = made.headers.get("stream-next-offset");
    const parked = req(`${c.url(info.follower)}/${key}?offset=${tail}&live=long-poll&timeout_ms=10000`);
    await new Promise((r) => setTimeout(r, 300));
    await follow(`${c.url(info.leader)}/${key}`, { method: "POST", headers: { "content-type": "text/plain" }, body: "woken" });
    const r = await parked;
    assert.equal(r.status, 200);
    assert.equal(r.text, "woken");
  });
});

describe("immutable chunks on replicas (§4.3)", () => {
  test("a follower serves a chunk it can mark, and any other answer only once it confirmed with the leader", async () => {
    // A follower gives an answer only an up-to-date replica may give (a chunk
    // at an open tail, a 412) once it applied the leader's ReadIndex: the
    // reads of a follower are confirmed by default (--follower-reads).
    const key = keyIn(2, "chunks");
    const info = await roles(key);
    const made = await follow(`${c.url(info.leader)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" }, body: "hello" });
    const tok = made.headers.get("stream-incarnation");
    await c.converged();
    const zero = "0000000000000000_0000000000000000";
    const path = `/${key}/incarnation/${tok}/chunk/${zero}`;
    for (const n of [info.follower, info.leader]) {
      const open = await req(`${c.url(n)}${path}`);
      assert.equal(open.status, 200, `node ${n}`);
      assert.equal(open.text, "hello");
      assert.equal(open.headers.get("stream-immutable"), null, "ends at an open tail: not marked");
      const wrong = `/${key}/incarnation/${BigInt(tok) + 1n}/chunk/${zero}`;
      assert.equal((await req(`${c.url(n)}${wrong}`)).status, 412, `node ${n}`);
    }
    await follow(`${c.url(info.leader)}/${key}`, { method: "POST", headers: { "stream-closed": "true" } });
    await c.converged();
    const closed = await req(`${c.url(info.follower)}${path}`);
    assert.equal(closed.status, 200, "marked: the follower serves it");
    assert.equal(closed.headers.get("stream-immutable"), "true");
    assert.equal(closed.text, "hello");
  });

  test("with --follower-reads local a follower redirects what it cannot mark", async () => {
    const lc = await Cluster.start({ groups: GROUPS, args: ["--follower-reads", "local"] });
    try {
      const key = keyIn(2, "chunks-local");
      const g = groupOf(key, GROUPS);
      const { node: leader } = await lc.leaderOf(g);
      const follower = leader === 1 ? 2 : 1;
      const made = await follow(`${lc.url(leader)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" }, body: "hello" });
      await lc.converged();
      const path = `/${key}/incarnation/${made.headers.get("stream-incarnation")}/chunk/0000000000000000_0000000000000000`;
      const r = await req(`${lc.url(follower)}${path}`);
      assert.equal(r.status, 307);
      assert.equal(r.headers.get("x-ursula-raft-leader-id"), String(leader));
    } finally {
      lc.stopChecked();
    }
  });
});

describe("no leader (§5.7)", () => {
  test("a node cut off from both peers answers 503 NO_LEADER with Retry-After and the group; nothing applies", async () => {
    const key = keyIn(0, "lonely");
    const info = await roles(key);
    await follow(`${c.url(info.leader)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" }, body: "kept" });
    await c.converged();
    const lone = info.follower;
    const others = [1, 2, 3].filter((n) => n !== lone);
    for (const n of others) c.kill(n, "SIGSTOP");
    try {
      await waitFor("the lone node to know no leader", async () => (await c.report(lone)).groups[info.group].leader === null, 15000);
      const r = await req(`${c.url(lone)}/${key}`, { method: "POST", headers: { "content-type": "text/plain" }, body: "lost" });
      assert.equal(r.status, 503, r.text);
      assert.equal(r.headers.get("retry-after"), "1");
      assert.equal(r.headers.get("x-ursula-raft-group"), String(info.group));
      assert.equal(JSON.parse(r.text).error.code, "NO_LEADER");
      assertIdentity(r, c, "a write's NO_LEADER");
      const lr = await req(`${c.url(lone)}/${key}?consistency=leader`);
      assert.equal(lr.status, 503, "a leader read without a leader");
      assert.equal(JSON.parse(lr.text).error.code, "NO_LEADER");
      assertIdentity(lr, c, "a leader read's NO_LEADER");
    } finally {
      for (const n of others) c.kill(n, "SIGCONT");
    }
    await c.leaderOf(info.group);
    await c.converged();
    for (let n = 1; n <= 3; n++) assert.equal((await req(`${c.url(n)}/${key}`)).text, "kept", `node ${n}`);
  });
});
