// Drives a local Runnel cluster for the black-box cluster tests through
// scripts/cluster.sh (start, stop) and the files it leaves (node-N.pid,
// node-N.cmd to restart a node on its data), with bounded waits on what
// /__runnel/cluster reports. The binary comes from RUNNEL_BIN.
// Every cluster still running when the test process exits is SIGKILLed and
// its directory removed (tempDir).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, tempDir } from "../blackbox/lib/server.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const BIN = path.resolve(process.env.RUNNEL_BIN ?? path.join(ROOT, "build/runnel"));
const SCRIPT = path.join(ROOT, "scripts/cluster.sh");

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const live = new Set();
process.on("exit", () => {
  for (const c of live) for (let n = 1; n <= c.nodes; n++) c.kill(n, "SIGKILL");
});

// Polls fn until it returns a truthy value; throws after ms naming what.
export async function waitFor(what, fn, ms = 20000, every = 100) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what} (last: ${last})`);
    await sleep(every);
  }
}

// The group of a stream key, as src/cluster/placement.c computes it
// (FNV-1a 64 of the key's bytes, modulo the group count).
// The headers of a peer request signed with the cluster key as node id
// signs it (src/consensus/peer_auth.c) at timeMs.
export function peerSignature(key, method, target, id, timeMs, body = Buffer.alloc(0)) {
  const digest = crypto.createHash("sha256").update(body).digest("hex");
  const mac = crypto.createHmac("sha256", key)
    .update(`runnel http 1\n${method}\n${target}\n${timeMs}\n${id}\n${digest}`).digest("hex");
  return { "runnel-peer-id": String(id), "runnel-peer-time": String(timeMs), "runnel-peer-signature": mac };
}

export function groupOf(key, groups) {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(key, "utf8")) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return Number(h % BigInt(groups));
}

// One request; the answer with its body read (bounded). Never follows
// redirects. Unless `forward` is set, it carries Runnel-No-Forward, so a
// node that does not lead the stream's group answers a write 307 (as to
// the gateway and the C client) instead of forwarding it: the tests see
// routing itself. A read that fails on a kept-alive connection of a node
// that restarted since is sent once more (writes never are: they may have
// applied).
export async function req(url, { method = "GET", headers = {}, body, timeoutMs = 15000, forward = false } = {}) {
  if (!forward) headers = { "runnel-no-forward": "test", ...headers };
  for (let attempt = 0; ; attempt++) {
    try {
      const res = await fetch(url, { method, headers, body, redirect: "manual", signal: AbortSignal.timeout(timeoutMs) });
      const buf = Buffer.from(await res.arrayBuffer());
      return { status: res.status, headers: res.headers, body: buf, text: buf.toString("utf8") };
    } catch (e) {
      if (attempt > 0 || !(method === "GET" || method === "HEAD") || !/fetch failed/.test(String(e))) throw e;
    }
  }
}

// Asserts the server's identity on an answer of cluster c (extensions §10:
// on every answer, redirects and 503s included).
export function assertIdentity(r, c, what = "") {
  assert.equal(r.headers.get("ursula-protocol"), "2", `Ursula-Protocol on ${what} (${r.status})`);
  assert.equal(r.headers.get("ursula-cluster-id"), c.clusterId, `Ursula-Cluster-Id on ${what} (${r.status})`);
}

// The same, following 307s (resending the body) up to 5 times.
export async function follow(url, opts = {}) {
  for (let hops = 0; ; hops++) {
    const r = await req(url, opts);
    if (r.status !== 307 || hops === 5) return r;
    url = r.headers.get("location");
  }
}

// send() repeated while it answers 503 NO_LEADER (nothing was applied or
// read: a group elects a leader, say after its leader was killed or while
// a loaded machine's heartbeats come late), every 250 ms for up to 10 s,
// as a client that honours Retry-After does; onRetry counts the repeats.
export async function retryNoLeader(send, onRetry = () => {}) {
  for (let tries = 0; ; tries++) {
    const r = await send();
    if (r.status !== 503 || tries === 40 || !r.text.includes('"NO_LEADER"')) return r;
    onRetry(r);
    await sleep(250);
  }
}

// An operator's request (membership, drain), repeated on 503 NO_LEADER
// of the metadata group, as an operator would.
export const operatorReq = (url, opts = {}) => retryNoLeader(() => req(url, opts));

// follow(), repeated on 503 NO_LEADER of the stream's group.
export const settledFollow = (url, opts = {}) => retryNoLeader(() => follow(url, opts));

// A webhook receiver on loopback that records every notification (its raw
// body, the body parsed, its signature header) and answers {"done":true}.
export function webhookReceiver() {
  const seen = [];
  const server = http.createServer((rq, rs) => {
    let raw = "";
    rq.on("data", (d) => (raw += d));
    rq.on("end", () => {
      seen.push({ raw, body: JSON.parse(raw), signature: rq.headers["webhook-signature"] });
      rs.writeHead(200, { "content-type": "application/json" });
      rs.end('{"done":true}');
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () =>
    resolve({ server, seen, url: `http://127.0.0.1:${server.address().port}/hook` })));
}

