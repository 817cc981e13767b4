// Cluster mode, black-box: the MUSTs of extensions §2.4, §5.7, §10 and
// §11.1 that no other cluster test provokes.
// - §5.7: once a node read any of a write's body it never redirects it: a
//   leader that read the first bytes of a body, then lost the leadership
//   (frozen past an election, woken under the new leader), answers the
//   rest 503 NO_LEADER, not 307, and nothing applies, when the write is
//   marked Runnel-No-Forward; unmarked, it forwards the body it holds to
//   the new leader, which applies it once.
// - §11.1: 503 RAFT_UNCOMMITTED_BACKPRESSURE, provoked: a leader whose
//   followers are frozen commits nothing, so the writes it proposed stay in
//   flight until its 64 MiB bound refuses the next one; the refused write
//   never applies.
// - §2.4: a stream's Stream-Incarnation, and a rewritten stream's token and
//   previous token, are unchanged across a failover and the old leader's
//   restart, on every node, although every node keeps its own incarnation
//   key: tokens are issued by the leader and carried in the log.
// - §10: Ursula-Protocol and Ursula-Cluster-Id on each of these 503s.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Conn } from "../blackbox/lib/wire.mjs";
import { Cluster, assertIdentity, follow, groupOf, req, sleep, waitFor } from "./runnel_cluster.mjs";

const GROUPS = 2;
// An election timeout long enough that a leader whose followers froze
// still leads while the test fills its proposal bound; a request timeout
// longer than the election the body waits through.
const ELECTION_MS = 3000;
let c;

before(async () => {
  c = await Cluster.start({
    groups: GROUPS,
    args: ["--test-hooks", "--election-timeout-ms", String(ELECTION_MS), "--request-timeout-ms", "60000", "--min-body-rate", "0"],
  });
});

after(() => {
  c.stopChecked();
});

function keyIn(group, prefix) {
  for (let i = 0; ; i++) {
    const key = `musts/${prefix}-${i}`;
    if (groupOf(key, GROUPS) === group) return key;
  }
}

async function create(key, body = "") {
  /* a create is idempotent: one that met an election is sent again */
  const r = await waitFor(`${key} created`, async () => {
    const a = await follow(`${c.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "application/octet-stream" }, body });
    return a.status === 503 && /"NO_LEADER"|"OUTCOME_UNKNOWN"/.test(a.text) ? null : a;
  }, 30000, 250);
  assert.ok(r.status === 201 || r.status === 200, `${r.status} ${r.text}`);
}

// The stream's bytes as its leader confirms them (a 503 while the group
// elects is retried).
const contents = (key) => waitFor(`a confirmed read of ${key}`, async () => {
  const r = await follow(`${c.url(1)}/${key}?consistency=leader`, { timeoutMs: 20000 });
  return r.status === 200 ? { text: r.text } : null;
}, 30000).then((x) => x.text);

// A leader reads a write's head and the first bytes of its body, loses the
// leadership (frozen past an election), then gets the rest. It never
// answers 307 then (§5.7). Marked Runnel-No-Forward, it answers 503
// NO_LEADER and nothing applies; unmarked (the default), it forwards the
// body it holds to the new leader, which applies it once.
async function leadershipLostMidBody(key, { forward }) {
  await c.converged(); /* an earlier case's frozen leader, back: its leadership may be moving home */
  await create(key, "kept");
  await c.converged();
  const old = await c.leaderOf(0);
  const conn = new Conn(Number(new URL(c.url(old.node)).port));
  const mark = forward ? "" : "Runnel-No-Forward: test\r\n";
  conn.send(`POST /${key} HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n${mark}Content-Length: 10\r\n\r\nabc`);
  await sleep(300); // the head is routed (this node leads) and the first bytes read
  assert.equal(conn.data.length, 0, "no answer before the body");
  c.kill(old.node, "SIGSTOP");
  try {
    const others = [1, 2, 3].filter((n) => n !== old.node);
    await waitFor("a new leader of group 0", async () => {
      const g = (await c.report(others[0])).groups[0];
      return g.leader !== null && g.leader !== old.node && g.term > old.term;
    }, 30000);
  } finally {
    c.kill(old.node, "SIGCONT");
  }
  await waitFor(`node ${old.node} to follow the new leader`, async () => {
    const g = (await c.report(old.node)).groups[0];
    return g.leader !== null && g.leader !== old.node;
  }, 20000);
  conn.send("defghij"); // the rest of the body
  assert.ok(await conn.until(() => conn.responses().length === 1, 20000), `an answer: ${conn.text}`);
  conn.close();
  const r = conn.responses()[0];
  assert.notEqual(r.status, 307, `after its body was read the write is not redirected: ${conn.text}`);
  assert.equal(r.header("location"), null);
  await c.leaderOf(0);
  return { r, asResponse: { status: r.status, headers: { get: (n) => r.header(n) } } };
}

describe("§5.7 no redirect once any body byte was read", () => {
  test("marked Runnel-No-Forward: 503 NO_LEADER, not 307; nothing applies", async () => {
    const key = keyIn(0, "midbody");
    const { r, asResponse } = await leadershipLostMidBody(key, { forward: false });
    assert.equal(r.status, 503, `the write's answer: ${r.status} ${r.body}`);
    assert.equal(JSON.parse(r.body).error.code, "NO_LEADER");
    assert.ok(r.header("retry-after"), "Retry-After");
    assertIdentity(asResponse, c, "the NO_LEADER after the body");
    assert.equal(await contents(key), "kept", "nothing applied");
  });

  test("forwarding (the default): the body in hand goes to the new leader and applies once", async () => {
    // On a loaded machine the group may elect again while the body is
    // forwarded; the node then answers 503 NO_LEADER, applying nothing
    // (checked), and the case is tried again on a fresh stream.
    for (let attempt = 1; ; attempt++) {
      const key = keyIn(0, `midbody-fwd-${attempt}`);
      const { r } = await leadershipLostMidBody(key, { forward: true });
      if (r.status === 503 && attempt < 3 && JSON.parse(r.body).error.code === "NO_LEADER") {
        assert.equal(await contents(key), "kept", "a NO_LEADER answer applied nothing");
        continue;
      }
      assert.equal(r.status, 204, `the write's answer: ${r.status} ${r.body}`);
      assert.equal(await contents(key), "keptabcdefghij", "applied once");
      break;
    }
  });
});

