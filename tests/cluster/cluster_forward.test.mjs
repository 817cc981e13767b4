// Cluster mode, black-box: --forward-writes, on by default (issue 28). A
// node that does
// not lead a stream's group forwards a write to the group's leader and
// relays its answer, so clients that cannot follow a 307 with a body (Node's
// fetch with a binary body, any streamed body) complete their writes
// through any node. A forwarded write is never forwarded again. A leader
// killed mid-forward gives the client an answer or a refusal that proves
// nothing applied, or OUTCOME_UNKNOWN; never a second apply of one write
// without a producer's retry (ext §11.1).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Cluster, follow, groupOf, req, sleep, waitFor } from "./runnel_cluster.mjs";

const GROUPS = 4;
let c;
before(async () => {
  c = await Cluster.start({ groups: GROUPS, args: ["--election-timeout-ms", "300"] });
});
after(() => c?.stopChecked());

// A stream key, the node leading its group and one that follows it.
async function streamLedElsewhere(prefix) {
  const key = `fwdtests/${prefix}`;
  const { node: leader } = await c.leaderOf(groupOf(key, GROUPS));
  return { key, leader, follower: leader === 1 ? 2 : 1 };
}

async function tailOf(key) {
  const r = await follow(`${c.url(1)}/${key}?consistency=leader`, { method: "HEAD" });
  assert.equal(r.status, 200, `HEAD ${key}: ${r.status}`);
  return r.headers.get("stream-next-offset");
}

async function readAll(key) {
  const r = await follow(`${c.url(1)}/${key}?offset=-1&consistency=leader`);
  assert.equal(r.status, 200);
  return r.body;
}

test("writes through a follower: created, binary and streamed bodies applied once", async () => {
  const { key, leader, follower } = await streamLedElsewhere("a");
  const at = `${c.url(follower)}/${key}`;
  const created = await req(at, { method: "PUT", headers: { "content-type": "application/octet-stream" }, forward: true });
  assert.equal(created.status, 201, created.text);
  assert.ok(created.headers.get("location").startsWith(c.url(follower)), "the node's own URL of the stream");
  // Node's fetch cannot follow a 307 with a Uint8Array body; the follower forwards it
  const bin = new Uint8Array([0, 1, 2, 255, 254, 253]);
  const r1 = await fetch(at, { method: "POST", headers: { "content-type": "application/octet-stream" }, body: bin, redirect: "manual" });
  assert.equal(r1.status, 204, `binary append: ${r1.status}`);
  // a streamed body (no Content-Length), 3 MiB in 64 KiB pieces
  const piece = Buffer.alloc(65536, 0x61);
  let sent = 0;
  const stream = new ReadableStream({
    pull(ctl) {
      if (sent === 48) return ctl.close();
      sent++;
      ctl.enqueue(piece);
    },
  });
  const r2 = await fetch(at, { method: "POST", headers: { "content-type": "application/octet-stream" }, body: stream, duplex: "half", redirect: "manual" });
  assert.equal(r2.status, 204, `streamed append: ${r2.status} ${await r2.text()}`);
  const all = await readAll(key);
  assert.equal(all.length, 6 + 48 * 65536);
  assert.deepEqual([...all.subarray(0, 6)], [...bin]);
  assert.ok(all.subarray(6).every((b) => b === 0x61));
  assert.notEqual(leader, follower);
});

test("a write marked Runnel-No-Forward (a forwarded one, a router's) is answered 307", async () => {
  const { key, follower } = await streamLedElsewhere("b");
  const r = await req(`${c.url(follower)}/${key}`, {
    method: "PUT",
    headers: { "content-type": "text/plain", "runnel-no-forward": "node-9" },
    forward: true,
  });
  assert.equal(r.status, 307);
  assert.ok(r.headers.get("x-ursula-raft-leader-id"));
});

test("a leader killed mid-forward: no answer the client could misread, one apply after the retry", async () => {
  const { key, leader, follower } = await streamLedElsewhere("c");
  const at = `${c.url(follower)}/${key}`;
  assert.equal((await req(at, { method: "PUT", headers: { "content-type": "application/octet-stream" }, forward: true })).status, 201);
  const producer = { "producer-id": "fwd-p", "producer-epoch": "0", "producer-seq": "0", "content-type": "application/octet-stream" };
  // a slow streamed body: the leader dies while it goes through the follower
  const piece = Buffer.alloc(65536, 0x62);
  let sent = 0;
  const stream = new ReadableStream({
    async pull(ctl) {
      if (sent === 16) return ctl.close();
      if (sent === 4) await c.crash(leader);
      sent++;
      await sleep(20);
      ctl.enqueue(piece);
    },
  });
  let status = 0;
  let code = null;
  try {
    const r = await fetch(at, { method: "POST", headers: producer, body: stream, duplex: "half", redirect: "manual" });
    status = r.status;
    code = r.status >= 400 ? (await r.json()).error?.code : null;
  } catch {
    status = 0; // no answer: unknown
  }
  assert.ok(
    [200, 204].includes(status) || (status === 503 && ["OUTCOME_UNKNOWN", "NO_LEADER"].includes(code)) || status === 0,
    `the forwarded write answered ${status} ${code}`,
  );
  // resolve with the producer's retry (the same key) through any node
  const body = Buffer.alloc(16 * 65536, 0x62);
  await waitFor("the retry to be answered", async () => {
    const r = await follow(`${c.url(follower)}/${key}`, { method: "POST", headers: producer, body });
    return r.status === 200 || r.status === 204;
  }, 30000, 300);
  await c.restart(leader);
  await c.converged();
  assert.equal((await readAll(key)).length, body.length, "the write applied exactly once");
  assert.equal(await tailOf(key), "0000000000000000_" + String(body.length).padStart(16, "0"));
});
