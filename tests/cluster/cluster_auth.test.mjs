// Cluster mode, black-box: a cluster only its members can join (issue 24).
// A 3-node cluster started by scripts/cluster.sh (cluster key and admin
// token, its default):
// - every operator route (membership, backup) answers 401 without the
//   token and 403 with a wrong one, every peer route 401 without a peer
//   signature and 403 with a forged, stale or altered one, each with a
//   typed body; a request signed with the key (as a node signs) is served;
//   five seconds later membership and data are unchanged;
// - a rogue process speaking libraft's own wire format on a node's Raft
//   port (an AppendEntries and a RequestVote of term 1000, claiming to be
//   node 2), with no proof and with a proof made with a wrong key, changes
//   no term, no leader and no data, and is counted;
// - a node started with another cluster key cannot join, and its log says
//   why;
// - the peer route listing the streams of groups (the subscriptions'
//   deliverer's ask), asked again with the cursor its answer gave, names
//   only the streams changed and removed since; with another journal's
//   cursor it names every stream, and a malformed one is refused 400.
// The same rogue bytes against a cluster without a key do raise its term:
// they are well-formed libraft messages; such a node warns at start that
// no peer is authenticated, and its report says so.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { appendEntries, assertUnchanged, clusterState, hello, refusedCount, requestVote, rogue } from "./raft_wire.mjs";
import { Cluster, follow, peerSignature, req, sleep, waitFor } from "./runnel_cluster.mjs";

const GROUPS = 2;
let c;

before(async () => {
  c = await Cluster.start({ groups: GROUPS });
});

after(() => {
  c?.stopChecked();
});


function assertTyped(r, status, code) {
  assert.equal(r.status, status, `${status} expected, got ${r.status}: ${r.text}`);
  assert.equal(JSON.parse(r.text).error.code, code);
  assert.equal(r.headers.get("cache-control"), "no-store");
}

describe("routes without a credential", () => {
  test("operator and peer routes refuse, typed; nothing changes", async () => {
    const key = fs.readFileSync(path.join(c.dir, "cluster.key"), "utf8").trim();
    const stream = "auth/data";
    assert.equal((await follow(`${c.url(1)}/${stream}`, { method: "PUT", headers: { "content-type": "text/plain" } })).status, 201);
    assert.equal((await follow(`${c.url(1)}/${stream}`, { method: "POST", headers: { "content-type": "text/plain" }, body: "kept" })).status, 204);
    const before = await clusterState(c);
    const u = c.url(2);
    const operator = [
      ["POST", `/__runnel/cluster/members?id=9&raft=127.0.0.1:9&url=${encodeURIComponent("http://127.0.0.1:9")}`],
      ["DELETE", "/__runnel/cluster/members/3"],
      ["POST", "/__runnel/cluster/drain/3"],
      ["DELETE", "/__runnel/cluster/drain/3"],
      ["POST", "/__runnel/backup?name=x"],
    ];
    for (const [method, target] of operator) {
      assertTyped(await req(u + target, { method }), 401, "INVALID_CREDENTIAL");
      assertTyped(await req(u + target, { method, headers: { authorization: "Bearer not-the-token-at-all" } }), 403, "FORBIDDEN");
    }
    const peer = [
      ["GET", "/__runnel/cluster/status"],
      ["GET", "/__runnel/cluster/read-index?group=0"],
      ["GET", "/__runnel/cluster/blob?cold=0&key=x"],
      ["GET", "/__runnel/cluster/streams?groups=0"],
      ["GET", "/__runnel/cluster/bytes/0000000000000100?from=0&to=4"],
      ["GET", "/__runnel/cluster/index/0000000000000100?from=0&to=1"],
      ["DELETE", "/__runnel/cluster/members/3?scope=local"],
    ];
    const now = Date.now();
    for (const [method, target] of peer) {
      assertTyped(await req(u + target, { method }), 401, "INVALID_CREDENTIAL");
      const forged = peerSignature("a-wrong-cluster-key-of-enough-bytes", method, target, 1, now);
      assertTyped(await req(u + target, { method, headers: forged }), 403, "FORBIDDEN");
      const stale = peerSignature(key, method, target, 1, now - 120000);
      assertTyped(await req(u + target, { method, headers: stale }), 403, "FORBIDDEN");
      const altered = peerSignature(key, method, `${target}${target.includes("?") ? "&" : "?"}x=1`, 1, now);
      assertTyped(await req(u + target, { method, headers: altered }), 403, "FORBIDDEN");
      const self = peerSignature(key, method, target, 2, now); /* node 2's own id, at node 2 */
      assertTyped(await req(u + target, { method, headers: self }), 403, "FORBIDDEN");
    }
    // signed with the key, as a node signs: served
    const ok = await req(`${u}/__runnel/cluster/status`, { headers: peerSignature(key, "GET", "/__runnel/cluster/status", 1, Date.now()) });
    assert.equal(ok.status, 200);
    const st = JSON.parse(ok.text);
    assert.equal(st.g.length, c.groups + 1, "a status per group and the metadata group's");
    assert.match(st.health, /^health [01]/);
    assert.match(st.incarnation, /^incarnation [0-9a-f]{16}$/);
    // the streams of groups (the subscriptions' deliverer's ask): a group
    // list that is not one is refused, a good one answered in its shape
    for (const bad of ["x", "0,,1", String(c.groups), ""]) {
      const t = `/__runnel/cluster/streams?groups=${bad}`;
      assertTyped(await req(u + t, { headers: peerSignature(key, "GET", t, 1, Date.now()) }), 400, "INVALID_REQUEST");
    }
    const all = [...Array(c.groups).keys()].join(",");
    const st2 = `/__runnel/cluster/streams?groups=${all}`;
    const streams = await req(u + st2, { headers: peerSignature(key, "GET", st2, 1, Date.now()) });
    assert.equal(streams.status, 200, streams.text);
    const body = JSON.parse(streams.text);
    assert.ok(Array.isArray(body.groups) && Array.isArray(body.streams), streams.text);
    for (const g of body.groups) assert.ok(Number.isInteger(g) && g >= 0 && g < c.groups, streams.text);
    for (const e of body.streams)
      assert.ok(typeof e[0] === "string" && /^[0-9a-f]{16}$/.test(e[1]) && Number.isInteger(e[2]) && Number.isInteger(e[3]) &&
        typeof e[4] === "string", JSON.stringify(e));
    assert.ok(await refusedCount(u, "http") >= peer.length * 4); /* an unsigned scope=local is judged as an operator's */
    // the report, health and metrics stay open
    for (const p of ["/__runnel/cluster", "/__runnel/livez", "/__runnel/readyz", "/__runnel/metrics"])
      assert.equal((await req(u + p)).status, 200, p);
    await sleep(5000);
    assert.deepEqual((await clusterState(c)).map((n) => n.map((g) => g.voters)), before.map((n) => n.map((g) => g.voters)));
    for (let n = 1; n <= 3; n++)
      assert.equal((await follow(`${c.url(n)}/${stream}?offset=-1`)).text, "kept");
  });
});

