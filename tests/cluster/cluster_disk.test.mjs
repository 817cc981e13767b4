// Cluster mode, black-box: full disks (issue 32). Every node's data
// directory is its own small tmpfs (root; otherwise every test is skipped,
// saying why), with --disk-reserve-bytes 16 MiB. Producers append through
// every node (one producer per stream, retrying a seq until an answer
// proves it applied) while a disk is filled by another file:
//   - a full follower: writes go on through the others, the follower
//     reports not ready naming its disk, no process exits, and once the
//     file is removed it catches up;
//   - a full leader: its writes are refused 503 WAL_DISK_PRESSURE (never
//     OUTCOME_UNKNOWN for lack of space), it hands its leadership to a
//     healthy node within seconds (counted in its metrics), writes go on;
//   - a follower that stops applying (the apply-reserve failure point, as
//     a disk whose stream files have no room while the log still has)
//     answers 503 APPLY_STOPPED to reads that must see every acknowledged
//     write, serves consistency=local reads of what it applied, reports why
//     it is not ready, and applies the rest once the point is disarmed;
//   - a follower restarted on a full disk starts (its reserve file is
//     released for the start), reports, and catches up once space returns;
// after each, every acknowledged write is on every replica, exactly once and
// in order, and every answer was one the protocol allows (a 503 with its
// Retry-After). A single-node cluster, which has no one to hand over to,
// answers its writes 503 WAL_DISK_PRESSURE on a full disk and 503
// APPLY_STOPPED (after the one write whose entry was kept unapplied, 503
// OUTCOME_UNKNOWN) while its applying is stopped, before reading the body,
// as it answers reads that must see every write, and serves consistency=local
// reads of what it applied meanwhile. A slow disk (ext4 images on
// loop devices; the leader's writes limited to 4 KiB/s by cgroup v1 blkio
// throttling, skipped without it): with --log-stall-ms 1000 the leadership
// moves within seconds (counted as log_stalled), the slow node says why it is
// not ready, writes go on, and every acknowledged write is on every replica
// once the limit is lifted.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, afterEach, before, describe, test } from "node:test";
import { tempDir } from "../blackbox/lib/server.mjs";
import { Cluster, follow, req, sleep, waitFor } from "./runnel_cluster.mjs";

const ROOT = process.getuid && process.getuid() === 0;
const SKIP = ROOT ? false : "needs root to mount a tmpfs per node";
const DISK_MIB = 128;
const RESERVE = 16 << 20;
const ARGS = ["--test-hooks", "--disk-reserve-bytes", String(RESERVE), "--log-stall-ms", "1500",
  "--raft-snapshot-entries", "256", "--raft-snapshot-trailing", "64"];
const PAD = "x".repeat(2048); /* each record's bytes: the disks fill and segments turn over */
const REFUSALS = new Set(["NO_LEADER", "WAL_DISK_PRESSURE", "APPLY_STOPPED", "RAFT_UNCOMMITTED_BACKPRESSURE", "GROUP_RESTARTING"]);

const clusters = [];
const running = new Set(); /* writers a failed test left running */
const THROTTLE = "/sys/fs/cgroup/blkio/runnel-cluster-disk"; /* cgroup v1: the slow disk */
after(() => {
  for (const w of running) w.stop = true;
  let failed = null; /* the first; every mount and loop device goes regardless */
  for (const { c, mounts, loops } of clusters) {
    try {
      if (c.urls) c.stopChecked();
    } catch (err) {
      failed ??= err;
    }
    for (const m of mounts) execFileSync("umount", ["-l", m]);
    for (const l of loops) execFileSync("losetup", ["-d", l]);
  }
  if (fs.existsSync(THROTTLE)) fs.rmdirSync(THROTTLE);
  if (failed) throw failed;
});

