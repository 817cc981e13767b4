// The standalone gateway in front of a 3-node cluster (docs/GATEWAY.md
// "Writes through the gateway (§11.1)"; extensions §5.7, §11, §11.1): the
// core refusals in their exact shape (401, 402, 403 FORBIDDEN and
// ACCOUNT_REVOKED, 413 and the lowered limit); an operator route of an
// admin tenant forwarded with the nodes' admin token
// (--upstream-admin-token-file); concealment byte for byte against a
// node's own 404; writes of every group sent to the group's
// leader once it is learned (the nodes' access logs); no 307 or 308 of its
// own, for small and streamed writes and for consistency=leader reads;
// writes under a bounded load survive two leader kills with nothing
// acknowledged lost (read back in order, once); and a large write cut
// mid-forward by its leader's death is answered 502 UPSTREAM_FAILED,
// never resent to another node, and applied at most once.
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Cluster, groupOf } from "../cluster/runnel_cluster.mjs";
import { assertFromNode, assertOwn, assertSameAnswer } from "./checks.mjs";
import {
  Gateway, bearer, content, rawRequest, seed, sleep, tempDir, tenant, tenantsDoc, uploadCut, writeTenants,
} from "./lib.mjs";

const GROUPS = 4;
const MiB = 1 << 20;
const T = {
  full: tenant({ "*": "rwa" }),
  acme: tenant({ orders: "rw", void: "r" }),
  ro: tenant({ orders: "r" }),
  unpaid: tenant({ orders: "rw" }, { status: "unpaid" }),
  revoked: tenant({ orders: "rw" }, { status: "revoked" }),
  small: tenant({ orders: "rw" }, { limits: { max_request_bytes: 1000 } }),
};
let c;
let gw;
const d = {}; // what seed() and content() need: {url, mode}

before(async () => {
  c = await Cluster.start({ groups: GROUPS, args: ["--access-log"] });
  const dir = tempDir("runnel-gw-cluster-");
  const file = path.join(dir, "tenants.json");
  writeTenants(file, tenantsDoc(T));
  // the nodes' operator routes need scripts/cluster.sh's admin token, which
  // the gateway adds for a tenant with admin
  const args = ["--upstream-admin-token-file", path.join(c.dir, "admin.token")];
  gw = await new Gateway({ upstreams: c.urls, tenantsFile: file, args, logPath: path.join(dir, "gateway.log") }).start();
  Object.assign(d, { url: gw.url, mode: "cluster" });
});

after(async () => {
  const r = await gw?.stop();
  c?.stopChecked();
  assert.deepEqual(r, { code: 0, signal: null }, gw?.logTail());
  assert.doesNotMatch(gw?.log ?? "", /ERROR: (Address|Leak)Sanitizer|runtime error:/);
});

const ask = (method, p, { key = T.full.key, body, headers = {} } = {}) =>
  rawRequest(gw.port, method, p, { headers: { ...(key ? bearer(key) : {}), ...(body !== undefined ? { "Content-Type": "text/plain" } : {}), ...headers }, body });

// A stream path of bucket `orders` in group g.
function inGroup(g, stem) {
  for (let i = 0; ; i++) if (groupOf(`orders/${stem}-${i}`, GROUPS) === g) return `/orders/${stem}-${i}`;
}

// POST lines of path in node n's access log, by status.
function posts(n, p) {
  return c.log(n).split("\n").filter((l) => l.includes(` access: POST ${p} `)).map((l) => l.split(` access: POST ${p} `)[1].split(" ")[0]);
}

