// Cluster mode, black-box: a group that lost its majority (issue 26, part
// 3). In a 3-node cluster nodes 1 and 2 are SIGKILLed and their data
// directories destroyed: every group and the metadata group lost their
// majority and take no write. The documented recovery
// (docs/CLUSTER_OPERATIONS.md): node 3, the survivor, restarted with
// --accept-loss naming the groups and meta, forces each to itself alone and
// rewrites the history of its streams: a new Stream-Incarnation, the old
// one as Stream-Previous-Incarnation with the kept tail, and a reader
// holding the old token gets 412. Then two new nodes join and the lost ones
// are decommissioned: the groups move onto nodes 3, 4 and 5, which hold the
// same bytes. A later start with the flag left in place forces nothing
// again.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { BIN, Cluster, follow, keysPerGroup, req, sleep, waitFor } from "./runnel_cluster.mjs";

const GROUPS = 2;
let c;

before(async () => {
  c = await Cluster.start({ nodes: 3, groups: GROUPS, args: ["--election-timeout-ms", "500"] });
});

after(() => {
  c.stopChecked();
});

const token = () => c.admin.authorization?.slice(7) ?? "";
const cli = (...args) => execFileSync(BIN, ["cluster", "--url", c.url(3), "--token", token(), ...args],
  { encoding: "utf8", timeout: 20000 });

// Starts node n again on its data with extra flags (its command line from
// node-N.cmd, the flags put before the redirections).
function launchWith(n, flags) {
  const file = path.join(c.dir, `node-${n}.cmd`);
  const cmd = fs.readFileSync(file, "utf8").replace(/ >>/, ` ${flags.join(" ")} >>`);
  execFileSync("bash", ["-c", cmd], { timeout: 10000 });
}

test("two of three replicas destroyed: the survivor brings the groups back as a history rewrite", async () => {
  const keys = keysPerGroup("lost/s", GROUPS);
  const held = {};
  for (const key of keys) {
    assert.equal((await follow(`${c.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } })).status, 201);
    for (let i = 0; i < 5; i++) {
      const r = await follow(`${c.url(1)}/${key}`, { method: "POST", headers: { "content-type": "text/plain" }, body: `r${i};` });
      assert.equal(r.status, 204, `${key} r${i}: ${r.text}`);
    }
  }
  await c.converged();
  for (const key of keys) {
    const h = await req(`${c.url(3)}/${key}`, { method: "HEAD" });
    held[key] = { token: h.headers.get("stream-incarnation"), tail: h.headers.get("stream-next-offset") };
  }
  await c.crash(1);
  await c.crash(2);
  fs.rmSync(path.join(c.dir, "node-1"), { recursive: true, force: true });
  fs.rmSync(path.join(c.dir, "node-2"), { recursive: true, force: true });
  await sleep(2000);
  const stuck = await req(`${c.url(3)}/${keys[0]}`, { method: "POST", headers: { "content-type": "text/plain" }, body: "x;", timeoutMs: 10000 });
  assert.equal(stuck.status, 503, `a group without its majority takes no write (${stuck.status} ${stuck.text})`);

  c.kill(3, "SIGTERM");
  await waitFor("node 3 to stop", () => !c.alive(3), 30000, 50);
  const forced = ["--accept-loss", [...keys.map((_, g) => `group-${g}`), "meta"].join(",")];
  launchWith(3, forced);
  await waitFor("node 3 ready, every group rewritten", async () => {
    try {
      return (await req(`${c.url(3)}/__runnel/readyz`, { timeoutMs: 2000 })).status === 200;
    } catch {
      return false;
    }
  }, 30000, 200);
  assert.match(c.log(3), /forced to this node alone/);
  for (const key of keys) {
    const h = await req(`${c.url(3)}/${key}`, { method: "HEAD" });
    assert.equal(h.status, 200);
    assert.notEqual(h.headers.get("stream-incarnation"), held[key].token, `${key}: a new incarnation`);
    assert.equal(h.headers.get("stream-previous-incarnation"), held[key].token, `${key}: the old token, reported`);
    assert.equal(h.headers.get("stream-inherited-offset"), held[key].tail, `${key}: what it kept`);
    const old = await req(`${c.url(3)}/${key}?offset=-1`, { headers: { "stream-incarnation": held[key].token } });
    assert.equal(old.status, 412, `${key}: a reader holding the old token is told`);
    assert.equal((await req(`${c.url(3)}/${key}?offset=-1`)).text, "r0;r1;r2;r3;r4;");
    const w = await req(`${c.url(3)}/${key}`, { method: "POST", headers: { "content-type": "text/plain" }, body: "after;" });
    assert.equal(w.status, 204, `${key}: writes again (${w.status} ${w.text})`);
  }

  // replicas back: two new nodes join, the lost ones are decommissioned
  const four = await c.addNode(4);
  const five = await c.addNode(5);
  cli("add", "4", four.raft, four.url);
  cli("add", "5", five.raft, five.url);
  cli("remove", "1");
  cli("remove", "2");
  const done = await waitFor("the groups on nodes 3, 4 and 5, nodes 1 and 2 removed", async () => {
    const r = await c.report(3);
    const gone = [1, 2].every((id) => r.nodes.find((n) => n.id === id)?.state === "removed");
    return gone && r.moves.length === 0 && r.groups.every((g) => g.placement.join() === "3,4,5" &&
      g.replicas.filter((x) => x.role === "voter").length === 3) ? r : null;
  }, 60000, 250);
  assert.ok(done);
  for (const n of [4, 5])
    await waitFor(`node ${n} ready`, async () => (await req(`${c.url(n)}/__runnel/readyz`)).status === 200, 30000, 200);
  for (const key of keys) {
    const want = (await follow(`${c.url(3)}/${key}?offset=-1&consistency=leader`)).text;
    assert.equal(want, "r0;r1;r2;r3;r4;after;");
    for (const n of [4, 5]) assert.equal((await req(`${c.url(n)}/${key}?offset=-1&consistency=local`)).text, want, `node ${n}: ${key}`);
  }

  // the flag left in place forces nothing again
  c.kill(3, "SIGTERM");
  await waitFor("node 3 to stop", () => !c.alive(3), 30000, 50);
  const before = c.log(3).length;
  launchWith(3, forced);
  await waitFor("node 3 ready again", async () => {
    try {
      return (await req(`${c.url(3)}/__runnel/readyz`, { timeoutMs: 2000 })).status === 200;
    } catch {
      return false;
    }
  }, 30000, 200);
  const later = c.log(3).slice(before);
  assert.match(later, /recovered before/);
  assert.doesNotMatch(later, /forced to this node alone/);
  for (const key of keys) {
    const h = await req(`${c.url(3)}/${key}`, { method: "HEAD" });
    assert.equal(h.headers.get("stream-previous-incarnation"), held[key].token, `${key}: not rewritten again`);
  }
});

test("--accept-loss in cluster mode names groups; a single node's damage name is refused", () => {
  let out;
  try {
    execFileSync(BIN, ["serve", "--node-id", "1", "--cluster-id", "x", "--peer", "1=127.0.0.1:1,http://127.0.0.1:2",
      "--data-dir", path.join(c.dir, "never"), "--accept-loss=segment-7"], { encoding: "utf8", stdio: "pipe", timeout: 10000 });
  } catch (e) {
    out = e;
  }
  assert.ok(out && out.status !== 0, "refused");
  assert.match(String(out.stderr), /group-N/);
});