// A cluster of `nodes` whose data directories are tmpfs mounts, or (ext4)
// ext4 images on loop devices (c.devices: each node's MAJ:MIN).
function startCluster(nodes, { ext4 = false, args = [] } = {}) {
  const dir = tempDir("runnel-cluster-disk-");
  const mounts = [], loops = [], devices = [];
  for (let n = 1; n <= nodes; n++) {
    const m = path.join(dir, `node-${n}`);
    fs.mkdirSync(m);
    if (ext4) {
      const img = path.join(dir, `node-${n}.img`);
      fs.writeFileSync(img, "");
      fs.truncateSync(img, DISK_MIB << 20);
      const loop = execFileSync("losetup", ["-f", "--show", img], { encoding: "utf8" }).trim();
      loops.push(loop);
      execFileSync("mkfs.ext4", ["-q", loop]);
      execFileSync("mount", [loop, m]);
      devices.push(execFileSync("lsblk", ["-dno", "MAJ:MIN", loop], { encoding: "utf8" }).trim());
    } else {
      execFileSync("mount", ["-t", "tmpfs", "-o", `size=${DISK_MIB}m`, "tmpfs", m]);
    }
    mounts.push(m);
  }
  const c = new Cluster(dir, nodes, 1, [...ARGS, ...args]);
  c.devices = devices;
  clusters.push({ c, mounts, loops });
  c.startAll();
  return c;
}

// Limits node n's writes to its data directory's device to bps (cgroup v1
// blkio throttling; the process and its threads move into the cgroup), or
// lifts the limit (bps 0: back to the root cgroup).
function throttle(c, n, bps) {
  fs.mkdirSync(THROTTLE, { recursive: true });
  /* 0 removes the rule, which also releases the writes it queued */
  fs.writeFileSync(path.join(THROTTLE, "blkio.throttle.write_bps_device"), `${c.devices[n - 1]} ${bps}`);
  fs.writeFileSync(path.join(bps ? THROTTLE : "/sys/fs/cgroup/blkio", "cgroup.procs"), String(c.pid(n)));
}

// Another program's file on the same file system (lost+found: a name the
// data directory's owner check allows, as a file system mounted there has).
const filler = (c, n) => {
  fs.mkdirSync(path.join(c.dir, `node-${n}`, "lost+found"), { recursive: true });
  return path.join(c.dir, `node-${n}`, "lost+found", "filler");
};
// Fills node n's disk with another file (dd stops at ENOSPC).
function fill(c, n) {
  try {
    execFileSync("dd", ["if=/dev/zero", `of=${filler(c, n)}`, "bs=1M", `count=${DISK_MIB}`], { stdio: "ignore" });
  } catch {}
}
const unfill = (c, n) => fs.rmSync(filler(c, n), { force: true });

// A whole stream read page by page (query: more parameters).
async function readAll(url, query = "") {
  const parts = [];
  for (let offset = "-1"; ;) {
    const r = await req(`${url}?offset=${encodeURIComponent(offset)}${query ? "&" + query : ""}`);
    assert.equal(r.status, 200, `GET ${url}: ${r.status} ${r.text.slice(0, 200)}`);
    parts.push(r.body);
    offset = r.headers.get("stream-next-offset");
    if (r.headers.get("stream-up-to-date") === "true") return { body: Buffer.concat(parts) };
  }
}

const hook = (c, n, query) => req(`${c.url(n)}/__runnel/test/fail?${query}`, { method: "POST", headers: c.admin });
const code = (r) => /"code":"(\w+)"/.exec(r.text)?.[1] ?? "";
const ready = async (c, n) => (await req(`${c.url(n)}/__runnel/readyz`, { timeoutMs: 3000 })).text;
const isReady = async (c, n) => (await req(`${c.url(n)}/__runnel/readyz`, { timeoutMs: 3000 })).status === 200;
const metric = async (c, n, name) => {
  const text = (await req(`${c.url(n)}/__runnel/metrics`)).text;
  const line = text.split("\n").find((l) => l.startsWith(name + " ") || l.startsWith(name + "{"));
  return line ? Number(line.split(" ").pop()) : NaN;
};

// One producer per stream, appending "<stream>:<seq>:<pad>;" through the nodes in
// turn (following redirects), each seq retried until an answer proves it
// applied; every answer is checked against what the protocol allows.
class Writers {
  constructor(c, prefix, streams = 4) {
    Object.assign(this, { c, prefix, streams, acked: new Array(streams).fill(-1), sent: new Array(streams).fill(-1), bad: [], stop: false, codes: {} });
  }

  url(n, k) {
    return `${this.c.url(n)}/v1/stream/${this.prefix}${k}`;
  }

  async create() {
    for (let k = 0; k < this.streams; k++) {
      const r = await follow(this.url(1, k), { method: "PUT", headers: { "content-type": "text/plain" } });
      assert.ok(r.status === 201 || r.status === 200, `create: ${r.status} ${r.text}`);
    }
  }

