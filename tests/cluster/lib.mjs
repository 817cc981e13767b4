// Drives runnel-consensus-node processes (tests/cluster/node.c) for the
// consensus tests and the benchmark: start, commands with bounded waits,
// SIGKILL/SIGSTOP, and cluster-wide waits (a leader in every group,
// replicas converged). The binary comes from RUNNEL_CONSENSUS_NODE.
import { spawn } from "node:child_process";
import fs from "node:fs";
import readline from "node:readline";
import { freePort, sleep, tempDir, waitFor } from "../lib/server.mjs";

export const NODE_BIN = process.env.RUNNEL_CONSENSUS_NODE ?? "build/tests/runnel-consensus-node";
export { freePort, sleep, tempDir, waitFor };

const running = new Set();
process.on("exit", () => {
  for (const proc of running) proc.kill("SIGKILL");
});

// One node process. Its answers are matched to commands by tag; events
// (leader changes) are kept with their arrival time.
export class Node {
  constructor({ id, port, dir, groups, peers, join = false, args = [] }) {
    Object.assign(this, { id, port, dir, groups, peers, join, args });
    this.address = `127.0.0.1:${port}`;
    this.events = [];
    this.stderr = "";
  }

  async start() {
    const peerList = this.peers.map((p) => `${p.id}=${p.address}`).join(",");
    const argv = ["--id", String(this.id), "--address", this.address, "--data", this.dir,
      "--groups", String(this.groups), ...(peerList ? ["--peers", peerList] : []),
      ...(this.join ? ["--join"] : []), ...this.args];
    fs.mkdirSync(this.dir, { recursive: true });
    this.exitExpected = false;
    this.proc = spawn(NODE_BIN, argv, { stdio: ["pipe", "pipe", "pipe"] });
    running.add(this.proc);
    this.pending = new Map();
    this.nextTag = 1;
    this.exited = new Promise((resolve) => {
      this.proc.on("exit", (code, signal) => {
        running.delete(this.proc);
        if (!this.exitExpected)
          process.stderr.write(`node ${this.id} exited (${signal ?? code}) unasked: ${this.stderr}\n`);
        for (const { reject } of this.pending.values())
          reject(new Error(`node ${this.id} exited (${signal ?? code})`));
        this.pending.clear();
        resolve({ code, signal });
      });
    });
    this.proc.stdin.on("error", () => {});
    this.proc.stderr.on("data", (d) => {
      this.stderr = (this.stderr + d).slice(-20000);
    });
    const started = new Promise((resolve, reject) => {
      readline.createInterface({ input: this.proc.stdout }).on("line", (line) => {
        const msg = JSON.parse(line);
        if (msg.event === "started") resolve();
        else if (msg.event === "failed") reject(new Error(`node ${this.id}: ${msg.error}`));
        else if (msg.event) this.events.push({ ...msg, at: Date.now() });
        else if (msg.tag && this.pending.has(msg.tag)) {
          this.pending.get(msg.tag).resolve(msg);
          this.pending.delete(msg.tag);
        }
      });
    });
    let timer;
    await Promise.race([started, this.exited.then((e) => {
      throw new Error(`node ${this.id} exited at start (${e.signal ?? e.code}): ${this.stderr}`);
    }), new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`node ${this.id} did not start`)), 30000);
    })]).finally(() => clearTimeout(timer));
    return this;
  }

  get alive() {
    return this.proc && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  // Sends "TAG line" and resolves with the answer (rejects after ms).
  cmd(line, ms = 20000) {
    const tag = `t${this.nextTag++}`;
    if (!this.alive) return Promise.reject(new Error(`node ${this.id} is not running`));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(tag);
        reject(new Error(`node ${this.id}: no answer to "${line}" in ${ms} ms`));
      }, ms);
      this.pending.set(tag, {
        resolve: (m) => { clearTimeout(timer); resolve(m); },
        reject: (e) => { clearTimeout(timer); reject(e); },
      });
      this.proc.stdin.write(`${tag} ${line}\n`);
    });
  }

  async info() {
    const a = await this.cmd("info");
    if (!Array.isArray(a.groups) || a.groups.length !== this.groups)
      throw new Error(`node ${this.id}: bad info answer ${JSON.stringify(a).slice(0, 300)}`);
    return a.groups;
  }

  async kill(signal = "SIGKILL") {
    this.exitExpected = true;
    this.proc.kill(signal);
    return this.exited;
  }

  // Graceful stop; resolves with the exit status (waits 30 s at most).
  async stop() {
    if (!this.alive) return this.exited;
    this.exitExpected = true;
    this.proc.stdin.write("stop stop\n");
    let timer;
    const late = new Promise((resolve) => {
      timer = setTimeout(() => {
        this.proc.kill("SIGKILL");
        resolve();
      }, 30000);
    });
    await Promise.race([this.exited, late]);
    clearTimeout(timer);
    return this.exited;
  }
}

