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
//   why.
// The same rogue bytes against a cluster without a key do raise its term:
// they are well-formed libraft messages.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Cluster, follow, req, sleep, waitFor } from "./runnel_cluster.mjs";

const GROUPS = 2;
let c;

before(async () => {
  c = await Cluster.start({ groups: GROUPS });
});

after(() => {
  c?.stopChecked();
});

const env = (cl) => Object.fromEntries(fs.readFileSync(path.join(cl.dir, "cluster.env"), "utf8")
  .trim().split("\n").map((l) => l.split("=")));

// ---- what the cluster looks like: per group, every node's term and leader, and its voters
async function snapshot(cl) {
  const out = [];
  for (let n = 1; n <= cl.nodes; n++) {
    const r = await cl.report(n);
    out.push(r.groups.map((g) => ({ term: g.term, leader: g.leader,
      voters: g.replicas.filter((x) => x.role === "voter").map((x) => x.node).sort().join() })));
  }
  return out;
}

async function refusedCount(url, channel) {
  const text = (await req(`${url}/__runnel/metrics`)).text;
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`runnel_cluster_peer_refused_total\\{channel="${channel}",reason="[a-z_]+"\\} (\\d+)`, "g")))
    sum += Number(m[1]);
  return sum;
}

// ---- peer signatures, as src/cluster/peer_auth.c makes them
function sign(key, method, target, id, timeMs, body = Buffer.alloc(0)) {
  const digest = crypto.createHash("sha256").update(body).digest("hex");
  const mac = crypto.createHmac("sha256", key)
    .update(`runnel http 1\n${method}\n${target}\n${timeMs}\n${id}\n${digest}`).digest("hex");
  return { "runnel-peer-id": String(id), "runnel-peer-time": String(timeMs), "runnel-peer-signature": mac };
}

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
    const before = await snapshot(c);
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
      ["GET", "/__runnel/cluster/bytes/0000000000000100?from=0&to=4"],
      ["GET", "/__runnel/cluster/index/0000000000000100?from=0&to=1"],
      ["DELETE", "/__runnel/cluster/members/3?scope=local"],
    ];
    const now = Date.now();
    for (const [method, target] of peer) {
      assertTyped(await req(u + target, { method }), 401, "INVALID_CREDENTIAL");
      const forged = sign("a-wrong-cluster-key-of-enough-bytes", method, target, 1, now);
      assertTyped(await req(u + target, { method, headers: forged }), 403, "FORBIDDEN");
      const stale = sign(key, method, target, 1, now - 120000);
      assertTyped(await req(u + target, { method, headers: stale }), 403, "FORBIDDEN");
      const altered = sign(key, method, `${target}${target.includes("?") ? "&" : "?"}x=1`, 1, now);
      assertTyped(await req(u + target, { method, headers: altered }), 403, "FORBIDDEN");
      const self = sign(key, method, target, 2, now); /* node 2's own id, at node 2 */
      assertTyped(await req(u + target, { method, headers: self }), 403, "FORBIDDEN");
    }
    // signed with the key, as a node signs: served
    const ok = await req(`${u}/__runnel/cluster/status`, { headers: sign(key, "GET", "/__runnel/cluster/status", 1, Date.now()) });
    assert.equal(ok.status, 200);
    assert.equal(JSON.parse(ok.text).g.length, c.groups + 1, "a status per group and the metadata group's");
    assert.ok(await refusedCount(u, "http") >= peer.length * 4); /* an unsigned scope=local is judged as an operator's */
    // the report, health and metrics stay open
    for (const p of ["/__runnel/cluster", "/__runnel/livez", "/__runnel/readyz", "/__runnel/metrics"])
      assert.equal((await req(u + p)).status, 200, p);
    await sleep(5000);
    assert.deepEqual((await snapshot(c)).map((n) => n.map((g) => g.voters)), before.map((n) => n.map((g) => g.voters)));
    for (let n = 1; n <= 3; n++)
      assert.equal((await follow(`${c.url(n)}/${stream}?offset=-1`)).text, "kept");
  });
});

// ---- libraft's wire format, as a peer's connection carries it (src/cluster/wire.h's hello first)
function hashBytes(buf) { // util/map.c rn_hash_bytes
  const M = 0xffffffffffffffffn;
  let h = 0xcbf29ce484222325n ^ BigInt(buf.length);
  let i = 0;
  for (; i + 8 <= buf.length; i += 8) {
    h = ((h ^ buf.readBigUInt64LE(i)) * 0x100000001b3n) & M;
    h ^= h >> 29n;
  }
  for (; i < buf.length; i++) h = ((h ^ BigInt(buf[i])) * 0x100000001b3n) & M;
  h ^= h >> 30n; h = (h * 0xbf58476d1ce4e5b9n) & M;
  h ^= h >> 27n; h = (h * 0x94d049bb133111ebn) & M;
  h ^= h >> 31n;
  return h || 1n;
}