  async run(k) {
    let via = k;
    for (let seq = 0; !this.stop; ) {
      const node = (via++ % this.c.nodes) + 1;
      if (!this.c.alive(node)) {
        await sleep(20);
        continue;
      }
      const headers = { "content-type": "text/plain", "producer-id": `p${k}`, "producer-epoch": "0", "producer-seq": String(seq) };
      this.sent[k] = Math.max(this.sent[k], seq);
      let r;
      try {
        r = await follow(this.url(node, k), { method: "POST", headers, body: `${k}:${seq}:${PAD};`, timeoutMs: 5000 });
      } catch {
        await sleep(50);
        continue; /* unknown: the same seq again */
      }
      const key = `${r.status} ${code(r)}`;
      this.codes[key] = (this.codes[key] ?? 0) + 1;
      if (r.status === 200 || r.status === 204) {
        this.acked[k] = seq++;
        continue;
      }
      const typed = r.status === 503 && (REFUSALS.has(code(r)) || code(r) === "OUTCOME_UNKNOWN") && r.headers.get("retry-after") !== null;
      if (!typed) this.bad.push(`${key}: ${r.text.slice(0, 200)}`);
      await sleep(50);
    }
  }

  start() {
    running.add(this);
    this.done = Promise.all([...Array(this.streams).keys()].map((k) => this.run(k)));
  }

  async finish() {
    this.stop = true;
    await this.done;
    running.delete(this);
  }

  ackedCount() {
    return this.acked.reduce((a, b) => a + b + 1, 0);
  }

  // Every node holds, per stream, records 0..m in order with m at least
  // the last acknowledged seq and at most the last sent; every node the same.
  async verify() {
    assert.deepEqual(this.bad, [], "every answer is typed");
    await this.c.converged(60000);
    for (let k = 0; k < this.streams; k++) {
      let first = null;
      for (let n = 1; n <= this.c.nodes; n++) {
        const r = { text: (await readAll(this.url(n, k))).body.toString("utf8") };
        const seqs = r.text.split(";").filter(Boolean).map((x) => Number(x.split(":")[1]));
        seqs.forEach((s, i) => assert.equal(s, i, `node ${n} stream ${k}: record ${i} is seq ${s}`));
        assert.ok(seqs.length - 1 >= this.acked[k], `node ${n} stream ${k}: ${seqs.length} records, seq ${this.acked[k]} acknowledged`);
        assert.ok(seqs.length - 1 <= this.sent[k], `node ${n} stream ${k}: a record never sent`);
        if (first === null) first = r.text;
        else assert.equal(r.text, first, `node ${n} holds what node 1 holds of stream ${k}`);
      }
    }
  }
}

async function leader(c) {
  return (await c.leaderOf(0)).node;
}

// Writers on fresh streams under prefix, started, and the group's leader.
async function begin(c, prefix) {
  const w = new Writers(c, prefix);
  await w.create();
  const l = await leader(c);
  w.start();
  await sleep(1000);
  return { w, l };
}

