// The runnel nodes of a chaos run: started inside their network namespaces
// with the cluster contract's flags (docs: cluster_contract.md, "Starting a
// node"), SIGKILLed, SIGSTOPped and resumed, restarted on their data
// directories, asked for /__runnel/cluster, and stopped at the end.
// Membership (issue 26): the topology has a spare namespace; a new node
// (a new id, an empty data directory, --join) starts in a spare and is
// added through the operator route, and a node decommissioned (or dead)
// is removed through it, its namespace becoming a spare (the next node
// there reuses its address under another id). `nodes` are the members;
// `clientNodes` ({id, url} of each, kept in place) is what the workload
// and the final read use.
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
  // count: the first members (the rest of topo.nodes are spares).
  constructor({ bin, topo, dir, groups, electionTimeoutMs, clusterId, count = topo.nodes.length }) {
    Object.assign(this, { bin, topo, dir, groups, electionTimeoutMs, clusterId });
    const slots = topo.nodes.map((t) => ({
      id: t.id, ns: t.ns, addr: t.addr, topoNode: t,
      url: `http://${t.addr}:${PUBLIC_PORT}`, raft: `${t.addr}:${RAFT_PORT}`,
      dataDir: path.join(dir, `node-${t.id}`), logFile: path.join(dir, `node-${t.id}.log`),
      proc: null, state: "down", exits: [],
    }));
    this.nodes = slots.slice(0, count);
    this.spares = slots.slice(count);
    this.nextId = topo.nodes.length + 1;
    this.clientNodes = this.nodes.map((n) => ({ id: n.id, url: n.url }));
    this.unasked = []; // exits no signal of ours caused: {id, code, signal, log}
    this.retired = []; // decommissioned nodes' SIGTERM exits: {id, code, signal, log}
    this.placement = false; // the cluster reports placement (set by start)
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
    const members = this.nodes.includes(n) ? this.nodes : [...this.nodes, n];
    const peers = members.flatMap((p) => ["--peer", `${p.id}=${p.raft},${p.url}`]);
    const { key, token } = this.secrets();
    return ["serve", "--node-id", String(n.id), "--cluster-id", this.clusterId, ...peers,
      "--groups", String(this.groups), "--listen", `${n.addr}:${PUBLIC_PORT}`, "--data-dir", n.dataDir,
      "--election-timeout-ms", String(this.electionTimeoutMs), "--cluster-key-file", key,
      "--admin-token-file", token,
      // a stream-flip fault is found by the scrub within seconds (256 MiB of tmpfs at most)
      "--scrub-bytes-per-second", "33554432",
      // the long-polls of /v1/stream/ streams, which take no timeout_ms, end as the others' do
      "--long-poll-timeout-ms", "1000", ...(n.joined ? ["--join"] : [])];
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
    for (const n of this.nodes) this.placement ||= Array.isArray((await this.waitAnswering(n, answerMs)).moves);
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

  // An operator request (the admin token) to the first member that
  // answers it with `want`; repeated (a metadata leader may be unknown for
  // a moment) until ms passed. Returns the last answer.
  async operator(method, target, want, ms = 30000) {
    const token = fs.readFileSync(this.secrets().token, "utf8").trim();
    const end = Date.now() + ms;
    let a = null;
    while (Date.now() < end) {
      for (const n of this.nodes.filter((x) => x.state === "up")) {
        a = await request(`${n.url}${target}`, { method, headers: { authorization: `Bearer ${token}` }, timeoutMs: 12000 });
        if (a.status === want) return a;
      }
      await sleep(500);
    }
    throw new Error(`${method} ${target} answered ${a?.status ?? "nothing"} ${a?.code ?? a?.err ?? ""}, not ${want}`);
  }

  // Starts a new node (a new id) in a spare namespace with --join and adds
  // it (202); returns it.
  async join(ms = 30000) {
    const n = this.spares.shift();
    if (!n) throw new Error("no spare namespace for a new node");
    n.id = n.topoNode.id = this.nextId++;
    Object.assign(n, { dataDir: path.join(this.dir, `node-${n.id}`), logFile: path.join(this.dir, `node-${n.id}.log`),
      mounted: false, joined: true, exits: [] });
    this.spawn(n);
    await this.waitAnswering(n, ms);
    await this.operator("POST", `/__runnel/cluster/members?id=${n.id}&raft=${n.raft}&url=${encodeURIComponent(n.url)}`, 202, ms);
    this.nodes.push(n);
    this.clientNodes.push({ id: n.id, url: n.url });
    return n;
  }

  // Decommissions member id (202; asked: done already), waits until every
  // member's report says it was removed (its replicas moved away first),
  // SIGTERMs it when it runs (its exit kept in `retired`), and makes its
  // namespace a spare.
  async retire(id, { asked = false, ms = 150000 } = {}) {
    if (!asked) await this.operator("DELETE", `/__runnel/cluster/members/${id}`, 202);
    const end = Date.now() + ms;
    const others = () => this.nodes.filter((x) => x.id !== id && x.state === "up");
    for (;;) {
      const views = await Promise.all(others().map((x) => this.status(x.id)));
      if (views.length && views.every((v) => v?.nodes?.find((x) => x.id === id)?.state === "removed" && v.moves?.length === 0)) break;
      if (Date.now() > end) throw new Error(`node ${id} was not removed within ${ms} ms`);
      await sleep(500);
    }
    const n = this.node(id);
    if (n.state !== "down") {
      this.resume(id);
      n.signalled = true;
      n.proc.kill("SIGTERM");
      const exit = await Promise.race([n.exited, sleep(15000).then(() => null)]);
      if (!exit) n.proc.kill("SIGKILL");
      this.retired.push({ id, ...(exit ?? { code: null, signal: "timeout" }), log: this.logTail(n, 8) });
    }
    this.unfill(id);
    this.nodes.splice(this.nodes.indexOf(n), 1);
    this.clientNodes.splice(this.clientNodes.findIndex((x) => x.id === id), 1);
    this.spares.push(n);
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
