// The service's figures for BENCHMARKS.md (not a test: it asserts nothing):
// what the gateway, the cluster's peer authentication and write forwarding
// cost, each measured against the same load without it, in alternating
// rounds (A B A B ...), medians of --rounds rounds. Every server runs on
// this machine with its data in a fresh directory; the load generator is
// runnel-bench. Server CPU per request is read from /proc (utime + stime of
// every server process of the configuration) over the measured run.
//
//   node bench/service.mjs gateway [--rounds 3] [--seconds 10] [--no-wait]
//     500 writers x 256 B appends: a lone node; the same through a
//     standalone gateway (API key); through the embedded gate (serve
//     --tenants). Then 1,000 SSE subscribers at 50 events/s, direct and
//     through the standalone gateway.
//   node bench/service.mjs cluster-auth [--rounds 3] [--seconds 10]
//     3-node clusters, 500 writers x 256 B through the leaders
//     (--follow-leaders): without peer authentication, with the cluster
//     key (scripts/cluster.sh's default) and with mutual TLS.
//   node bench/service.mjs forwarding [--rounds 3] [--seconds 10]
//     One 3-node cluster: 500 writers through the leaders, against the
//     same through node 1 (writes of the groups it does not lead forwarded).
//
// The server binary is RUNNEL_BIN (default build/runnel), the load
// generator RUNNEL_BENCH (default build/bench/runnel-bench). Each round
// waits for a 1-minute load average below 1 (at most 20 minutes; --no-wait:
// not at all, for a check of the script), and the report gives the load
// seen before and after each run: figures of a busy machine say so.
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { Cluster } from "../tests/cluster/runnel_cluster.mjs";

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
const BIN = process.env.RUNNEL_BIN || path.join(ROOT, "build/runnel");
const BENCH = process.env.RUNNEL_BENCH || path.join(ROOT, "build/bench/runnel-bench");
const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: "string", default: "3" },
    seconds: { type: "string", default: "10" },
    "no-wait": { type: "boolean", default: false },
  },
});
const ROUNDS = Number(values.rounds);
const SECONDS = values.seconds;
const TICK = 100; // clock ticks per second (sysconf(_SC_CLK_TCK) on Linux)

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const load1 = () => Number(fs.readFileSync("/proc/loadavg", "utf8").split(" ")[0]);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];

async function waitQuiet() {
  if (values["no-wait"]) return;
  const end = Date.now() + 20 * 60 * 1000;
  while (load1() >= 1 && Date.now() < end) await sleep(15000);
}

function cpuTicks(pids) {
  let t = 0;
  for (const pid of pids) {
    const f = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const rest = f.slice(f.lastIndexOf(")") + 2).split(" ");
    t += Number(rest[11]) + Number(rest[12]); // utime, stime
  }
  return t;
}

async function freePort() {
  const net = await import("node:net");
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// A process of ours, stopped at the end.
function start(args, env = {}) {
  const p = spawn(BIN, args, { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, ...env } });
  let log = "";
  p.stderr.on("data", (d) => (log += d));
  p.log = () => log;
  return p;
}