describe("a full disk in a three-node cluster", { skip: SKIP }, () => {
  let c;
  before(() => {
    c = startCluster(3);
  });
  afterEach(async () => {
    for (const w of running) await w.finish(); /* a failed test's writers fill no disk */
  });

  test("a full follower: writes go on, it says why it is not ready, then catches up", async () => {
    const { w, l } = await begin(c, "follower/s");
    const f = l === 1 ? 2 : 1;
    fill(c, f);
    const before = w.ackedCount();
    await waitFor("the full follower to say why it is not ready", async () => /below the reserve/.test(await ready(c, f)), 10000);
    await waitFor(`writes go on through the others (from ${before})`, () => w.ackedCount() > before + 20, 10000);
    assert.ok([1, 2, 3].every((n) => c.alive(n)), "no process exits");
    unfill(c, f);
    await waitFor("the follower to be ready again", () => isReady(c, f), 30000);
    await w.finish();
    await w.verify();
  });

  test("a full leader: refuses its writes typed, hands its leadership over, writes go on", async () => {
    const { w, l } = await begin(c, "leader/s");
    fill(c, l);
    const before = w.ackedCount();
    const moved = await waitFor("the leadership to move", async () => {
      const now = await leader(c);
      return now !== l ? now : null;
    }, 10000);
    assert.notEqual(moved, l);
    assert.ok(await metric(c, l, 'runnel_cluster_health_transfers_total{reason="disk_full"}') >= 1, "counted as a hand-over for a full disk");
    const direct = await req(`${c.url(l)}/v1/stream/leader/s0`, { method: "POST", headers: { "content-type": "text/plain", "runnel-no-forward": "1" }, body: "x" });
    assert.equal(direct.status, 307, "the former leader redirects");
    await waitFor(`writes go on (from ${before})`, () => w.ackedCount() > before + 20, 10000);
    assert.match(await ready(c, l), /below the reserve/);
    const fresh = await req(`${c.url(l)}/v1/stream/leader/s0?offset=-1`);
    assert.equal(code(fresh), "APPLY_STOPPED", "a read that must see every write cannot be served by a node whose log waits");
    const read = await req(`${c.url(l)}/v1/stream/leader/s0?offset=-1&consistency=local`);
    assert.equal(read.status, 200, "local reads of what it applied keep working on the full node");
    assert.ok([1, 2, 3].every((n) => c.alive(n)), "no process exits");
    unfill(c, l);
    await waitFor("the former leader to be ready again", () => isReady(c, l), 30000);
    await w.finish();
    assert.ok(!w.codes["503 OUTCOME_UNKNOWN"] || w.codes["503 OUTCOME_UNKNOWN"] < 20, `few outcomes unknown: ${JSON.stringify(w.codes)}`);
    await w.verify();
  });

  test("a follower that stops applying serves what it applied and resumes", async () => {
    const { w, l } = await begin(c, "stopped/s");
    const f = l === 3 ? 2 : 3;
    assert.equal((await hook(c, f, "point=apply-reserve&n=1000000&errno=ENOSPC")).status, 204);
    await waitFor("the follower to say it stopped applying", async () => /stopped applying at entry \d+: stream [0-9a-f]+'s data cannot be stored \(No space left on device\)/.test(await ready(c, f)), 10000);
    await sleep(2000);
    assert.equal(await metric(c, f, 'runnel_cluster_apply_stopped{group="0"}'), 1);
    const report = (await c.report(f)).groups[0];
    const mine = report.replicas.find((x) => x.node === f).applied_index;
    assert.ok(mine < report.commit_index, `its applied index (${mine}) lags the commit index (${report.commit_index})`);
    for (let k = 0; k < w.streams; k++) {
      const fresh = await req(`${w.url(f, k)}?offset=-1`);
      assert.equal(fresh.status, 503, "a read that must see every acknowledged write cannot be served");
      assert.equal(code(fresh), "APPLY_STOPPED");
      assert.ok(fresh.headers.get("retry-after"));
      const here = (await readAll(w.url(f, k), "consistency=local")).body; /* what it applied */
      const there = (await readAll(w.url(l, k))).body;
      assert.ok(here.length < there.length && there.subarray(0, here.length).equals(here), `stream ${k}: what it serves is an older prefix`);
    }
    assert.match(c.log(f), /cluster_apply_stopped: group 0: applying stopped at committed entry/);
    assert.equal((await hook(c, f, "point=apply-reserve&n=0")).status, 204);
    await waitFor("the follower to apply again", () => isReady(c, f), 30000);
    assert.match(c.log(f), /cluster_apply_resumed: group 0: applying resumed/);
    await w.finish();
    await w.verify();
  });

  test("a follower restarted on a full disk starts, reports, and catches up", async () => {
    const { w, l } = await begin(c, "restart/s");
    const f = l === 1 ? 3 : 1;
    await waitFor("the reserve file", () => fs.existsSync(path.join(c.dir, `node-${f}`, "reserve")), 10000);
    fill(c, f);
    await c.crash(f);
    fill(c, f); /* what the start freed: the reserve file's size is all it has */
    await c.restart(f);
    assert.match(c.log(f), /released .*reserve for the start/);
    await sleep(3000);
    assert.ok(c.alive(f), "it keeps running on the full disk");
    assert.match(await ready(c, f), /below the reserve/);
    unfill(c, f);
    await waitFor("the restarted follower to be ready", () => isReady(c, f), 30000);
    await w.finish();
    await w.verify();
  });
});

describe("a single-node cluster (no one to hand over to)", { skip: SKIP }, () => {
  let c;
  const post = (body, headers = {}) => req(`${c.url(1)}/v1/stream/one/s`, { method: "POST", headers: { "content-type": "text/plain", ...headers }, body });

  before(() => {
    c = startCluster(1);
  });

  test("a full disk: writes 503 WAL_DISK_PRESSURE before the body, reads go on", async () => {
    assert.equal((await req(`${c.url(1)}/v1/stream/one/s`, { method: "PUT", headers: { "content-type": "text/plain" }, body: "a;" })).status, 201);
    fill(c, 1);
    await waitFor("the node to see its disk full", async () => /below the reserve/.test(await ready(c, 1)), 5000);
    const r = await post("b;");
    assert.equal(r.status, 503);
    assert.equal(code(r), "WAL_DISK_PRESSURE");
    assert.ok(r.headers.get("retry-after"));
    assert.equal(r.headers.get("x-ursula-raft-group"), "0");
    assert.equal((await req(`${c.url(1)}/v1/stream/one/s?offset=-1`)).text, "a;");
    unfill(c, 1);
    await waitFor("writes to be taken again", async () => (await post("c;")).status === 204, 10000);
    assert.equal((await req(`${c.url(1)}/v1/stream/one/s?offset=-1`)).text, "a;c;");
  });

  test("applying stopped: 503 APPLY_STOPPED, reads of what it applied, then the kept entry applies", async () => {
    assert.equal((await hook(c, 1, "point=apply-reserve&n=1000000&errno=ENOSPC")).status, 204);
    const kept = await post("d;");
    assert.equal(kept.status, 503);
    assert.equal(code(kept), "OUTCOME_UNKNOWN", "committed, kept unapplied: its outcome is not known here yet");
    const r = await post("e;");
    assert.equal(r.status, 503);
    assert.equal(code(r), "APPLY_STOPPED");
    assert.ok(r.headers.get("retry-after"));
    const fresh = await req(`${c.url(1)}/v1/stream/one/s?offset=-1`);
    assert.equal(code(fresh), "APPLY_STOPPED", "a read that must see every write cannot be served");
    assert.equal((await req(`${c.url(1)}/v1/stream/one/s?offset=-1&consistency=local`)).text, "a;c;", "a local read serves what it applied");
    assert.match(await ready(c, 1), /stopped applying/);
    assert.equal((await c.report(1)).groups[0].leader, 1, "it still leads: no one to hand over to");
    assert.equal((await hook(c, 1, "point=apply-reserve&n=0")).status, 204);
    await waitFor("the node to apply again", () => isReady(c, 1), 10000);
    assert.equal((await req(`${c.url(1)}/v1/stream/one/s?offset=-1`)).text, "a;c;d;", "the kept entry applied, the refused one not");
    assert.equal((await post("f;")).status, 204);
  });
});

const BLKIO = fs.existsSync("/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device");
describe("a slow disk", { skip: SKIP || (BLKIO ? false : "no cgroup v1 blkio hierarchy to throttle a disk") }, () => {
  let c;
  before(() => {
    c = startCluster(3, { ext4: true, args: ["--log-stall-ms", "1000"] });
  });

  test("a slow leader: leadership moves within the bound, readyz says why", async (t) => {
    const { w, l } = await begin(c, "slow/s");
    throttle(c, l, 4096);
    const t0 = Date.now();
    const moved = await waitFor("the leadership to move", async () => {
      const now = await leader(c);
      return now !== l ? now : null;
    }, 15000);
    const took = Date.now() - t0;
    assert.notEqual(moved, l);
    assert.ok(took < 10000, `moved in ${took} ms`);
    t.diagnostic(`the leadership moved ${took} ms after the throttle (--log-stall-ms 1000)`);
    assert.ok(await metric(c, l, 'runnel_cluster_health_transfers_total{reason="log_stalled"}') >= 1, "counted as a stalled log");
    assert.match(c.log(l), /cluster_transfer: group 0: handing the leadership to node \d \(log_stalled\)/);
    await waitFor("the slow node to say why it is not ready", async () => /a log write has waited \d+ ms/.test(await ready(c, l)), 10000);
    const before = w.ackedCount();
    await waitFor(`writes go on (from ${before})`, () => w.ackedCount() > before + 20, 10000);
    throttle(c, l, 0);
    await waitFor("the formerly slow node to be ready", () => isReady(c, l), 60000);
    await w.finish();
    await w.verify();
  });
});