// One key per group (prefix + a number), found by hashing as the nodes do.
export function keysPerGroup(prefix, groups) {
  const keys = new Array(groups).fill(null);
  for (let i = 0, left = groups; left > 0; i++) {
    const key = `${prefix}${i}`;
    const g = groupOf(key, groups);
    if (keys[g] === null) {
      keys[g] = key;
      left--;
    }
  }
  return keys;
}

// Appends to every key, round robin, through the live nodes in turn
// (forwarded by followers, as a plain client's writes are), until stop():
// each key's acknowledged records in order, and the longest time between
// two acknowledgements (any key). skip(n): a node not to write through now.
const loads = new Set(); /* the write loads running: a cluster's stop ends them (a failed test leaves its own) */

export function writeLoad(c, keys, { skip = () => false } = {}) {
  let writing = true;
  const end = () => { writing = false; };
  loads.add(end);
  const acked = keys.map(() => []);
  let lastAck = 0;
  let worstGap = 0;
  const done = (async () => {
    for (let i = 0; writing; i++) {
      const via = 1 + (i % c.nodes);
      if (!c.alive(via) || skip(via)) continue;
      const k = i % keys.length;
      const record = `w${i};`;
      try {
        const r = await req(`${c.url(via)}/${keys[k]}`, {
          method: "POST", headers: { "content-type": "text/plain" }, body: record, forward: true, timeoutMs: 5000,
        });
        if (r.status === 204) {
          acked[k].push(record);
          const now = Date.now();
          if (lastAck) worstGap = Math.max(worstGap, now - lastAck);
          lastAck = now;
        } else {
          await sleep(10);
        }
      } catch {
        await sleep(10);
      }
    }
  })();
  return {
    acked,
    async stop() {
      writing = false;
      loads.delete(end);
      await done;
      return { acked, worstGap, count: acked.flat().length };
    },
  };
}

// Asserts that every acknowledged record of every key is in the stream,
// once and in order (a linearizable read through node n).
export async function assertAcked(c, keys, acked, n = 1) {
  for (let k = 0; k < keys.length; k++) {
    const r = await follow(`${c.url(n)}/${keys[k]}?offset=-1&consistency=leader`, { timeoutMs: 20000 });
    assert.equal(r.status, 200, `${keys[k]}: ${r.status} ${r.text}`);
    const records = r.text.split(";").filter(Boolean).map((x) => `${x};`);
    const at = new Map(records.map((x, i) => [x, i]));
    let last = -1;
    for (const rec of acked[k]) {
      assert.ok(at.has(rec), `${keys[k]}: acknowledged ${rec} is there`);
      assert.equal(records.filter((x) => x === rec).length, 1, `${keys[k]}: ${rec} once`);
      assert.ok(at.get(rec) > last, `${keys[k]}: ${rec} in order`);
      last = at.get(rec);
    }
  }
}

