// Cluster mode, black-box: a restarted node serves nothing stale (issue
// 26). Under a steady write load, each node in turn is killed (SIGKILL or
// SIGTERM) and started again, RESTARTS times (12 in scripts/test.sh; the
// issue's 50 with CLUSTER_RESTARTS=50, about 3 minutes). Before it stops, the test
// notes how far each stream reached in that node's local reads; from the
// moment it answers again, local reads (consistency=local) are probed
// without pause. A stream that exists must never be a 404 there, and a
// 200 must never show less than the node served before it stopped: until
// the node applied what its group's leader had committed, it answers 503
// GROUP_RESTARTING. /__runnel/readyz must not say ready before that holds
// for every stream. Raft snapshots every 16 entries, so that a restarted
// node restores a snapshot and replays a log tail, the state in which a
// node judging by its own commit index served old state.
//
// Then a rolling restart by SIGTERM under writes: each node hands the
// leadership of every group it leads to another voter before it stops
// (its log says so, group by group), no acknowledged append is lost, and
// the longest gap between acknowledged appends is printed (a node that
// simply stopped cost its groups an election).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import fs from "node:fs";
import path from "node:path";
import { Cluster, follow, req, settledFollow, sleep, waitFor, writeLoad } from "./runnel_cluster.mjs";

const RESTARTS = Number(process.env.CLUSTER_RESTARTS ?? 12);
const STREAMS = Array.from({ length: 4 }, (_, i) => `restarts/s${i}`);
let c;
before(async () => {
  c = await Cluster.start({ groups: 4, args: ["--election-timeout-ms", "500", "--raft-snapshot-entries", "16"] });
});
after(() => c?.stopChecked());

const offsetOf = (tok) => BigInt(tok.split("_")[1]);

// What a local read of key on node n shows: {status, offset (BigInt or null)}.
async function localHead(n, key) {
  try {
    const r = await req(`${c.url(n)}/${key}?consistency=local`, { method: "HEAD", timeoutMs: 3000 });
    const tok = r.headers.get("stream-next-offset");
    return { status: r.status, offset: r.status === 200 && tok ? offsetOf(tok) : null };
  } catch {
    return { status: 0, offset: null }; // not listening yet
  }
}