// A write whose head reaches a leader that does not serve yet (elected,
// its term's first entry not committed: failure point leader-noop holds
// it there) is routed once its body is in. Its head used to wait for the
// leader from the transport's early hook while the body went on arriving:
// when the leader became ready first, the write ran again with the body
// it had so far (none here) and was answered, and the body's bytes then
// met a connection without a request (a null dereference; the sanitizer
// build's cluster_restarts saw it).
describe("a write's body arriving while its leader gets ready", () => {
  test("the write waits for its body, then applies whole", async () => {
    await c.converged();
    const key = keyIn(0, "ready");
    await create(key, "kept");
    await c.converged();
    const old = await c.leaderOf(0);
    const others = [1, 2, 3].filter((n) => n !== old.node);
    const arm = (n, passes) => req(`${c.url(n)}/__runnel/test/fail?point=leader-noop&n=${passes}&errno=EIO`,
      { method: "POST", headers: c.admin });
    for (const n of others) assert.equal((await arm(n, 1000000)).status, 204);
    let leader;
    c.kill(old.node, "SIGSTOP");
    try {
      leader = await waitFor("a new leader of group 0", async () => {
        const g = (await c.report(others[0])).groups[0];
        return g.leader !== null && g.leader !== old.node && g.term > old.term ? g.leader : null;
      }, 30000);
    } finally {
      c.kill(old.node, "SIGCONT");
    }
    const ready = async () => {
      const m = await req(`${c.url(leader)}/__runnel/metrics`, { headers: c.admin });
      return /runnel_cluster_leading\{group="0"\} 1\b/.test(m.text);
    };
    assert.equal(await ready(), false, "the new leader does not serve while leader-noop is armed");
    const conn = new Conn(Number(new URL(c.url(leader)).port));
    conn.send(`POST /${key} HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: 5\r\n\r\n`);
    await sleep(300);
    for (const n of [1, 2, 3]) assert.equal((await arm(n, 0)).status, 204);
    await waitFor(`node ${leader} to serve group 0`, ready, 20000);
    await sleep(200); // a write waiting for the leader is routed again within 5 ms
    assert.equal(conn.data.length, 0, `no answer before the body: ${conn.text}`);
    conn.send("hello");
    assert.ok(await conn.until(() => conn.responses().length === 1, 20000), `an answer: ${conn.text}`);
    conn.close();
    const r = conn.responses()[0];
    // the leader may have moved on meanwhile (the frozen node back): a
    // NO_LEADER applied nothing
    if (r.status === 503) assert.equal(await contents(key), "kept", `${r.status} ${r.body}`);
    else {
      assert.equal(r.status, 204, `${r.status} ${r.body}`);
      assert.equal(await contents(key), "kepthello", "applied whole, once");
    }
    assert.equal(c.sanitizerReports(), "", "no sanitizer report");
  });
});