// A cluster directory not started yet, laid out as scripts/cluster.sh keeps
// it (cluster.env with fresh ports), for data made offline (a restore):
// {dir, clusterId, opts(n)}, opts(n) being node n's cluster options
// (--node-id, --cluster-id, --groups, every --peer). `start(args)` then
// starts a Cluster on it.
export async function clusterLayout({ clusterId, nodes = 3, groups }) {
  const dir = tempDir("runnel-cluster-layout-");
  const env = { CLUSTER_NODES: nodes, CLUSTER_GROUPS: groups, CLUSTER_ID: clusterId };
  for (let n = 1; n <= nodes; n++) {
    env[`HTTP_PORT_${n}`] = await freePort();
    env[`RAFT_PORT_${n}`] = await freePort();
  }
  fs.writeFileSync(path.join(dir, "cluster.env"), Object.entries(env).map(([k, v]) => `${k}=${v}\n`).join(""));
  const opts = (n) => {
    const o = ["--node-id", String(n), "--cluster-id", clusterId, "--groups", String(groups)];
    for (let i = 1; i <= nodes; i++) o.push("--peer", `${i}=127.0.0.1:${env[`RAFT_PORT_${i}`]},http://127.0.0.1:${env[`HTTP_PORT_${i}`]}`);
    return o;
  };
  const start = (args = []) => {
    const c = new Cluster(dir, nodes, groups, args);
    c.clusterId = clusterId;
    c.startAll();
    return c;
  };
  return { dir, clusterId, opts, start };
}

export class Cluster {
  // Starts a cluster (scripts/cluster.sh start) in a fresh directory.
  // tls: a PKI directory (tests/lib/test_pki.sh): the nodes speak https.
  // peerTls: a PKI directory: mutual TLS between the nodes (its peer-N
  // certificates) instead of the cluster key. peerListen: every node gets a
  // peer listener (scripts/cluster.sh --peer-listen).
  // insecure: no cluster key and no admin token (scripts/cluster.sh --insecure).
  // replicas: each group on that many nodes (scripts/cluster.sh --replicas).
  static async start({ nodes = 3, groups = 4, args = [], tls = null, peerTls = null, peerListen = false,
    insecure = false, replicas = 3 } = {}) {
    const c = new Cluster(tempDir("runnel-cluster-"), nodes, groups, args);
    Object.assign(c, { tls, peerTls, peerListen, insecure, replicas });
    c.startAll();
    const env = fs.readFileSync(path.join(c.dir, "cluster.env"), "utf8");
    c.clusterId = /CLUSTER_ID=(.*)/.exec(env)[1];
    return c;
  }

  constructor(dir, nodes, groups, args) {
    Object.assign(this, { dir, nodes, groups, args });
  }

  // Starts every node (again, on its data after stop()); returns once every
  // group has a leader on every node.
  // A start that fails (a group without a leader in time) SIGKILLs the
  // nodes it started before it throws: nothing else would stop them.
  startAll() {
    let out;
    try {
      out = execFileSync(SCRIPT, ["start", this.dir, "--nodes", String(this.nodes), "--groups",
        String(this.groups), "--replicas", String(this.replicas ?? 3), "--bin", BIN, ...(this.tls ? ["--tls", this.tls] : []),
        ...(this.peerTls ? ["--peer-tls", this.peerTls] : []), ...(this.peerListen ? ["--peer-listen"] : []),
        ...(this.insecure ? ["--insecure"] : []), "--", ...this.args],
        { encoding: "utf8", timeout: 120000 });
    } catch (e) {
      for (let n = 1; n <= this.nodes; n++) this.kill(n, "SIGKILL");
      throw e;
    }
    this.urls = out.trim().split("\n");
    live.add(this);
  }

  url(n) {
    return this.urls[n - 1];
  }

  // cluster.env as an object (ports, cluster id, group count).
  env() {
    return Object.fromEntries(fs.readFileSync(path.join(this.dir, "cluster.env"), "utf8")
      .trim().split("\n").map((l) => l.split("=")));
  }

  // The base URL node n's peers reach it at: its peer listener's, else its public one.
  peerUrl(n) {
    const port = this.env()[`PEER_PORT_${n}`];
    return port ? `${this.peerTls || this.tls ? "https" : "http"}://127.0.0.1:${port}` : this.url(n);
  }

  // The headers of an operator's request (scripts/cluster.sh's admin token;
  // none for a cluster started --insecure).
  get admin() {
    const f = path.join(this.dir, "admin.token");
    return fs.existsSync(f) ? { authorization: `Bearer ${fs.readFileSync(f, "utf8").trim()}` } : {};
  }

