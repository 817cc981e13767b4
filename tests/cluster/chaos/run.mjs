// The chaos harness's entry point (root only):
//
//   node tests/cluster/chaos/run.mjs --bin build/runnel --schedule short|long [--seed N]
//     [--faults N] [--groups G] [--election-timeout-ms T] [--write-rate N] [--read-rate N]
//     [--history FILE] [--keep]
//
// The outer process builds the network namespaces (netns.mjs), runs the
// inner process inside the client's namespace, and tears everything down
// when it ends, fails, is interrupted or overruns its schedule. The inner
// process starts the 3-node cluster (cluster.mjs), runs the workload
// (workload.mjs) and the nemesis (nemesis.mjs), heals, waits for the
// replicas to converge, reads the final state (final_state.mjs), checks the
// history (checker.mjs) and prints one line per property, the figures and
// "N passed, M failed". Exit status 0 only when every property holds.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { check } from "./checker.mjs";
import { ChaosCluster } from "./cluster.mjs";
import { figures, formatFigures } from "./figures.mjs";
import { collectFinalState } from "./final_state.mjs";
import { History, seconds } from "./history.mjs";
import { LeaderMonitor, Nemesis, SCHEDULES } from "./nemesis.mjs";
import { cleanupStale, createTopology, spawnIn, teardown, topologyFor } from "./netns.mjs";
import { Rng, sleep } from "./rng.mjs";
import { tempDir } from "../../lib/server.mjs";
import { Workload } from "./workload.mjs";

const NODES = 3;
const SPARES = 1; /* a namespace for the node a membership fault adds */
const OPTIONS = {
  bin: { type: "string" },
  schedule: { type: "string", default: "short" },
  seed: { type: "string" },
  faults: { type: "string" },
  groups: { type: "string", default: "8" },
  "election-timeout-ms": { type: "string", default: "1000" },
  "write-rate": { type: "string", default: "150" },
  "read-rate": { type: "string", default: "50" },
  history: { type: "string" },
  keep: { type: "boolean", default: false },
  inner: { type: "boolean", default: false },
  tag: { type: "string" },
  dir: { type: "string" },
};

// Removes the data directories (runnel-chaos-<pid>-*) of runs whose outer
// process is gone without cleaning up (killed); returns their names.
const DIR_PREFIX = "runnel-chaos-";
function removeStaleDirs() {
  const removed = [];
  for (const name of fs.readdirSync(os.tmpdir())) {
    const m = new RegExp(`^${DIR_PREFIX}([0-9]+)-`).exec(name);
    if (m && !fs.existsSync(`/proc/${m[1]}`)) {
      fs.rmSync(path.join(os.tmpdir(), name), { recursive: true, force: true });
      removed.push(name);
    }
  }
  return removed;
}

// Ends the run without checking anything: the reason, then the summary.
function abort(reason) {
  console.log(`chaos: ${reason}`);
  console.log("0 passed, 1 failed");
  process.exit(1);
}

function outer(opts) {
  if (!opts.bin) abort("--bin PATH is required");
  const schedule = SCHEDULES[opts.schedule];
  if (!schedule) abort(`--schedule must be one of ${Object.keys(SCHEDULES).join(", ")}`);
  for (const k of ["seed", "faults", "groups", "election-timeout-ms", "write-rate", "read-rate"])
    if (opts[k] !== undefined && (!/^[0-9]+$/.test(opts[k]) || (k !== "seed" && Number(opts[k]) === 0)))
      abort(`--${k} must be a ${k === "seed" ? "non-negative" : "positive"} integer, not ${opts[k]}`);
  const bin = path.resolve(opts.bin);
  try {
    fs.accessSync(bin, fs.constants.X_OK);
  } catch {
    abort(`no executable runnel at ${bin}`);
  }
  if (process.getuid?.() !== 0) abort("needs root (network namespaces, blackhole routes)");
  const stale = [...cleanupStale(), ...removeStaleDirs()];
  if (stale.length) console.log(`chaos: removed what earlier runs left: ${stale.join(", ")}`);
  const seed = opts.seed ?? String(Math.floor(Math.random() * 2 ** 31));
  const topo = topologyFor(NODES + SPARES);
  try {
    createTopology(topo);
  } catch (err) {
    abort(err.message);
  }
  const dir = tempDir(`${DIR_PREFIX}${process.pid}-`, { keep: true });
  let cleaned = false;
  const cleanup = () => {
    if (cleaned) return;
    cleaned = true;
    const left = teardown(topo);
    if (left.namespaces.length) console.log(`chaos: teardown left ${left.namespaces.join(", ")} (pids ${left.pids.join(", ")})`);
    if (opts.keep) console.log(`chaos: data and logs kept in ${dir}`);
    else fs.rmSync(dir, { recursive: true, force: true });
  };
  process.on("exit", cleanup);
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    process.on(sig, () => {
      console.log(`chaos: ${sig}: tearing down`);
      cleanup();
      process.exit(130);
    });
  }
  if (opts.history) opts.history = path.resolve(opts.history);
  const pass = ["schedule", "groups", "election-timeout-ms", "write-rate", "read-rate", "faults", "history"]
    .flatMap((k) => (opts[k] === undefined ? [] : [`--${k}`, opts[k]]));
  // the history and every replica's copy are held in memory: room for a long run
  const child = spawnIn(topo.client.ns, process.execPath,
    ["--max-old-space-size=6144", fileURLToPath(import.meta.url), "--inner", "--bin", bin, "--seed", seed, "--tag", topo.tag, "--dir", dir, ...pass],
    { stdio: "inherit" });
  const limit = setTimeout(() => {
    console.log(`chaos: the run overran ${schedule.maxMinutes} minutes: stopping it`);
    child.kill("SIGKILL");
  }, schedule.maxMinutes * 60000);
  child.on("exit", (code, signal) => {
    clearTimeout(limit);
    cleanup();
    if (code === null) abort(`the run was ended by ${signal}`);
    process.exit(code);
  });
}