// A set of nodes over loopback; data directories under one temp dir.
export class Cluster {
  constructor({ groups = 8, args = [] } = {}) {
    this.groups = groups;
    this.args = args;
    this.root = tempDir("runnel-consensus-");
    this.nodes = new Map();
  }

  async addNode(id, { join = false, peers, args = [] } = {}) {
    const port = await freePort();
    const node = new Node({ id, port, dir: `${this.root}/n${id}-${port}`, groups: this.groups,
      peers: peers ?? [], join, args: [...this.args, ...args] });
    this.nodes.set(id, node);
    return node;
  }

  // Starts ids as the bootstrap voters.
  async bootstrap(ids) {
    const nodes = [];
    for (const id of ids) nodes.push(await this.addNode(id));
    const peers = nodes.map((n) => ({ id: n.id, address: n.address }));
    for (const n of nodes) n.peers = peers;
    await Promise.all(nodes.map((n) => n.start()));
    return nodes;
  }

  live() {
    return [...this.nodes.values()].filter((n) => n.alive);
  }

  // Per group, the leader all live nodes agree on (same id and term, the
  // leader itself ready), or null for a group without one.
  async leaders(nodes = this.live()) {
    const infos = await Promise.all(nodes.map((n) => n.info()));
    const out = [];
    for (let g = 0; g < this.groups; g++) {
      const views = infos.map((i) => i[g]);
      const first = views[0];
      const agreed = first.leader !== 0 &&
        views.every((v) => v.leader === first.leader && v.term === first.term);
      const leader = agreed ? nodes.find((n) => n.id === first.leader) : undefined;
      const own = leader ? views[nodes.indexOf(leader)] : undefined;
      out.push(own && own.state === "leader" && own.ready ? { node: leader, term: own.term } : null);
    }
    return out;
  }

  async waitLeaders(ms = 20000, nodes = this.live()) {
    return waitFor("a leader in every group", async () => {
      const l = await this.leaders(nodes);
      return l.every(Boolean) ? l : null;
    }, ms);
  }

  // Waits until every node in `nodes` holds, per group, the same count and
  // digest as every other, with no proposal in flight; returns the infos.
  async waitConverged(ms = 30000, nodes = this.live()) {
    let infos = [];
    const describe = () => infos.map((i, k) => `node ${nodes[k].id}: ` + i.map((g) =>
      `${g.state[0]}${g.leader}/${g.term} c${g.commit} a${g.applied} l${g.last} s${g.snapshot} n${g.count}`).join(" ")).join("; ");
    return waitFor("replicas to converge", async () => {
      infos = await Promise.all(nodes.map((n) => n.info()));
      for (let g = 0; g < this.groups; g++) {
        const v = infos.map((i) => i[g]);
        if (!v.every((x) => x.count === v[0].count && x.digest === v[0].digest && x.inflight === 0))
          return null;
      }
      return infos;
    }, ms, 200, describe);
  }

  async stopAll() {
    return Promise.all(this.live().map((n) => n.stop()));
  }
}