  // The security flags scripts/cluster.sh gave the nodes (cluster key or
  // node n's peer certificates, and admin token), for a node started by hand.
  securityArgs(n) {
    const key = path.join(this.dir, "cluster.key"), token = path.join(this.dir, "admin.token");
    const out = fs.existsSync(token) ? ["--admin-token-file", token] : [];
    if (this.peerTls)
      out.push("--peer-cert", path.join(this.peerTls, `peer-${n}.pem`), "--peer-key",
        path.join(this.peerTls, `peer-${n}.key`), "--peer-ca", path.join(this.peerTls, "ca.pem"));
    else if (fs.existsSync(key))
      out.push("--cluster-key-file", key);
    return out;
  }

  // Starts node n (beyond the cluster's) as an operator does
  // (scripts/cluster.sh join: node 1's settings, new ports, --join);
  // returns the words it printed, the operands of `runnel cluster add`
  // ([id, raft, url] and the peer URL with peer listeners).
  join(n) {
    const words = execFileSync(SCRIPT, ["join", this.dir, String(n)], { encoding: "utf8", timeout: 20000 }).trim().split(" ");
    this.urls[n - 1] = words[2];
    this.nodes = Math.max(this.nodes, n);
    return words;
  }

  // Starts node n (beyond the cluster's) with --join: its --peer lines are
  // the cluster's nodes and its own, on fresh ports (and a peer listener
  // when the cluster's nodes have one); it waits to be added (POST
  // /__runnel/cluster/members). Returns {url, raft, peerUrl, query}, query
  // being the membership route's parameters that add it.
  async addNode(n, extraArgs = []) {
    const env = this.env();
    const http = await freePort();
    const raftPort = await freePort();
    const peers = [];
    for (let i = 1; i <= Number(env.CLUSTER_NODES); i++) /* the first nodes: the table names the rest */
      peers.push("--peer", `${i}=127.0.0.1:${env[`RAFT_PORT_${i}`]},http://127.0.0.1:${env[`HTTP_PORT_${i}`]}${this.peerListen ? `,${this.peerUrl(i)}` : ""}`);
    const self = { url: `http://127.0.0.1:${http}`, raft: `127.0.0.1:${raftPort}` };
    const listen = [];
    if (this.peerListen) {
      const port = await freePort();
      self.peerUrl = `${this.peerTls || this.tls ? "https" : "http"}://127.0.0.1:${port}`;
      listen.push("--peer-listen", `127.0.0.1:${port}`);
    }
    self.query = `id=${n}&raft=${self.raft}&url=${encodeURIComponent(self.url)}${self.peerUrl ? `&peer_url=${encodeURIComponent(self.peerUrl)}` : ""}`;
    peers.push("--peer", `${n}=${self.raft},${self.url}${self.peerUrl ? `,${self.peerUrl}` : ""}`);
    const argv = [BIN, "serve", "--node-id", String(n), "--cluster-id", this.clusterId, ...peers,
      "--groups", String(this.groups), "--listen", `127.0.0.1:${http}`, "--data-dir",
      path.join(this.dir, `node-${n}`), "--join", ...listen, ...this.securityArgs(n), ...this.args, ...extraArgs];
    const q = (a) => `'${a.replace(/'/g, "'\\''")}'`;
    fs.writeFileSync(path.join(this.dir, `node-${n}.cmd`),
      `${argv.map(q).join(" ")} >>${q(path.join(this.dir, `node-${n}.log`))} 2>&1 & echo $! >${q(path.join(this.dir, `node-${n}.pid`))}\n`);
    execFileSync("bash", [path.join(this.dir, `node-${n}.cmd`)], { timeout: 10000 });
    this.urls[n - 1] = self.url;
    this.nodes = Math.max(this.nodes, n);
    await waitFor(`node ${n} to answer`, async () => (await req(`${self.url}/__runnel/livez`)).status === 200);
    return self;
  }

  pid(n) {
    try {
      return Number(fs.readFileSync(path.join(this.dir, `node-${n}.pid`), "utf8"));
    } catch {
      return 0;
    }
  }

  alive(n) {
    const pid = this.pid(n);
    if (!pid) return false;
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }

