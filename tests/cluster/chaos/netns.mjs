// Network namespaces for a chaos cluster (root only): a hub namespace
// holding a bridge, one namespace per node and one for the client, each
// joined to the bridge by a veth pair; partitions as blackhole routes in
// the nodes' namespaces; teardown that kills every process left in them
// and deletes them. Nothing is created in the root namespace: every veth
// end is made inside its namespace. Names carry the owner's pid
// (rnchaos-<pid>-...), so a run can remove what a killed run left behind.
import { execFile, execFileSync, spawn } from "node:child_process";
import fs from "node:fs";

export const PREFIX = "rnchaos";
export const SUBNET = "10.77.0";
const CLIENT_HOST = 100;

// The names and addresses of a topology of `count` nodes; nothing is
// created yet. Node i is `${SUBNET}.i`; the client `${SUBNET}.100`.
export function topologyFor(count, tag = `${PREFIX}-${process.pid}`) {
  return {
    tag,
    hub: `${tag}-hub`,
    client: { ns: `${tag}-cl`, addr: `${SUBNET}.${CLIENT_HOST}` },
    nodes: Array.from({ length: count }, (_, k) => ({ id: k + 1, ns: `${tag}-n${k + 1}`, addr: `${SUBNET}.${k + 1}` })),
    blackholes: [], // [ns, addr] pairs in place
  };
}

// Why network namespaces cannot be used here (not root, no ip netns), or
// null when they can.
export function netnsUnavailable() {
  if (process.getuid?.() !== 0) return "needs root (ip netns)";
  try {
    execFileSync("ip", ["netns", "list"], { stdio: "ignore" });
  } catch {
    return "ip netns is not available";
  }
  return null;
}

export const namespacesOf = (topo) => [topo.hub, topo.client.ns, ...topo.nodes.map((n) => n.ns)];

export function ipSync(args) {
  return execFileSync("ip", args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 10000 });
}

export function ip(args) {
  return new Promise((resolve, reject) => {
    execFile("ip", args, { encoding: "utf8", timeout: 10000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`ip ${args.join(" ")}: ${stderr.trim() || err.message}`));
      else resolve(stdout);
    });
  });
}

// Creates the namespaces, the bridge and the veth pairs, and brings every
// link up. On a failure, removes what it made and throws.
export function createTopology(topo) {
  try {
    for (const ns of namespacesOf(topo)) ipSync(["netns", "add", ns]);
    ipSync(["-n", topo.hub, "link", "add", "br0", "type", "bridge"]);
    ipSync(["-n", topo.hub, "link", "set", "br0", "up"]);
    const hosts = [...topo.nodes.map((n) => ({ port: `v${n.id}`, ...n })), { port: "vc", ...topo.client }];
    for (const h of hosts) {
      ipSync(["-n", topo.hub, "link", "add", h.port, "type", "veth", "peer", "name", "eth0", "netns", h.ns]);
      ipSync(["-n", topo.hub, "link", "set", h.port, "master", "br0", "up"]);
      ipSync(["-n", h.ns, "addr", "add", `${h.addr}/24`, "dev", "eth0"]);
      ipSync(["-n", h.ns, "link", "set", "eth0", "up"]);
      ipSync(["-n", h.ns, "link", "set", "lo", "up"]);
    }
  } catch (err) {
    teardown(topo);
    throw new Error(`could not build the network namespaces (root and ip netns needed): ${err.stderr?.trim() || err.message}`);
  }
  return topo;
}

// Drops every packet node `from` sends to node `to` (one direction).
async function blackhole(topo, from, to) {
  const a = topo.nodes.find((n) => n.id === from);
  const b = topo.nodes.find((n) => n.id === to);
  if (topo.blackholes.some(([ns, addr]) => ns === a.ns && addr === b.addr)) return;
  await ip(["-n", a.ns, "route", "add", "blackhole", `${b.addr}/32`]);
  topo.blackholes.push([a.ns, b.addr]);
}

// Cuts the link between nodes a and b both ways.
export async function cut(topo, a, b) {
  await blackhole(topo, a, b);
  await blackhole(topo, b, a);
}

// Cuts node id off from every other node (clients still reach it).
export async function isolate(topo, id) {
  for (const n of topo.nodes) if (n.id !== id) await cut(topo, id, n.id);
}

// Removes every blackhole route.
export async function heal(topo) {
  while (topo.blackholes.length) {
    const [ns, addr] = topo.blackholes[0];
    await ip(["-n", ns, "route", "del", "blackhole", `${addr}/32`]);
    topo.blackholes.shift();
  }
}

