// Issue 26's targets, measured by hand on a quiet machine (not a test: it
// asserts nothing). The server binary is RUNNEL_BIN (default build/runnel).
//
//   node bench/placement.mjs bytes [--nodes 3] [--mib 64] [--groups 16]
//     A cluster of --nodes nodes with --replicas 3; appends --mib MiB in
//     64 KiB writes spread over 64 streams (through the streams' leaders,
//     8 writes in flight), waits until every replica applied everything,
//     and prints each node's data directory size and the mean. Run it with
//     --nodes 3 and --nodes 6: the target is half the bytes per node on 6.
//
//   node bench/placement.mjs cpu [--nodes 3] [--appends 20000] [--groups 16]
//     The same cluster; --appends appends of 256 B (16 in flight), and the
//     CPU time (user + system, from /proc/PID/stat) each node spent during
//     them, divided by the appends: CPU per append per node, and its sum
//     over the nodes. The target: per-node CPU per append does not grow
//     from 3 to 6 nodes.
//
//   node bench/placement.mjs join [--seconds 20] [--rate 200] [--mib 64] [--groups 16]
//     6 nodes with --replicas 3 and --mib MiB of history; 16 writers append
//     256 B at --rate appends/s in all, for --seconds (the p99 before), then
//     node 7 joins (`runnel cluster add`) and the same load runs until no
//     group moves (the p99 during the join; the moves' bytes paced by
//     --move-rate-bytes, the default unless RUNNEL_MOVE_RATE is set). The
//     target: p99 during the join at most 2x the p99 before.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { BIN, Cluster, follow, keysPerGroup, sleep, waitFor } from "../tests/cluster/runnel_cluster.mjs";

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    nodes: { type: "string", default: "3" },
    mib: { type: "string", default: "64" },
    groups: { type: "string", default: "16" },
    appends: { type: "string", default: "20000" },
    seconds: { type: "string", default: "20" },
    rate: { type: "string", default: "200" },
  },
});
const GROUPS = Number(values.groups);
const moveRate = process.env.RUNNEL_MOVE_RATE ? ["--move-rate-bytes", process.env.RUNNEL_MOVE_RATE] : [];

function quantile(sorted, q) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : NaN;
}

function duBytes(dir) {
  return Number(execFileSync("du", ["-sb", dir], { encoding: "utf8" }).split("\t")[0]);
}

// user + system CPU of a process, in ms
function cpuMs(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; /* clock ticks of 10 ms */
}

// Runs `total` appends of `body` over keys with `inflight` at once, each
// through any node (a redirect or forward takes it to the leader).
// Returns the acknowledged appends and the other answers by status.
async function appendMany(c, keys, total, body, inflight) {
  let next = 0, acked = 0;
  const refused = {};
  const worker = async (w) => {
    for (let i = next++; i < total; i = next++) {
      const via = 1 + ((i + w) % c.nodes);
      let r;
      try {
        r = await follow(`${c.url(via)}/${keys[i % keys.length]}`, { method: "POST", headers: { "content-type": "application/octet-stream" }, body, timeoutMs: 15000 });
      } catch (e) {
        r = { status: e.name ?? "error", text: "" };
      }
      if (r.status === 204) acked++;
      else {
        const key = `${r.status} ${/"code":"([A-Z_]+)"/.exec(r.text ?? "")?.[1] ?? ""}`.trim();
        refused[key] = (refused[key] ?? 0) + 1;
      }
    }
  };
  await Promise.all(Array.from({ length: inflight }, (_, w) => worker(w)));
  return { acked, refused };
}