  kill(n, signal = "SIGKILL") {
    const pid = this.pid(n);
    if (!pid) return;
    try {
      process.kill(pid, signal);
    } catch {}
  }

  // SIGKILL and wait until the process is gone.
  async crash(n) {
    this.kill(n, "SIGKILL");
    await waitFor(`node ${n} to die`, () => !this.alive(n), 10000, 20);
  }

  // Starts node n again on its data (its command line from node-N.cmd),
  // without waiting for it.
  launch(n) {
    execFileSync("bash", [path.join(this.dir, `node-${n}.cmd`)], { timeout: 10000 });
  }

  // Restarts node n on its data and waits until it answers /__runnel/cluster.
  async restart(n) {
    this.launch(n);
    await waitFor(`node ${n} to answer`, async () => (await this.report(n)).groups.length === this.groups);
  }

  log(n) {
    return fs.readFileSync(path.join(this.dir, `node-${n}.log`), "utf8");
  }

  async report(n) {
    const r = await req(`${this.url(n)}/__runnel/cluster`, { timeoutMs: 5000 });
    if (r.status !== 200) throw new Error(`/__runnel/cluster of node ${n}: ${r.status}`);
    return JSON.parse(r.text);
  }

  // The node leading `group` as every live node reports it (one leader,
  // the same term everywhere).
  async leaderOf(group, ms = 20000) {
    return waitFor(`one leader of group ${group}`, async () => {
      let leader = null;
      let term = null;
      for (let n = 1; n <= this.nodes; n++) {
        if (!this.alive(n)) continue;
        const g = (await this.report(n)).groups[group];
        if (g.leader === null) return null;
        if (leader !== null && (g.leader !== leader || g.term !== term)) return null;
        leader = g.leader;
        term = g.term;
      }
      return leader !== null && this.alive(leader) ? { node: leader, term } : null;
    }, ms);
  }

  // Waits until every live node of a group's placement hosts it (no move
  // in progress), every live replica of every group applied every entry its
  // leader committed (the same applied index on every live replica), caught
  // up since it started (its local reads served) and holds every byte its
  // streams name (none still fetched from its peers), and each group is
  // led by its preferred node when that one runs, as every live node sees
  // it: no leadership transfer (placement's balance) follows.
  async converged(ms = 30000) {
    let why = "no report yet";
    const divergence = async () => {
      const reports = await this.liveReports();
      for (let g = 0; g < this.groups; g++) {
        const hosting = reports.filter((r) => r.groups[g].hosted);
        const behind = hosting.filter((r) => !r.groups[g].caught_up); /* its reads answer GROUP_RESTARTING */
        if (behind.length) return `group ${g}: node ${behind[0].node_id} not caught up`;
        /* bytes a replica still fetches from its peers: it redirects their reads */
        const fetching = hosting.find((r) => r.groups[g].streams_fetching > 0);
        if (fetching) return `group ${g}: node ${fetching.node_id} fetching ${fetching.groups[g].streams_fetching} streams' bytes`;
        /* no move in progress, every node agreeing on the placement, and
         * exactly its live nodes hosting the group (else a node answers
         * its reads with a 307 to one that does) */
        const placements = new Set(reports.map((r) => JSON.stringify(r.groups[g].placement ?? null)));
        if (placements.size !== 1) return `group ${g}: placements differ: ${[...placements].join(" ")}`;
        const mover = reports.find((r) => r.groups[g].moving);
        if (mover) return `group ${g}: moving, as node ${mover.node_id} sees it`;
        const placement = (reports[0].groups[g].placement ?? []).filter((n) => this.alive(n)).sort().join();
        const hosts = hosting.map((r) => r.node_id).sort().join();
        if (reports[0].groups[g].placement && placement !== hosts) return `group ${g}: on ${hosts}, placed on ${placement}`;
        const unsettled = this.leaderDivergence(reports, g);
        if (unsettled) return unsettled;
        const applied = hosting.map((r) => r.groups[g].replicas.find((x) => x.node === r.node_id)?.applied_index);
        const commits = hosting.map((r) => r.groups[g].commit_index);
        if (!hosting.length) return `group ${g}: no live replica`;
        if (new Set(applied).size !== 1 || Math.max(...commits) > applied[0])
          return `group ${g}: applied ${applied.join(",")}, committed ${commits.join(",")}`;
      }
      return null;
    };
    try {
      await waitFor("replicas to converge", async () => (why = await divergence()) === null, ms, 200);
    } catch (e) {
      throw new Error(`${e.message}: ${why}\n${this.logTails()}`);
    }
  }