describe("the streams of groups, asked again since a cursor", () => {
  test("only what changed since is answered; a cursor the node cannot answer from gets every stream", async () => {
    const key = fs.readFileSync(path.join(c.dir, "cluster.key"), "utf8").trim();
    const target = (query) => `/__runnel/cluster/streams?groups=${[...Array(GROUPS).keys()].join(",")}${query}`;
    const ask = async (n, query = "") => {
      const from = n === 1 ? 2 : 1; // a node refuses a request signed as itself
      const r = await req(c.url(n) + target(query), { headers: peerSignature(key, "GET", target(query), from, Date.now()) });
      assert.equal(r.status, 200, r.text);
      return JSON.parse(r.text);
    };
    const send = async (p, method, body) => {
      const r = await follow(`${c.url(1)}/${p}`, { method, headers: { "content-type": "text/plain" }, body });
      assert.ok([200, 201, 204].includes(r.status), `${method} ${p}: ${r.status} ${r.text}`);
    };
    const ours = (paths) => paths.map((p) => (Array.isArray(p) ? p[0] : p)).filter((p) => /since\/[abc]$/.test(p))
      .map((p) => p.slice(-7)).sort();
    await send("since/a", "PUT");
    await send("since/b", "PUT");
    await send("since/a", "POST", "one");
    const first = {};
    for (let n = 1; n <= 3; n++) {
      first[n] = await ask(n);
      assert.equal(first[n].full, true);
      assert.match(first[n].cursor, /^[0-9a-f]{16}\.[0-9]+$/);
    }
    assert.deepEqual(ours(Object.values(first).flatMap((a) => a.streams)), ["since/a", "since/b"], "full answers name both");
    await send("since/a", "POST", "two");
    await send("since/b", "DELETE");
    await send("since/c", "PUT");
    // every replica applied them (a leader answers from what it applied)
    await waitFor("the changes applied on every node", async () => {
      for (let n = 1; n <= 3; n++) if ((await follow(`${c.url(n)}/since/a?offset=-1`, { headers: { "runnel-no-forward": "test" } })).text !== "onetwo") return false;
      return true;
    }, 10000, 50);
    const streams = [], removed = [];
    for (let n = 1; n <= 3; n++) {
      const again = await ask(n, `&since=${first[n].cursor}`);
      assert.equal(again.full, false, JSON.stringify(again));
      assert.deepEqual(again.groups, first[n].groups, "the same groups served");
      assert.ok(!again.streams.some((e) => e[0].endsWith("auth/data")), "a stream unchanged since is not named");
      streams.push(...again.streams);
      removed.push(...again.removed);
    }
    assert.deepEqual(ours(streams), ["since/a", "since/c"], "the changed and the created");
    assert.deepEqual(ours(removed), ["since/b"], "the deleted");
    const a = streams.find((e) => e[0].endsWith("since/a"));
    assert.equal(a[2], 6, "with its tail now");
    // another journal's cursor (a restarted leader's): every stream
    const other = first[1].cursor.replace(/^./, (d) => (d === "0" ? "1" : "0"));
    const full = await ask(1, `&since=${other}`);
    assert.equal(full.full, true);
    assert.equal(full.removed, undefined);
    for (const bad of ["x", "0123456789abcdef", "0123456789abcdef.", "0000000000000000.1", "0123456789ABCDEF.1"]) {
      const r = await req(c.url(1) + target(`&since=${bad}`), { headers: peerSignature(key, "GET", target(`&since=${bad}`), 2, Date.now()) });
      assertTyped(r, 400, "INVALID_REQUEST");
    }
  });
});