// The blackhole routes a node's namespace holds (as ip shows them).
export async function blackholesIn(ns) {
  return (await ip(["-n", ns, "route", "show", "type", "blackhole"])).trim().split("\n").filter(Boolean);
}

export function listNamespaces() {
  try {
    return ipSync(["netns", "list"]).split("\n").map((l) => l.split(" ")[0]).filter(Boolean);
  } catch {
    return [];
  }
}

const pidsIn = (ns) => {
  try {
    return ipSync(["netns", "pids", ns]).split("\n").filter(Boolean).map(Number);
  } catch {
    return [];
  }
};

const sleepSync = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

// Kills every process in the topology's namespaces (they are the run's:
// its nodes, its client) by pid, waits for them (bounded), and deletes
// the namespaces, which deletes their links and routes. Synchronous, so it
// can run from an exit handler. Returns what is left (names, pids).
export function teardown(topo) {
  const names = namespacesOf(topo).filter((ns) => listNamespaces().includes(ns));
  for (let round = 0; round < 50; round++) {
    const pids = names.flatMap(pidsIn).filter((pid) => pid !== process.pid);
    if (pids.length === 0) break;
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    sleepSync(100);
  }
  for (const ns of names) {
    try {
      ipSync(["netns", "del", ns]);
    } catch {
      // reported below
    }
  }
  const left = namespacesOf(topo).filter((ns) => listNamespaces().includes(ns));
  return { namespaces: left, pids: left.flatMap(pidsIn) };
}

// Tears down what runs that no longer exist left behind (namespaces
// named rnchaos-<pid>-... whose pid is dead). Returns the tags removed.
export function cleanupStale() {
  const tags = new Set();
  for (const ns of listNamespaces()) {
    const m = new RegExp(`^(${PREFIX}-([0-9]+))-`).exec(ns);
    if (m && !fs.existsSync(`/proc/${m[2]}`)) tags.add(m[1]);
  }
  for (const tag of tags) {
    const topo = topologyFor(0, tag);
    topo.nodes = listNamespaces()
      .filter((ns) => ns.startsWith(`${tag}-n`))
      .map((ns) => ({ id: Number(ns.slice(tag.length + 2)), ns }));
    teardown(topo);
  }
  return [...tags];
}

// Starts `cmd args` inside namespace ns; the child's pid is the command's
// own (ip netns exec execs it in place).
export function spawnIn(ns, cmd, args, options = {}) {
  return spawn("ip", ["netns", "exec", ns, cmd, ...args], options);
}

// A bounded TCP "ping" (ping(8) is not installed everywhere, and a TCP
// connect is what the nodes need anyway): prober(ns) starts one helper
// process inside ns; its ping(addr, port, ms) is true when a connection
// opens within ms. close() ends the helper.
const PROBER = `const net=require("net");let buf="";
process.stdin.on("data",(d)=>{buf+=d;let i;while((i=buf.indexOf("\\n"))>=0){const [id,addr,port,ms]=buf.slice(0,i).split(" ");buf=buf.slice(i+1);
const s=net.connect(Number(port),addr);const done=(ok)=>{clearTimeout(t);s.destroy();process.stdout.write(id+" "+ok+"\\n")};
const t=setTimeout(()=>done(0),Number(ms));s.on("connect",()=>done(1));s.on("error",()=>done(0))}});`;

export function prober(ns) {
  const child = spawnIn(ns, process.execPath, ["-e", PROBER], { stdio: ["pipe", "pipe", "inherit"] });
  const waiting = new Map();
  let next = 0;
  let out = "";
  child.stdout.on("data", (d) => {
    out += d;
    let i;
    while ((i = out.indexOf("\n")) >= 0) {
      const [id, ok] = out.slice(0, i).split(" ");
      out = out.slice(i + 1);
      waiting.get(id)?.(ok === "1");
      waiting.delete(id);
    }
  });
  child.on("exit", () => {
    for (const resolve of waiting.values()) resolve(false);
    waiting.clear();
  });
  return {
    pid: child.pid,
    ping(addr, port, ms = 1000) {
      const id = String(next++);
      return new Promise((resolve) => {
        const guard = setTimeout(() => resolve(false), ms + 5000); // the helper itself hung
        waiting.set(id, (ok) => {
          clearTimeout(guard);
          resolve(ok);
        });
        child.stdin.write(`${id} ${addr} ${port} ${ms}\n`);
      });
    },
    close: () => child.kill("SIGKILL"),
  };
}
