// The runnel nodes of a chaos run: started inside their network namespaces
// with the cluster contract's flags (docs: cluster_contract.md, "Starting a
// node"), SIGKILLed, SIGSTOPped and resumed, restarted on their data
// directories, asked for /__runnel/cluster, and stopped at the end.
// Every wait is bounded; a node that does not come up fails with its log.
// Each node's data directory is its own tmpfs (DISK_MIB), so that a fault
// can fill one node's disk (fill, unfill) without touching the machine's.
// The mounts are made by the inner harness, inside its network namespace's
// mount namespace: they go with it (logs stay in the run's directory; with
// --keep the data directories' contents are gone).
import { execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { request } from "./http.mjs";
import { spawnIn } from "./netns.mjs";
import { sleep } from "./rng.mjs";

export const PUBLIC_PORT = 4437;
export const RAFT_PORT = 4438;
export const DISK_MIB = 256;


export class ClusterStartError extends Error {}

export class ChaosCluster {
  // topo: netns.mjs topology; dir: data and logs (node-N/, node-N.log).
  constructor({ bin, topo, dir, groups, electionTimeoutMs, clusterId }) {
    Object.assign(this, { bin, topo, dir, groups, electionTimeoutMs, clusterId });
    this.nodes = topo.nodes.map((n) => ({
      id: n.id, ns: n.ns, addr: n.addr,
      url: `http://${n.addr}:${PUBLIC_PORT}`, raft: `${n.addr}:${RAFT_PORT}`,
      dataDir: path.join(dir, `node-${n.id}`), logFile: path.join(dir, `node-${n.id}.log`),
      proc: null, state: "down", exits: [],
    }));
    this.unasked = []; // exits no signal of ours caused: {id, code, signal, log}
  }

  node(id) {
    return this.nodes.find((n) => n.id === id);
  }

  // The cluster key and admin token every node is started with (the
  // cluster runs authenticated, as scripts/cluster.sh's does): written once
  // in dir, mode 600.
  secrets() {
    const files = { key: path.join(this.dir, "cluster.key"), token: path.join(this.dir, "admin.token") };
    for (const f of Object.values(files))
      if (!fs.existsSync(f)) fs.writeFileSync(f, crypto.randomBytes(32).toString("hex"), { mode: 0o600 });
    return files;
  }

  argv(n) {
    const peers = this.nodes.flatMap((p) => ["--peer", `${p.id}=${p.raft},${p.url}`]);
    const { key, token } = this.secrets();
    return ["serve", "--node-id", String(n.id), "--cluster-id", this.clusterId, ...peers,
      "--groups", String(this.groups), "--listen", `${n.addr}:${PUBLIC_PORT}`, "--data-dir", n.dataDir,
      "--election-timeout-ms", String(this.electionTimeoutMs), "--cluster-key-file", key,
      "--admin-token-file", token,
      // the long-polls of /v1/stream/ streams, which take no timeout_ms, end as the others' do
      "--long-poll-timeout-ms", "1000"];
  }

  // Mounts node n's tmpfs data directory (once).
  mountDataDir(n) {
    if (n.mounted) return;
    fs.mkdirSync(n.dataDir, { recursive: true });
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${DISK_MIB}m`, "tmpfs", n.dataDir]);
    n.mounted = true;
  }

  // Fills node id's disk with another program's file (in lost+found, a
  // name the data directory's owner check allows); unfill removes it.
  fill(id) {
    const lf = path.join(this.node(id).dataDir, "lost+found");
    fs.mkdirSync(lf, { recursive: true });
    try {
      execFileSync("dd", ["if=/dev/zero", `of=${path.join(lf, "filler")}`, "bs=1M", `count=${DISK_MIB}`], { stdio: "ignore" });
    } catch {} /* dd stops at ENOSPC */
  }

  unfill(id) {
    fs.rmSync(path.join(this.node(id).dataDir, "lost+found", "filler"), { force: true });
  }

  spawn(n) {
    fs.mkdirSync(this.dir, { recursive: true });
    this.mountDataDir(n);
    const log = fs.openSync(n.logFile, "a");
    fs.writeSync(log, `---- start ${new Date().toISOString()}: ${this.bin} ${this.argv(n).join(" ")}\n`);
    n.proc = spawnIn(n.ns, this.bin, this.argv(n), { stdio: ["ignore", log, log] });
    fs.closeSync(log);
    n.state = "up";
    n.signalled = false; // set when the harness sends SIGKILL or SIGTERM
    const proc = n.proc;
    n.exited = new Promise((resolve) => proc.on("exit", (code, signal) => {
      n.exits.push({ code, signal });
      if (!n.signalled) this.unasked.push({ id: n.id, code, signal, log: this.logTail(n, 8) });
      if (n.proc === proc) n.state = "down";
      resolve({ code, signal });
    }));
  }

  logTail(n, lines = 15) {
    try {
      return fs.readFileSync(n.logFile, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
    } catch {
      return "(no log)";
    }
  }

  // GET /__runnel/cluster on node id: the parsed JSON, or null.
  async status(id, timeoutMs = 1500) {
    const a = await request(`${this.node(id).url}/__runnel/cluster`, { timeoutMs });
    if (a.status !== 200) return null;
    try {
      return JSON.parse(a.body.toString("utf8"));
    } catch {
      return null;
    }
  }

  // Waits until node n answers /__runnel/cluster (bounded); throws a
  // ClusterStartError naming the cause when it exits or answers otherwise.
  async waitAnswering(n, ms) {
    const end = Date.now() + ms;
    let last = "no answer";
    while (Date.now() < end) {
      if (n.state === "down") {
        const { code, signal } = await n.exited;
        throw new ClusterStartError(`node ${n.id} exited (${signal ?? "status " + code}) right after start; ` +
          `does this runnel accept the cluster flags (${this.argv(n).slice(1, 5).join(" ")} ...)? Its log:\n${this.logTail(n)}`);
      }
      const a = await request(`${n.url}/__runnel/cluster`, { timeoutMs: 1000 });
      if (a.status === 200) {
        try {
          const body = JSON.parse(a.body.toString("utf8"));
          if (Array.isArray(body.groups)) return body;
          last = "a JSON body without groups";
        } catch {
          last = "a body that is not JSON";
        }
      } else if (a.status !== null) {
        last = `${a.status} ${a.code ?? ""}`;
      } else {
        last = a.err;
      }
      if (a.status !== null && a.status !== 200 && a.status !== 503)
        throw new ClusterStartError(`node ${n.id}: GET /__runnel/cluster answered ${last}: no cluster mode in this runnel?`);
      await sleep(200);
    }
    throw new ClusterStartError(`node ${n.id} did not answer /__runnel/cluster within ${ms} ms (last: ${last}). Its log:\n${this.logTail(n)}`);
  }

  // Starts every node of a fresh cluster; resolves once every group has a
  // leader that every node knows (bounded).
  async start({ answerMs = 20000, leaderMs = 60000 } = {}) {
    for (const n of this.nodes) this.spawn(n);
    for (const n of this.nodes) await this.waitAnswering(n, answerMs);
    const end = Date.now() + leaderMs;
    let missing = [];
    while (Date.now() < end) {
      const views = await Promise.all(this.nodes.map((n) => this.status(n.id)));
      missing = [];
      for (let g = 0; g < this.groups; g++) {
        const leaders = views.map((v) => v?.groups?.find((x) => x.group === g)?.leader ?? null);
        if (leaders.some((l) => l === null) || new Set(leaders).size !== 1) missing.push(g);
      }
      if (missing.length === 0) return;
      for (const n of this.nodes)
        if (n.state === "down") throw new ClusterStartError(`node ${n.id} exited while groups elected leaders. Its log:\n${this.logTail(n)}`);
      await sleep(250);
    }
    throw new ClusterStartError(`groups ${missing.join(", ")} had no leader that every node knows after ${leaderMs} ms`);
  }

  // The leader and term of each group, by the highest term any node
  // answering reports: Map(group -> {leader, term}).
  async leaders() {
    const views = await Promise.all(this.nodes.filter((n) => n.state === "up").map((n) => this.status(n.id, 1000)));
    const best = new Map();
    for (const v of views) {
      for (const g of v?.groups ?? []) {
        const cur = best.get(g.group);
        if (g.leader !== null && g.leader !== undefined && (!cur || g.term > cur.term)) best.set(g.group, { leader: g.leader, term: g.term });
      }
    }
    return best;
  }

  kill(id) {
    const n = this.node(id);
    if (n.state === "down") return Promise.resolve();
    n.signalled = true;
    n.proc.kill("SIGKILL");
    return Promise.race([n.exited, sleep(10000)]);
  }

  stop(id) {
    const n = this.node(id);
    if (n.state !== "up") return;
    n.proc.kill("SIGSTOP");
    n.state = "stopped";
  }

  resume(id) {
    const n = this.node(id);
    if (n.state !== "stopped") return;
    n.proc.kill("SIGCONT");
    n.state = "up";
  }

  // Restarts killed nodes on their data directories (all processes first:
  // one node alone may have no quorum); resolves once each answers.
  async restart(ids, ms = 30000) {
    const down = ids.map((id) => this.node(id)).filter((n) => n.state === "down");
    for (const n of down) this.spawn(n);
    await Promise.all(down.map((n) => this.waitAnswering(n, ms)));
  }

  // Waits until every group has one leader known to every node and every
  // replica's applied index equals the leader's commit index, twice in a
  // row. Returns {ok, note}.
  async waitConverged(ms = 120000) {
    const end = Date.now() + ms;
    let note = "";
    let stableSince = null;
    while (Date.now() < end) {
      const views = await Promise.all(this.nodes.map((n) => this.status(n.id, 2000)));
      note = convergenceGap(views, this.groups, this.nodes.map((n) => n.id));
      if (note) stableSince = null;
      else if (stableSince === null) stableSince = JSON.stringify(views.map((v) => v.groups.map((g) => g.commit_index)));
      else if (stableSince === JSON.stringify(views.map((v) => v.groups.map((g) => g.commit_index)))) return { ok: true, note: "" };
      else stableSince = null;
      await sleep(500);
    }
    return { ok: false, note: `not converged after ${ms} ms: ${note}` };
  }

  // SIGCONT, then SIGTERM every node; SIGKILL what has not exited within
  // ms. Returns [{id, code, signal, log}] of the SIGTERMed nodes (signal
  // "timeout" for one that had to be killed).
  async shutdown(ms = 15000) {
    const live = this.nodes.filter((n) => n.state !== "down");
    for (const n of live) this.resume(n.id);
    for (const n of live) {
      n.signalled = true;
      n.proc.kill("SIGTERM");
    }
    const results = await Promise.all(live.map((n) => Promise.race([n.exited, sleep(ms).then(() => null)])));
    for (const n of live) if (n.state !== "down") n.proc.kill("SIGKILL");
    for (const n of this.nodes) this.unfill(n.id);
    return live.map((n, k) => ({ id: n.id, ...(results[k] ?? { code: null, signal: "timeout" }), log: this.logTail(n, 8) }));
  }
}

// What keeps the views of /__runnel/cluster (one per node, null for a node
// that did not answer) from showing a converged cluster, or "": every
// group needs one leader every node names, and every node's applied index
// (as it reports itself, else as the leader reports it) at the leader's
// commit index.
export function convergenceGap(views, groups, ids) {
  const silent = ids.filter((id, k) => !views[k]);
  if (silent.length) return `node(s) ${silent.join(", ")} did not answer /__runnel/cluster`;
  for (let g = 0; g < groups; g++) {
    const per = views.map((v) => v.groups?.find((x) => x.group === g));
    if (per.some((x) => !x)) return `group ${g} missing from a node's view`;
    const leaders = new Set(per.map((x) => x.leader));
    if (leaders.size !== 1 || per[0].leader === null) return `group ${g}: leaders ${per.map((x) => String(x.leader)).join("/")}`;
    const leaderView = per[ids.indexOf(per[0].leader)];
    if (!leaderView) return `group ${g}: leader ${per[0].leader} is no node of this cluster`;
    const commit = leaderView.commit_index;
    for (const [k, x] of per.entries()) {
      const replica = x.replicas?.find((r) => r.node === ids[k]) ?? leaderView.replicas?.find((r) => r.node === ids[k]);
      if (!replica || replica.applied_index !== commit)
        return `group ${g}: node ${ids[k]} applied ${replica?.applied_index ?? "?"}, leader ${per[0].leader} committed ${commit}`;
    }
  }
  return "";
}