describe("the core refusals through a cluster", () => {
  before(async () => {
    await seed(d, T.full.key, [["/orders/o-1", "hello\n"], ["/hidden/h-1", "secret\n"]]);
  });

  test("401, 402, 403, 413 in their exact shape; nothing applied", async () => {
    assertOwn(await ask("GET", "/orders/o-1?offset=-1", { key: null }), 401, "INVALID_CREDENTIAL", { what: "no credential" });
    assertOwn(await ask("POST", "/orders/o-1", { key: "rnk_unknown", body: "x\n" }), 401, "INVALID_CREDENTIAL", { what: "a wrong key" });
    assertOwn(await ask("POST", "/orders/o-1", { key: T.unpaid.key, body: "x\n" }), 402, "PAYMENT_REQUIRED", { what: "unpaid" });
    assertOwn(await ask("POST", "/orders/o-1", { key: T.ro.key, body: "x\n" }), 403, "FORBIDDEN", { what: "read rights only" });
    assertOwn(await ask("GET", "/__runnel/cluster", { key: T.acme.key }), 403, "FORBIDDEN", { what: "an operator route" });
    assertOwn(await ask("GET", "/orders/o-1?offset=-1", { key: T.revoked.key }), 403, "ACCOUNT_REVOKED", { what: "revoked" });
    assertOwn(await ask("POST", "/orders/o-1", { key: T.small.key, body: "x".repeat(1001) }), 413, "REQUEST_TOO_LARGE", { maxBytes: 1000, what: "over the limit" });
    const h = await ask("HEAD", "/orders/o-1", { key: T.small.key });
    assertFromNode(h, 200, "HEAD");
    assert.equal(h.header("ursula-max-request-bytes"), "1000");
    assert.equal(await content(d, T.full.key, "/orders/o-1"), "hello\n", "no refused write applied");
  });

  test("an operator route with admin is forwarded with the nodes' admin token", async () => {
    const r = await ask("POST", "/__runnel/backup?name=gw-admin", {});
    assert.ok(r.status !== 401 && r.status !== 403, `the node took the operator's request: ${r.statusLine} ${r.text}`);
  });

  test("concealment: the node's 404 less its identity, whatever exists", async () => {
    const hidden = await ask("GET", "/hidden/h-1?offset=-1", { key: T.acme.key });
    assertOwn(hidden, 404, "BUCKET_NOT_FOUND", { what: "concealed" });
    assertSameAnswer(hidden, await ask("GET", "/ghost/g-1?offset=-1", { key: T.acme.key }), [], "an existing bucket and a missing one");
    const passed = await ask("GET", "/void/v-1?offset=-1", { key: T.acme.key });
    assert.equal(passed.header("ursula-protocol"), "2", `the node's 404 through the gateway: ${passed.statusLine}`);
    assertSameAnswer(hidden, passed, ["ursula-protocol", "ursula-cluster-id"], "concealment vs the node's 404 through the gateway");
    for (let n = 1; n <= 3; n++) {
      const node = await rawRequest(new URL(c.url(n)).port, "GET", "/ghost2/x?offset=-1", {});
      assertSameAnswer(hidden, node, ["ursula-protocol", "ursula-cluster-id", "access-control-allow-origin", "access-control-expose-headers", "vary"],
        `concealment vs node ${n}'s own 404`);
    }
  });
});

describe("routing", () => {
  // The gateway learns a leader from a redirect (GATEWAY.md), so a write
  // that reached the leader by chance teaches it nothing: each stream is
  // written until a follower redirected one of its writes (or 20 writes all
  // reached the leader). A round counts only when no group's leader or term
  // changed during it (a slow machine may hold an election): up to three.
  test("writes go to their group's leader once it is learned", async () => {
    const paths = Array.from({ length: GROUPS }, (_, g) => inGroup(g, "lead"));
    await seed(d, T.full.key, paths.map((p) => [p, ""]));
    const leaders = () => Promise.all(paths.map((_, g) => c.leaderOf(g)));
    for (let round = 0; ; round++) {
      const was = await leaders();
      for (const [g, p] of paths.entries()) {
        const followers = [1, 2, 3].filter((n) => n !== was[g].node);
        for (let i = 0; i < 20; i++) {
          assertFromNode(await ask("POST", p, { body: "warm\n" }), 204, `warm-up ${p}`);
          if (followers.some((n) => posts(n, p).includes("307"))) break;
        }
      }
      await sleep(200); // the warm-ups' access log lines read from the nodes' pipes, as below
      const before = paths.map((p) => [1, 2, 3].map((n) => posts(n, p).length));
      for (let i = 0; i < 5; i++) for (const p of paths) assertFromNode(await ask("POST", p, { body: `r${round}w${i}\n` }), 204, p);
      for (const p of paths) { // each write of the round applied once, in order: no resend doubled one
        const r = await ask("GET", `${p}?offset=-1&consistency=leader`);
        assert.equal(r.status, 200, `read ${p}`);
        const mine = r.text.split("\n").filter((l) => l.startsWith(`r${round}w`));
        assert.deepEqual(mine, [0, 1, 2, 3, 4].map((i) => `r${round}w${i}`), `the round's writes in ${p}`);
      }
      await sleep(200);
      const now = await leaders();
      if (JSON.stringify(was) !== JSON.stringify(now) && round < 2) continue;
      assert.deepEqual(now, was, "the leaders held during the round");
      for (const [g, p] of paths.entries()) {
        const leader = now[g].node;
        for (let n = 1; n <= 3; n++) {
          const added = posts(n, p).slice(before[g][n - 1]);
          assert.equal(added.length, n === leader ? 5 : 0, `group ${g}: node ${n} (leader ${leader}) got ${added.length} of the 5 POSTs of ${p}: ${added}`);
        }
      }
      return;
    }
  });

  test("no 307 or 308 of the gateway's own: small and streamed writes, leader reads", async () => {
    for (let g = 0; g < GROUPS; g++) {
      const p = inGroup(g, "noredirect");
      const made = await ask("PUT", p, { body: "" });
      assert.equal(made.status, 201, `${p}: ${made.statusLine} ${made.text}`);
      assertFromNode(await ask("POST", p, { body: "small\n" }), 204, `small write ${p}`);
      assertFromNode(await ask("POST", p, { body: "L".repeat(2 * MiB) }), 204, `streamed write ${p}`);
      const r = await ask("GET", `${p}?offset=-1&consistency=leader&max_bytes=6`);
      assertFromNode(r, 200, `a consistency=leader read of ${p}`);
      assert.equal(r.text, "small\n");
    }
  });
});