function hello({ group, sender, clusterId, address, auth }) {
  const b = Buffer.alloc(32);
  b.writeUInt32LE(0x46524e52, 0); b.writeUInt16LE(1, 4); b.writeUInt16LE(address.length, 6);
  b.writeUInt32LE(group, 8); b.writeUInt32LE(auth, 12);
  b.writeBigUInt64LE(BigInt(sender), 16); b.writeBigUInt64LE(hashBytes(Buffer.from(clusterId)), 24);
  return Buffer.concat([b, Buffer.from(address)]);
}

const u64s = (...v) => { const b = Buffer.alloc(8 * v.length); v.forEach((x, i) => b.writeBigUInt64LE(BigInt(x), 8 * i)); return b; };

// RequestVote (type 3): term, candidate, last index, last term, flags (1: disrupt the leader)
const requestVote = (term, candidate) => Buffer.concat([u64s(3, 40), u64s(term, candidate, 1000000, term - 1, 1)]);
// AppendEntries (type 1) with one 8-byte command entry: term, previous index and term, commit,
// the batch (count, then per entry term, type byte, 3 unused, u32 length), 8 unused, the payload
function appendEntries(term) {
  const entry = Buffer.alloc(16); entry.writeBigUInt64LE(BigInt(term), 0); entry[8] = 1; entry.writeUInt32LE(8, 12);
  const header = Buffer.concat([u64s(term, 0, 0, 1000000, 1), entry, Buffer.alloc(8)]);
  return Buffer.concat([u64s(1, header.length), header, Buffer.from("rogue!!!")]);
}

// Connects to a Raft port and writes hello + messages (after a wrong
// key's proof when wrongKey is set); resolves once the node closed the
// connection or 1.5 s passed.
function rogue(port, helloBytes, messages, wrongKey = null) {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    let got = Buffer.alloc(0);
    const done = () => { s.destroy(); resolve(got); };
    s.on("connect", () => {
      s.write(helloBytes);
      if (!wrongKey) s.write(Buffer.concat(messages));
    });
    s.on("data", (d) => {
      got = Buffer.concat([got, d]);
      if (wrongKey && got.length === 40 && got.toString("latin1", 0, 4) === "RNCH") {
        const nc = crypto.randomBytes(32);
        const proof = crypto.createHmac("sha256", wrongKey)
          .update(Buffer.concat([Buffer.from("runnel raft client 1"), helloBytes, got.subarray(8, 40), nc])).digest();
        s.write(Buffer.concat([nc, proof, ...messages]));
      }
    });
    s.on("error", done);
    s.on("close", done);
    setTimeout(done, 1500);
  });
}

describe("a rogue peer on the Raft port", () => {
  test("AppendEntries and RequestVote of a higher term change nothing", async () => {
    const e = env(c);
    const before = await snapshot(c);
    const refusedBefore = await refusedCount(c.url(1), "raft");
    const msgs = [requestVote(1000, 2), appendEntries(1000)];
    for (let g = 0; g < GROUPS; g++) {
      const h = (auth) => hello({ group: g, sender: 2, clusterId: c.clusterId, address: `127.0.0.1:${e.RAFT_PORT_2}`, auth });
      await rogue(Number(e.RAFT_PORT_1), h(0), msgs);
      const answer = await rogue(Number(e.RAFT_PORT_1), h(1), msgs, "a-wrong-cluster-key-of-enough-bytes");
      assert.equal(answer.toString("latin1", 40, 44), "RNNO", "the wrong key's proof is refused");
    }
    assert.ok(await refusedCount(c.url(1), "raft") >= refusedBefore + 2 * GROUPS);
    await sleep(3000);
    const now = await snapshot(c);
    for (let n = 0; n < 3; n++)
      for (let g = 0; g < GROUPS; g++) {
        assert.ok(now[n][g].term < 1000, `node ${n + 1} group ${g}: term ${now[n][g].term}`);
        assert.deepEqual(now[n][g], before[n][g], `node ${n + 1} group ${g} unchanged`);
      }
    for (let n = 1; n <= 3; n++)
      assert.equal((await follow(`${c.url(n)}/auth/data?offset=-1`)).text, "kept");
  });

  test("the same bytes raise the term of a cluster without a key (they are libraft's)", async () => {
    const open = await Cluster.start({ nodes: 1, groups: 1, insecure: true });
    try {
      const e = env(open);
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