describe("a rogue peer on the Raft port", () => {
  test("AppendEntries and RequestVote of a higher term change nothing", async () => {
    const e = c.env();
    const before = await clusterState(c);
    const refusedBefore = await refusedCount(c.url(1), "raft");
    const msgs = [requestVote(1000, 2), appendEntries(1000)];
    for (let g = 0; g < GROUPS; g++) {
      const h = (auth) => hello({ group: g, sender: 2, clusterId: c.clusterId, address: `127.0.0.1:${e.RAFT_PORT_2}`, auth });
      await rogue(Number(e.RAFT_PORT_1), h(0), msgs);
      const answer = await rogue(Number(e.RAFT_PORT_1), h(1), msgs, { wrongKey: "a-wrong-cluster-key-of-enough-bytes" });
      assert.equal(answer.toString("latin1", 40, 44), "RNNO", "the wrong key's proof is refused");
    }
    assert.ok(await refusedCount(c.url(1), "raft") >= refusedBefore + 2 * GROUPS);
    await sleep(3000);
    await assertUnchanged(c, before, GROUPS);
    for (let n = 1; n <= 3; n++)
      assert.equal((await follow(`${c.url(n)}/auth/data?offset=-1`)).text, "kept");
  });

  test("the same bytes raise the term of a cluster without a key (they are libraft's); it says so", async () => {
    const open = await Cluster.start({ nodes: 1, groups: 1, insecure: true });
    try {
      assert.match(open.log(1), /warn cluster_unauthenticated: cluster mode WITHOUT PEER AUTHENTICATION/);
      assert.equal((await open.report(1)).peer_auth, "none");
      assert.equal((await c.report(1)).peer_auth, "key");
      const e = open.env();
      const h = hello({ group: 0, sender: 2, clusterId: open.clusterId, address: "127.0.0.1:9", auth: 0 });
      await rogue(Number(e.RAFT_PORT_1), h, [requestVote(1000, 2)]);
      await waitFor("the term to pass 1000", async () => (await open.report(1)).groups[0].term >= 1000, 10000);
    } finally {
      open.stop();
    }
  });
});

describe("a node with another cluster key", () => {
  test("cannot join, and says why in its log", async () => {
    const wrong = path.join(c.dir, "wrong.key");
    fs.writeFileSync(wrong, crypto.randomBytes(32).toString("hex"), { mode: 0o600 });
    const four = await c.addNode(4, ["--cluster-key-file", wrong]);
    const add = await req(`${c.url(1)}/__runnel/cluster/members?id=4&raft=${four.raft}&url=${encodeURIComponent(four.url)}`,
      { method: "POST", headers: c.admin });
    assert.equal(add.status, 202);
    await waitFor("node 4 to log why it was refused", () => /cluster keys differ/.test(c.log(4)), 15000);
    await sleep(3000);
    for (const g of (await c.report(1)).groups)
      assert.ok(!g.replicas.some((r) => r.node === 4 && r.role === "voter"), "node 4 is no voter");
    assert.ok((await req(`${four.url}/__runnel/readyz`)).status !== 200, "node 4 is not ready");
  });
});
