#!/usr/bin/env node
// A fake cluster node for the harness's own end-to-end test (harness.test.mjs),
// not a model of the real cluster: it takes the cluster contract's flags
// (`serve --node-id N --cluster-id ID --peer N=RAFT,URL ... --groups G
// --listen ADDR --data-dir DIR --election-timeout-ms T`), and
// - node 1 leads every group: it runs a real single-node runnel
//   (RUNNEL_FAKE_BACKEND) on its data directory, bound to its address at
//   the public port + 2 and killed with it (setpriv --pdeathsig), and
//   forwards every request to it;
// - nodes 2 and 3 answer writes and consistency=leader reads with a 307 to
//   node 1 (leader, group, term headers) while node 1 answers them, or 503
//   NO_LEADER; they serve other reads from node 1's runnel (one store: the
//   "replicas" cannot diverge).
// RUNNEL_FAKE_BUG (comma-separated) plants bugs the harness must catch:
// apply-then-redirect makes nodes 2 and 3 apply a write before they
// redirect it; exit-by-itself makes node 3 exit with status 3 once, 4 s
// after its first start.
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { parseArgs } from "node:util";

const { values: o } = parseArgs({
  args: process.argv.slice(3), // after "serve"
  options: { "node-id": { type: "string" }, "cluster-id": { type: "string" }, peer: { type: "string", multiple: true },
    groups: { type: "string" }, listen: { type: "string" }, "data-dir": { type: "string" }, "election-timeout-ms": { type: "string" },
    "cluster-key-file": { type: "string" }, "admin-token-file": { type: "string" },
    "long-poll-timeout-ms": { type: "string" }, "scrub-bytes-per-second": { type: "string" },
    "test-hooks": { type: "boolean" }, "log-stall-ms": { type: "string" } },
});
const id = Number(o["node-id"]);
const groups = Number(o.groups);
const peers = o.peer.map((p) => {
  const [n, rest] = p.split("=");
  const [raft, url] = rest.split(",");
  return { id: Number(n), raft, url };
});
const leaderUrl = new URL(peers.find((p) => p.id === 1).url);
const backend = { host: leaderUrl.hostname, port: Number(leaderUrl.port) + 2 };
const [host, port] = o.listen.split(":");
const bugs = (process.env.RUNNEL_FAKE_BUG ?? "").split(",");

let leaderKnown = false; // node 1: its runnel answers; others: node 1 answers
let backendRuns = 0;
function runBackend() {
  const child = spawn("setpriv", ["--pdeathsig", "KILL", process.env.RUNNEL_FAKE_BACKEND, "serve", "--listen",
    `${backend.host}:${backend.port}`, "--data-dir", path.join(o["data-dir"], "store"), "--cluster-id", o["cluster-id"]], { stdio: "inherit" });
  child.on("exit", () => {
    if (++backendRuns < 50) setTimeout(runBackend, 200); // the previous one may still hold the data directory
  });
}

async function poll() {
  for (;;) {
    const target = id === 1 ? `http://${backend.host}:${backend.port}/chaos/none` : `${leaderUrl.origin}/__runnel/cluster`;
    leaderKnown = await new Promise((resolve) => {
      const req = http.get(target, { timeout: 300 }, (res) => {
        res.resume();
        resolve(res.statusCode === (id === 1 ? 404 : 200) && (id === 1 || res.headers["x-fake-leader"] === "1"));
      });
      req.on("timeout", () => req.destroy());
      req.on("error", () => resolve(false));
    });
    await new Promise((r) => setTimeout(r, 200));
  }
}

const groupOf = (p) => [...p].reduce((h, ch) => (h * 31 + ch.charCodeAt(0)) >>> 0, 7) % groups;

function clusterView() {
  const replicas = peers.map((p) => ({ node: p.id, applied_index: 1, lag: 0 }));
  return {
    cluster_id: o["cluster-id"], node_id: id, nodes: peers.map((p) => ({ id: p.id, url: p.url, raft: p.raft })),
    groups: Array.from({ length: groups }, (_, g) => ({ group: g, leader: leaderKnown ? 1 : null, term: 1, commit_index: 1, replicas })),
  };
}

function forward(req, res, body, then = null) {
  const preq = http.request({ host: backend.host, port: backend.port, method: req.method, path: req.url, headers: req.headers }, (pres) => {
    if (then) {
      pres.resume();
      pres.on("end", then);
      return;
    }
    res.writeHead(pres.statusCode, pres.headers);
    pres.pipe(res);
  });
  preq.on("error", () => (then ? then() : refuse(res, req.url)));
  preq.end(body);
}

function refuse(res, url) {
  if (res.headersSent) return res.destroy();
  const body = JSON.stringify({ error: { code: "NO_LEADER", message: "no leader" } });
  res.writeHead(503, { "content-type": "application/json", "retry-after": "1", "x-ursula-raft-group": String(groupOf(url)) });
  res.end(body);
}

http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    const u = new URL(req.url, "http://x");
    if (u.pathname === "/__runnel/cluster") {
      res.writeHead(200, { "content-type": "application/json", ...(id === 1 && leaderKnown ? { "x-fake-leader": "1" } : {}) });
      return res.end(JSON.stringify(clusterView()));
    }
    const routed = !["GET", "HEAD"].includes(req.method) || u.searchParams.get("consistency") === "leader";
    if (id === 1 || !routed) return forward(req, res, body);
    if (!leaderKnown) return refuse(res, u.pathname);
    const redirect = () => {
      res.writeHead(307, { location: `${leaderUrl.origin}${req.url}`, "x-ursula-raft-leader-id": "1",
        "x-ursula-raft-group": String(groupOf(u.pathname)), "x-ursula-raft-term": "1", "content-length": "0" });
      res.end();
    };
    if (bugs.includes("apply-then-redirect") && req.method === "POST") return forward(req, res, body, redirect);
    redirect();
  });
}).listen(Number(port), host);

if (id === 1) runBackend();
process.on("SIGTERM", () => process.exit(0)); // the contract's clean stop; the backend dies with this process
const exitedOnce = path.join(o["data-dir"], "exited-by-itself");
if (bugs.includes("exit-by-itself") && id === 3 && !fs.existsSync(exitedOnce)) {
  fs.mkdirSync(o["data-dir"], { recursive: true });
  fs.writeFileSync(exitedOnce, "");
  setTimeout(() => process.exit(3), 4000);
}
poll();