async function ready(url) {
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${url}/__runnel/readyz`)).status === 200) return;
    } catch {}
    await sleep(50);
  }
  throw new Error(`${url} not ready`);
}

// One runnel-bench run against base with args; the server processes' CPU
// over it. Returns the report with cpu_ms and load before/after.
function bench(base, args, pids) {
  const loadBefore = load1();
  const before = cpuTicks(pids);
  const out = execFileSync(BENCH, [...args, "--base", base, "--duration", SECONDS, "--json"],
    { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"], timeout: 600000 });
  const r = JSON.parse(out);
  r.cpu_ms = ((cpuTicks(pids) - before) * 1000) / TICK;
  r.load = [loadBefore, load1()];
  return r;
}

function row(name, runs, kind) {
  const loads = runs.flatMap((r) => r.load);
  const l = `load ${Math.min(...loads).toFixed(2)}-${Math.max(...loads).toFixed(2)}`;
  if (kind === "writes") {
    const rate = median(runs.map((r) => r.appends_per_s));
    const p99 = median(runs.map((r) => r.append_latency.p99_us / 1000));
    const cpu = median(runs.map((r) => (r.cpu_ms * 1000) / r.appends));
    return `| ${name} | ${rate.toFixed(0)} appends/s | p99 ${p99.toFixed(1)} ms | ${cpu.toFixed(1)} µs CPU/append | ${l} |`;
  }
  const p50 = median(runs.map((r) => r.delivery_latency.p50_us / 1000));
  const p99 = median(runs.map((r) => r.delivery_latency.p99_us / 1000));
  const lost = runs.reduce((s, r) => s + (r.expected - r.delivered), 0);
  const cpu = median(runs.map((r) => (r.cpu_ms * 1000) / Math.max(1, r.delivered)));
  return `| ${name} | delivery p50 ${p50.toFixed(1)} ms | p99 ${p99.toFixed(1)} ms | ${cpu.toFixed(2)} µs CPU/delivery, ${lost} not delivered | ${l} |`;
}

// Runs each configuration's measure once per round, alternating, after a
// quiet wait; returns runs per configuration name.
async function alternate(configs) {
  const runs = Object.fromEntries(configs.map((c) => [c.name, []]));
  for (let round = 0; round < ROUNDS; round++)
    for (const c of configs) {
      await waitQuiet();
      runs[c.name].push(await c.measure());
      console.error(`round ${round + 1}: ${c.name} done`);
    }
  return runs;
}

async function gateway() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "runnel-bench-gw-"));
  const tenants = path.join(dir, "tenants.json");
  const key = execFileSync(BIN, ["gateway", "key", "new", "--tenant", "bench", "--buckets", "bench:rw", "--tenants", tenants], { encoding: "utf8" }).trim();
  const auth = ["--header", `Authorization: Bearer ${key}`];
  const nodePort = await freePort(), gwPort = await freePort(), embPort = await freePort();
  const node = start(["serve", "--data-dir", path.join(dir, "node"), "--listen", `127.0.0.1:${nodePort}`, "--max-connections", "4096"]);
  const emb = start(["serve", "--data-dir", path.join(dir, "emb"), "--listen", `127.0.0.1:${embPort}`, "--tenants", tenants, "--max-connections", "4096"]);
  const nodeUrl = `http://127.0.0.1:${nodePort}`, gwUrl = `http://127.0.0.1:${gwPort}`, embUrl = `http://127.0.0.1:${embPort}`;
  await ready(nodeUrl);
  await ready(embUrl);
  const gw = start(["gateway", "--listen", `127.0.0.1:${gwPort}`, "--upstream", nodeUrl, "--tenants", tenants, "--max-connections", "4096"]);
  await ready(gwUrl);
  const writes = ["writes", "--surface", "bucket", "--streams", "500", "--payload", "256"];
  const fanout = ["fanout", "--surface", "bucket", "--subscribers", "1000", "--rate", "50", "--payload", "64"];
  try {
    const w = await alternate([
      { name: "a lone node", measure: () => bench(nodeUrl, writes, [node.pid]) },
      { name: "through the standalone gateway", measure: () => bench(gwUrl, [...writes, ...auth], [node.pid, gw.pid]) },
      { name: "through the embedded gate", measure: () => bench(embUrl, [...writes, ...auth], [emb.pid]) },
    ]);
    const f = await alternate([
      { name: "SSE fan-out, a lone node", measure: () => bench(nodeUrl, fanout, [node.pid]) },
      { name: "SSE fan-out through the gateway", measure: () => bench(gwUrl, [...fanout, ...auth], [node.pid, gw.pid]) },
    ]);
    console.log("| configuration | throughput | latency | cost | machine |\n|---|---|---|---|---|");
    for (const [name, runs] of Object.entries(w)) console.log(row(name, runs, "writes"));
    for (const [name, runs] of Object.entries(f)) console.log(row(name, runs, "fanout"));
  } finally {
    for (const p of [gw, node, emb]) p.kill("SIGTERM");
  }
}

async function clusterAuth() {
  const pki = fs.mkdtempSync(path.join(os.tmpdir(), "runnel-bench-pki-"));
  execFileSync("bash", [path.join(ROOT, "tests/lib/test_pki.sh"), pki], { stdio: "ignore" });
  const writes = ["writes", "--surface", "bucket", "--streams", "500", "--payload", "256", "--follow-leaders"];
  const kinds = [
    { name: "no peer authentication (--insecure)", opts: { insecure: true } },
    { name: "the cluster key", opts: {} },
    { name: "mutual TLS (peer listeners)", opts: { peerTls: pki, peerListen: true } },
  ];
  const configs = kinds.map((k) => ({
    name: k.name,
    measure: async () => {
      const c = await Cluster.start({ groups: 16, ...k.opts });
      try {
        return bench(c.url(1), writes, [1, 2, 3].map((n) => c.pid(n)));
      } finally {
        c.stop();
      }
    },
  }));
  const runs = await alternate(configs);
  console.log("| 3-node cluster, writes through the leaders | throughput | latency | cost | machine |\n|---|---|---|---|---|");
  for (const [name, r] of Object.entries(runs)) console.log(row(name, r, "writes"));
}

async function forwarding() {
  const c = await Cluster.start({ groups: 16 });
  const writes = ["writes", "--surface", "bucket", "--streams", "500", "--payload", "256"];
  const pids = [1, 2, 3].map((n) => c.pid(n));
  try {
    const runs = await alternate([
      { name: "to each stream's leader (--follow-leaders)", measure: () => bench(c.url(1), [...writes, "--follow-leaders"], pids) },
      { name: "all through node 1 (others' groups forwarded)", measure: () => bench(c.url(1), writes, pids) },
    ]);
    console.log("| 3-node cluster, 500 writers | throughput | latency | cost | machine |\n|---|---|---|---|---|");
    for (const [name, r] of Object.entries(runs)) console.log(row(name, r, "writes"));
  } finally {
    c.stop();
  }
}

const modes = { gateway, "cluster-auth": clusterAuth, forwarding };
if (!modes[positionals[0]]) {
  console.error("usage: node bench/service.mjs gateway|cluster-auth|forwarding [--rounds N] [--seconds S]");
  process.exit(2);
}
await modes[positionals[0]]();