  // The reports of the live nodes the cluster did not remove (a node
  // removed, decommissioned but still running, no longer follows the
  // placement table: its view is not the cluster's).
  async liveReports() {
    const reports = [];
    for (let n = 1; n <= this.nodes; n++) if (this.alive(n)) reports.push(await this.report(n));
    const removed = new Set(reports.flatMap((r) => (r.nodes ?? []).filter((x) => x.state === "removed").map((x) => x.id)));
    return reports.filter((r) => !removed.has(r.node_id));
  }

  // Why group g's leadership is not settled in these reports (null when
  // it is): its preferred node, when that one runs, must lead it as every
  // live node sees it, those not hosting the group too (they send its
  // writes, forks and subscriptions' asks to its leader).
  leaderDivergence(reports, g) {
    const preferred = reports[0]?.groups[g].preferred_leader;
    const led = reports.find((r) => r.groups[g].leader !== preferred);
    if (preferred && this.alive(preferred) && led)
      return `group ${g}: node ${led.node_id} sees leader ${led.groups[g].leader}, preferred ${preferred}`;
    return null;
  }

  // Waits until every group's leadership is settled (leaderDivergence),
  // without converged()'s wait for the replicas' applied indexes, which a
  // running write load keeps apart: no transfer of placement's balance is
  // then under way or about to start.
  async leadersSettled(ms = 30000) {
    let why = "no report yet";
    const unsettled = async () => {
      const reports = await this.liveReports();
      for (let g = 0; g < this.groups; g++) if ((why = this.leaderDivergence(reports, g))) return why;
      return null;
    };
    try {
      await waitFor("leaderships to settle", async () => (await unsettled()) === null, ms, 200);
    } catch (e) {
      throw new Error(`${e.message}: ${why}\n${this.logTails()}`);
    }
  }

  // The last lines of every node's log that say what the cluster did or
  // failed to do (reconcile steps, warnings, errors): what a timeout's
  // message needs to tell a slow step from one that never happened.
  logTails(lines = 20) {
    const wanted = /cluster_reconcile|cluster_placement|cluster_leader| warn | error /;
    let out = "";
    for (let n = 1; n <= this.nodes; n++) {
      let log = "";
      try {
        log = this.log(n);
      } catch {
        continue;
      }
      const picked = log.split("\n").filter((l) => wanted.test(l)).slice(-lines);
      out += `-- node ${n}${this.alive(n) ? "" : " (down)"}, last ${picked.length} of its reconcile, warning and error lines:\n${picked.join("\n")}\n`;
    }
    return out;
  }

  // SIGTERM every node (scripts/cluster.sh stop); true when all stopped cleanly.
  stop() {
    live.delete(this);
    for (const end of loads) end();
    loads.clear();
    let clean = true;
    try {
      execFileSync(SCRIPT, ["stop", this.dir], { timeout: 60000 });
    } catch {
      clean = false;
    }
    if (process.env.CLUSTER_KEEP) /* the nodes' logs and data, for a look after the run */
      fs.cpSync(this.dir, process.env.CLUSTER_KEEP, { recursive: true });
    return clean;
  }

  // Sanitizer reports in any node's log.
  // Stops every node (stop()) and asserts that each stopped cleanly and no
  // node's log holds a sanitizer report.
  stopChecked() {
    const reports = this.sanitizerReports();
    assert.ok(this.stop(), "every node stops cleanly on SIGTERM");
    assert.equal(reports, "", "no sanitizer report");
  }

  sanitizerReports() {
    let found = "";
    for (let n = 1; n <= this.nodes; n++) {
      const log = this.log(n);
      const m = /ERROR: (Address|Leak)Sanitizer|runtime error:/.exec(log);
      if (m) found += `node ${n}: ${log.slice(m.index, m.index + 2000)}\n`;
    }
    return found;
  }
}