// Appends (producer w, epoch 0, seq) through the gateway until an answer
// proves it applied (200, or 204 for a repeat); the gateway's 502, 503 and
// 504 and lost connections are retried with the same key. Returns false
// once `stop()` says so before it applied; any other answer fails.
async function appendOnce(p, w, seq, stop) {
  const headers = { "Producer-Id": w, "Producer-Epoch": "0", "Producer-Seq": String(seq) };
  for (;;) {
    let r = null;
    try {
      r = await ask("POST", p, { body: `${w}-${seq}\n`, headers });
    } catch { /* no answer: unknown, repeated */ }
    if (r && (r.status === 200 || r.status === 204)) return true;
    if (r) assert.ok([502, 503, 504].includes(r.status), `only 5xx are retried: ${r.statusLine} ${r.text}`);
    if (stop()) return false;
    await sleep(100);
  }
}

describe("leader kills under load", () => {
  test("two leader kills lose no acknowledged write", async () => {
    const streams = Array.from({ length: GROUPS }, (_, g) => inGroup(g, "load"));
    await seed(d, T.full.key, streams.map((p) => [p, ""]));
    const acked = streams.map(() => []);
    let stopping = false;
    const writers = streams.map(async (p, i) => {
      for (let seq = 0; !stopping; seq++) {
        if (await appendOnce(p, `w${i}`, seq, () => stopping)) acked[i].push(seq);
        else break;
        await sleep(20); // a bounded load
      }
    });
    for (let round = 0; round < 2; round++) {
      await sleep(1500);
      const { node } = await c.leaderOf(0);
      await c.crash(node);
      await sleep(2500);
      await c.restart(node);
    }
    await sleep(1000);
    stopping = true;
    await Promise.all(writers);
    await c.converged();
    for (const [i, p] of streams.entries()) {
      assert.ok(acked[i].length >= 5, `${p}: ${acked[i].length} acknowledged`);
      const lines = (await content(d, T.full.key, p)).split("\n").filter(Boolean);
      const seqs = lines.map((l) => Number(l.split("-")[1]));
      assert.ok(lines.every((l) => l.startsWith(`w${i}-`)), `${p} holds only its writer's lines`);
      assert.equal(new Set(seqs).size, seqs.length, `${p}: every write once`);
      assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), `${p}: in order`);
      for (const s of acked[i]) assert.ok(seqs.includes(s), `${p}: acknowledged seq ${s} read back`);
    }
  });

  test("a large write cut by its leader's death: 502 UPSTREAM_FAILED, never resent", async () => {
    const p = inGroup(1, "cut");
    await seed(d, T.full.key, [[p, ""]]);
    assertFromNode(await ask("POST", p, { body: "first\n" }), 204, "a write that teaches the leader");
    const { node: leader } = await c.leaderOf(1);
    const before = [1, 2, 3].map((n) => posts(n, p).length);
    const total = 8 * MiB;
    const answer = await uploadCut(gw.port, p, T.full.key, total, () => c.crash(leader));
    assertOwn(answer, 502, "UPSTREAM_FAILED", { what: "the leader killed mid-write" });
    await c.restart(leader);
    await c.converged();
    for (let n = 1; n <= 3; n++) {
      const added = posts(n, p).slice(before[n - 1]).filter((s) => s !== "307");
      assert.deepEqual(added, [], `node ${n}: the cut write was not resent`);
    }
    const len = (await content(d, T.full.key, p)).length;
    assert.ok(len === 6 || len === 6 + total, `applied nothing or once: ${len} bytes`);
  });
});