test(`${RESTARTS} restarts under writes: no 404, nothing older than served, readyz after`, async () => {
  for (const key of STREAMS)
    assert.equal((await follow(`${c.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } })).status, 201);
  let writing = true;
  let restarting = 0;
  let acked = 0;
  const writer = (async () => {
    for (let i = 0; writing; i++) {
      const via = 1 + (i % c.nodes);
      if (via === restarting) continue;
      try {
        const r = await req(`${c.url(via)}/${STREAMS[i % STREAMS.length]}`, {
          method: "POST", headers: { "content-type": "text/plain" }, body: "record;", forward: true, timeoutMs: 5000,
        });
        if (r.status === 204) acked++;
        else await sleep(20);
      } catch {
        await sleep(20);
      }
    }
  })();
  const violations = [];
  let readyBeforeCaughtUp = 0;
  let restartingSeen = 0;
  try {
    for (let k = 0; k < RESTARTS; k++) {
      const n = 1 + (k % c.nodes);
      await sleep(300); // writes accumulate (and snapshots are taken) between restarts
      const served = {};
      for (const key of STREAMS) {
        const h = await localHead(n, key);
        assert.equal(h.status, 200, `node ${n} serves ${key} before its restart`);
        served[key] = h.offset;
      }
      restarting = n;
      if (k % 2) {
        c.kill(n, "SIGTERM");
        await (async () => { for (let t = 0; t < 500 && c.alive(n); t++) await sleep(20); })();
      }
      await c.crash(n); // SIGKILL (or whatever SIGTERM left)
      c.launch(n);
      // probe local reads until every stream shows what the node served
      const deadline = Date.now() + 30000;
      const done = new Set();
      while (done.size < STREAMS.length && Date.now() < deadline) {
        let ready = false;
        try {
          ready = (await req(`${c.url(n)}/__runnel/readyz`, { timeoutMs: 2000 })).status === 200;
        } catch {}
        for (const key of STREAMS) {
          const h = await localHead(n, key);
          if (h.status === 404) violations.push(`restart ${k}: node ${n} answered 404 for ${key}`);
          if (h.status === 503) restartingSeen++;
          if (h.status === 200 && h.offset < served[key])
            violations.push(`restart ${k}: node ${n} served ${key} at ${h.offset} < ${served[key]} before the stop`);
          if (h.status === 200 && h.offset >= served[key]) done.add(key);
          else if (ready) readyBeforeCaughtUp++;
        }
      }
      assert.equal(done.size, STREAMS.length, `node ${n} served every stream again after restart ${k}`);
      restarting = 0;
    }
  } finally {
    writing = false;
    await writer;
  }
  console.log(`# ${RESTARTS} restarts, ${acked} appends acknowledged, ${restartingSeen} local reads answered 503 while catching up`);
  assert.deepEqual(violations, [], "no 404 and nothing older than served");
  assert.equal(readyBeforeCaughtUp, 0, "readyz said ready while a stream was not caught up");
  assert.ok(acked > 0, "the writer wrote");
});

test("a rolling restart by SIGTERM hands every leadership over; nothing acknowledged is lost", async () => {
  const keys = Array.from({ length: 4 }, (_, i) => `rolling/s${i}`);
  // right after the previous test's restarts a group may still elect: its
  // 503 NO_LEADER applied nothing, and is retried as a client does
  for (const key of keys)
    assert.equal((await settledFollow(`${c.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } })).status, 201);
  let stopping = 0;
  const load = writeLoad(c, keys, { skip: (n) => n === stopping });
  let acked, worstGap;
  try {
    for (let n = 1; n <= c.nodes; n++) {
      // the leaderships placement's balance hands back after the previous
      // restart: counted while one was moving, node 1 once handed over 2
      // groups where its report 500 ms before said it led 3
      await c.leadersSettled();
      const report = await c.report(n);
      const led = report.groups.filter((g) => g.leader === n).map((g) => g.group);
      if (report.metadata.leader === n) led.push(c.groups); /* the metadata group's index */
      const logFile = path.join(c.dir, `node-${n}.log`);
      const before = fs.statSync(logFile).size;
      stopping = n;
      c.kill(n, "SIGTERM");
      await waitFor(`node ${n} to stop`, () => !c.alive(n), 20000, 20);
      const log = fs.readFileSync(logFile, "utf8").slice(before);
      assert.match(log, new RegExp(`handing over the leadership of ${led.length} groups`), `node ${n}'s log: ${log}`);
      for (const g of led) assert.match(log, new RegExp(`group ${g}: leadership handed over`), `node ${n} handed group ${g} over`);
      c.launch(n);
      await waitFor(`node ${n} to be ready`, async () => {
        try {
          return (await req(`${c.url(n)}/__runnel/readyz`, { timeoutMs: 2000 })).status === 200;
        } catch {
          return false;
        }
      }, 30000);
      stopping = 0;
    }
  } finally {
    ({ acked, worstGap } = await load.stop());
  }
  console.log(`# rolling restart of ${c.nodes} nodes by SIGTERM: ${acked.flat().length} appends acknowledged, longest gap between acknowledgements ${worstGap} ms`);
  for (let k = 0; k < keys.length; k++) {
    const r = await follow(`${c.url(1)}/${keys[k]}?offset=-1&consistency=leader`);
    assert.equal(r.status, 200);
    const have = new Map();
    for (const rec of r.text.split(";").filter(Boolean)) have.set(rec + ";", (have.get(rec + ";") ?? 0) + 1);
    for (const rec of acked[k]) assert.equal(have.get(rec), 1, `${keys[k]}: acknowledged ${rec} once`);
  }
});