describe("§11.1 RAFT_UNCOMMITTED_BACKPRESSURE", () => {
  test("a leader at its bound of uncommitted proposals refuses the next write; it never applies", async () => {
    // 24 appends of 4 MiB to 24 streams of one group (a stream's writes
    // wait for each other; each of these is a Raft entry of its own) pass
    // the 64 MiB of proposals a group keeps awaiting their commit
    const keys = [];
    for (let i = 0; keys.length < 24; i++) {
      const key = `musts/busy-${i}`;
      if (groupOf(key, GROUPS) === 1) keys.push(key);
    }
    for (const key of keys) await create(key);
    await c.converged();
    const { node: leader } = await c.leaderOf(1);
    const followers = [1, 2, 3].filter((n) => n !== leader);
    const MiB4 = 4 * 1024 * 1024;
    for (const n of followers) c.kill(n, "SIGSTOP");
    let answers;
    try {
      answers = await Promise.all(keys.map((key) =>
        req(`${c.url(leader)}/${key}`, { method: "POST", headers: { "content-type": "application/octet-stream" }, body: Buffer.alloc(MiB4, "b"), timeoutMs: 60000 })
          .then((r) => ({ key, r }))));
    } finally {
      for (const n of followers) c.kill(n, "SIGCONT");
    }
    const codes = answers.map(({ r }) => (r.status === 503 ? JSON.parse(r.text).error.code : String(r.status)));
    console.log(`# the 24 answers: ${codes.join(" ")}`);
    const busy = answers.filter(({ r }) => r.status === 503 && JSON.parse(r.text).error.code === "RAFT_UNCOMMITTED_BACKPRESSURE");
    assert.ok(busy.length > 0, `some write refused for the bound: ${codes.join(" ")}`);
    for (const { r } of answers) {
      assert.ok(r.status === 503, `no quorum, no acknowledgment: ${codes.join(" ")}`);
      assert.ok(r.headers.get("retry-after"), "Retry-After");
      assertIdentity(r, c, JSON.parse(r.text).error.code);
    }
    await c.leaderOf(1);
    for (const { key } of busy) assert.equal(await contents(key), "", `the refused write to ${key} applied`);
  });
});

describe("§2.4 Stream-Incarnation across a failover", () => {
  test("every token, a rewritten stream's previous one too, is the same on every node before and after", async () => {
    const plain = keyIn(0, "token");
    const rewritten = keyIn(0, "rewritten");
    await create(plain, "p");
    await create(rewritten, "0123456789");
    const { node: leader } = await c.leaderOf(0);
    const rw = await req(`${c.url(leader)}/__runnel/test/rewrite/${rewritten}?keep=0000000000000000_0000000000000004`, { method: "POST", headers: c.admin });
    assert.ok(rw.status < 300, `rewrite: ${rw.status} ${rw.text}`);
    await c.converged();
    const keys = fs.readdirSync(c.dir).filter((d) => /^node-\d+$/.test(d))
      .map((d) => fs.readFileSync(path.join(c.dir, d, "incarnation-key"), "utf8"));
    assert.equal(new Set(keys).size, 3, `every node keeps a key of its own: ${keys.join(" ")}`);
    const tokens = async (nodes) => {
      const seen = [];
      for (const n of nodes) {
        for (const key of [plain, rewritten]) {
          const h = await req(`${c.url(n)}/${key}`, { method: "HEAD" });
          assert.equal(h.status, 200, `HEAD ${key} on node ${n}`);
          seen.push(`${key} ${h.headers.get("stream-incarnation")} ${h.headers.get("stream-previous-incarnation")}`);
        }
      }
      return seen;
    };
    const before = await tokens([1, 2, 3]);
    assert.equal(new Set(before).size, 2, `one token per stream on every node: ${before.join(", ")}`);
    assert.match(before[1], / \d+ \d+$/, "the rewritten stream reports its previous token");
    await c.crash(leader);
    const others = [1, 2, 3].filter((n) => n !== leader);
    await c.leaderOf(0);
    const a = await follow(`${c.url(others[0])}/${plain}`, { method: "POST", headers: { "content-type": "application/octet-stream" }, body: "q" });
    assert.equal(a.status, 204, a.text);
    await c.converged();
    assert.deepEqual(await tokens(others), before.slice(0, 2).concat(before.slice(0, 2)), "after the failover");
    await c.restart(leader);
    await c.converged();
    assert.deepEqual(await tokens([leader]), before.slice(0, 2), "on the old leader, restarted");
  });
});