async function makeStreams(c, prefix, n) {
  const keys = keysPerGroup(prefix, GROUPS).concat(Array.from({ length: Math.max(0, n - GROUPS) }, (_, i) => `${prefix}-x${i}`));
  for (const key of keys) {
    const r = await follow(`${c.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "application/octet-stream" } });
    if (r.status !== 201) throw new Error(`create ${key}: ${r.status} ${r.text}`);
  }
  return keys;
}

async function bytes() {
  const nodes = Number(values.nodes);
  const c = await Cluster.start({ nodes, groups: GROUPS, replicas: 3, args: moveRate });
  try {
    const keys = await makeStreams(c, "fill/s", 64);
    const piece = Buffer.alloc(65536, 0x61);
    const { acked, refused } = await appendMany(c, keys, Number(values.mib) * 16, piece, 8);
    await c.converged(120000);
    const sizes = [];
    for (let n = 1; n <= nodes; n++) sizes.push(duBytes(path.join(c.dir, `node-${n}`)));
    console.log(`${nodes} nodes, ${(acked * piece.length) / 1048576} MiB acknowledged (other answers: ${JSON.stringify(refused)}): bytes per node ${sizes.join(" ")}; mean ${Math.round(sizes.reduce((a, b) => a + b, 0) / nodes)}`);
  } finally {
    c.stop();
  }
}

async function cpu() {
  const nodes = Number(values.nodes);
  const c = await Cluster.start({ nodes, groups: GROUPS, replicas: 3 });
  try {
    const keys = await makeStreams(c, "work/s", 64);
    const total = Number(values.appends);
    const before = Array.from({ length: nodes }, (_, i) => cpuMs(c.pid(i + 1)));
    const started = Date.now();
    const { acked, refused } = await appendMany(c, keys, total, Buffer.alloc(256, 0x62), 16);
    if (acked !== total) console.log(`${total - acked} appends not acknowledged: ${JSON.stringify(refused)}`);
    const secs = (Date.now() - started) / 1000;
    const used = Array.from({ length: nodes }, (_, i) => cpuMs(c.pid(i + 1)) - before[i]);
    const per = used.map((ms) => ((ms * 1000) / total).toFixed(1));
    console.log(`${nodes} nodes, ${total} appends in ${secs.toFixed(1)} s: CPU per append per node (us) ${per.join(" ")}; sum ${((used.reduce((a, b) => a + b, 0) * 1000) / total).toFixed(1)} us`);
  } finally {
    c.stop();
  }
}

// Appends at `rate`/s in all over keys until stop() and records latencies.
function paced(c, keys, rate) {
  let on = true;
  const lat = [];
  const writers = 16;
  const done = Promise.all(Array.from({ length: writers }, async (_, w) => {
    const every = (1000 * writers) / rate;
    for (let i = 0; on; i++) {
      const t0 = Date.now();
      try {
        const r = await follow(`${c.url(1 + ((i + w) % c.nodes))}/${keys[w % keys.length]}`, { method: "POST", headers: { "content-type": "application/octet-stream" }, body: Buffer.alloc(256, 0x63), timeoutMs: 15000 });
        if (r.status === 204) lat.push(Date.now() - t0);
      } catch {}
      await sleep(Math.max(0, every - (Date.now() - t0)));
    }
  }));
  return { lat, async stop() { on = false; await done; return lat.sort((a, b) => a - b); } };
}

async function join() {
  const c = await Cluster.start({ nodes: 6, groups: GROUPS, replicas: 3, args: moveRate });
  try {
    const keys = await makeStreams(c, "join/s", 64);
    await appendMany(c, keys, Number(values.mib) * 16, Buffer.alloc(65536, 0x61), 8);
    await c.converged(120000);
    let load = paced(c, keys, Number(values.rate));
    await sleep(Number(values.seconds) * 1000);
    const before = await load.stop();
    load = paced(c, keys, Number(values.rate));
    const seven = await c.addNode(7, moveRate);
    const token = c.admin.authorization?.slice(7) ?? "";
    execFileSync(BIN, ["cluster", "-q", "--url", c.url(1), "--token", token, "add", "7", seven.raft, seven.url], { timeout: 20000 });
    const started = Date.now();
    await waitFor("the join's moves", async () => {
      const r = await c.report(1);
      return r.moves.length === 0 && r.nodes.find((n) => n.id === 7)?.replicas > 0;
    }, 600000, 500);
    const during = await load.stop();
    const p99b = quantile(before, 0.99), p99d = quantile(during, 0.99);
    console.log(`p99 before ${p99b} ms (${before.length} appends), during the join ${p99d} ms (${during.length} appends, ${((Date.now() - started) / 1000).toFixed(1)} s of moves): ${(p99d / p99b).toFixed(2)}x`);
  } finally {
    c.stop();
  }
}

const modes = { bytes, cpu, join };
if (!modes[positionals[0]]) {
  console.error("usage: node bench/placement.mjs bytes|cpu|join [options] (see the file's head)");
  process.exit(2);
}
await modes[positionals[0]]();