async function inner(opts) {
  const seed = Number(opts.seed);
  const schedule = { ...SCHEDULES[opts.schedule] };
  if (opts.faults) schedule.faults = Number(opts.faults);
  const groups = Number(opts.groups);
  const electionTimeoutMs = Number(opts["election-timeout-ms"]);
  const topo = topologyFor(NODES + SPARES, opts.tag);
  const history = new History();
  const rng = new Rng(seed);
  const log = (line) => console.log(`[${seconds(history.now()).padStart(9)} s] ${line}`);
  console.log(`chaos: schedule ${opts.schedule} (${schedule.faults} faults), seed ${seed}, ${NODES} nodes, ${groups} groups, ` +
    `election timeout ${electionTimeoutMs} ms, binary ${opts.bin}`);
  const cluster = new ChaosCluster({ bin: opts.bin, topo, dir: opts.dir, groups, electionTimeoutMs, clusterId: `chaos-${seed}`, count: NODES });
  const stopAndAbort = async (reason) => {
    await cluster.shutdown(5000);
    abort(reason);
  };
  try {
    await cluster.start();
  } catch (err) {
    return stopAndAbort(`the cluster did not start: ${err.message}`);
  }
  log(`cluster up: ${cluster.nodes.map((n) => n.url).join(" ")}`);
  const nodes = cluster.clientNodes; /* the members, kept current as nodes join and leave */
  const workload = new Workload({ history, nodes, rng: rng.fork(), writeRate: Number(opts["write-rate"]), readRate: Number(opts["read-rate"]) });
  try {
    await workload.setup();
    await workload.waitReplicas();
  } catch (err) {
    return stopAndAbort(`setup: ${err.message}`);
  }
  const monitor = new LeaderMonitor(cluster);
  monitor.start();
  workload.start();
  await sleep(2000);
  const nemesis = new Nemesis({ cluster, topo, history, rng: rng.fork(), electionTimeoutMs, hotGroups: workload.groupsSeen, log });
  const started = Date.now();
  await nemesis.run({ ...schedule, deadline: started + schedule.maxMinutes * 60000 * 0.8 });
  await nemesis.healAll();
  log(`healed; ${history.events.length} faults injected; writing on for 5 s`);
  await sleep(5000);
  await workload.stop(60000);
  await monitor.stop();
  log("workload stopped; waiting for the replicas to converge");
  const conv = await cluster.waitConverged(120000);
  const attempts = new Map();
  for (const e of history.entries) if (e.t === "pwrite" || e.t === "append") attempts.set(e.s, (attempts.get(e.s) ?? 0) + 1);
  const final = await collectFinalState({ nodes, streams: workload.streams, path: (s) => workload.bucketPath(s), token0: workload.token0,
    converged: conv.ok, note: conv.note, maxSteps: (s) => 2 * (attempts.get(s) ?? 0) + 100 });
  log("final state read; checking");
  if (opts.history) history.save(opts.history);
  const results = check(history, final);
  results.push({
    name: "every fault healed (killed nodes restarted on their data, or replaced)",
    ok: !nemesis.failure, checked: history.events.length, failures: nemesis.failure ? 1 : 0, messages: nemesis.failure ? [nemesis.failure] : [],
  });
  const exits = await cluster.shutdown();
  const badExits = [
    ...cluster.unasked.map((x) => `node ${x.id} exited by itself (${x.signal ?? "status " + x.code}); its log ends:\n${x.log}`),
    ...[...cluster.retired, ...exits].filter((x) => x.code !== 0).map((x) => `node ${x.id} answered SIGTERM with ${x.signal ?? "status " + x.code}; its log ends:\n${x.log}`),
  ];
  results.push({
    name: "nodes exit only when killed, and with status 0 on SIGTERM", ok: badExits.length === 0,
    checked: cluster.nodes.reduce((t, n) => t + n.exits.length, cluster.retired.length), failures: badExits.length, messages: badExits,
  });
  const f = figures(history, { leaderChanges: monitor.changes, durationMs: Date.now() - started });
  const known = [];
  for (const r of results) {
    console.log(`${r.ok ? "ok    " : "FAILED"} ${r.name} (${r.checked} checked${r.ok ? "" : `, ${r.failures} failures`})`);
    for (const m of r.messages) console.log(`         ${m}`);
    for (const k of r.known ?? []) {
      console.log(`KNOWN  ${r.name}: ${k.count} violations of the known bug ${k.issue}`);
      for (const m of k.messages) console.log(`         ${m}`);
      known.push(`${r.name}: ${k.count} violations, known failure of ${k.issue}`);
    }
  }
  for (const line of formatFigures(f)) console.log(`figures: ${line}`);
  if (workload.halted.length) console.log(`figures: clients halted: ${workload.halted.join("; ")}`);
  const failed = results.filter((r) => !r.ok).length;
  // a known bug's violations: counted as skipped checks, listed with their issue
  for (const k of known) console.log(`SKIP ${k}`);
  console.log(`${results.length - failed} passed, ${failed} failed${known.length ? `, ${known.length} skipped` : ""}`);
  process.exit(failed ? 1 : 0);
}

let values;
try {
  ({ values } = parseArgs({ options: OPTIONS, strict: true }));
} catch (err) {
  abort(err.message);
}
if (!values.inner) outer(values);
else {
  try {
    await inner(values);
  } catch (err) {
    abort(`harness error: ${err.stack}`); // the outer process tears down what is left
  }
}
