// Self-test of the chaos launcher's network plumbing (netns.mjs), without
// runnel: namespaces come up, every node and the client reach each other
// over the bridge (a bounded TCP ping to a listener in each node's
// namespace), blackhole routes cut exactly the links asked for and heal
// restores them, and teardown leaves no namespace, no process and no link
// in the root namespace. Needs root and ip netns; skips, saying why,
// without them.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import test from "node:test";
import {
  blackholesIn, createTopology, cut, heal, isolate, listNamespaces, namespacesOf, netnsUnavailable, prober, spawnIn, teardown, topologyFor,
} from "./netns.mjs";

const PORT = 7000;
const rootLinks = () => execFileSync("ip", ["-o", "link", "show"], { encoding: "utf8" }).split("\n").map((l) => l.split(":")[1]?.trim()).filter(Boolean).sort();

// Starts a TCP listener on addr:PORT inside ns; resolves with the child
// once it listens (bounded).
function listener(ns, addr) {
  const script = `require("net").createServer((s)=>s.end()).listen(${PORT},${JSON.stringify(addr)},()=>console.log("up"))`;
  const child = spawnIn(ns, process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`listener in ${ns} did not start`)), 10000);
    child.stdout.once("data", () => {
      clearTimeout(timer);
      resolve(child);
    });
    child.on("exit", (code) => reject(new Error(`listener in ${ns} exited ${code}`)));
  });
}

test("namespaces, veth links, blackhole partitions and teardown", { skip: netnsUnavailable() ?? false }, async () => {
  const before = rootLinks();
  const topo = topologyFor(3, `rnchaos-${process.pid}`);
  createTopology(topo);
  const children = [];
  try {
    assert.deepEqual(namespacesOf(topo).filter((ns) => listNamespaces().includes(ns)).sort(), namespacesOf(topo).sort());
    assert.deepEqual(rootLinks(), before, "nothing is created in the root namespace");
    for (const n of topo.nodes) children.push(await listener(n.ns, n.addr));
    const probers = [prober(topo.client.ns), ...topo.nodes.map((n) => prober(n.ns))];
    children.push(...probers);
    const reach = (from, to) => probers[from].ping(topo.nodes[to - 1].addr, PORT, 1000);
    // every pair of nodes both ways, and the client (0) to every node
    const pairs = [];
    for (const from of [0, 1, 2, 3]) for (const to of [1, 2, 3]) if (from !== to) pairs.push([from, to]);
    const matrix = async () => Object.fromEntries(await Promise.all(pairs.map(async ([f, t]) => [`${f}->${t}`, await reach(f, t)])));
    const all = (value) => Object.fromEntries(pairs.map(([f, t]) => [`${f}->${t}`, value]));
    assert.deepEqual(await matrix(), all(true), "everything reaches everything before a partition");

    await cut(topo, 1, 2);
    assert.deepEqual(await blackholesIn(topo.nodes[0].ns), ["blackhole 10.77.0.2"]);
    assert.deepEqual(await matrix(), { ...all(true), "1->2": false, "2->1": false }, "cut 1-2 cuts exactly that link");

    await isolate(topo, 3);
    assert.deepEqual(await matrix(), { ...all(true), "1->2": false, "2->1": false, "1->3": false, "3->1": false, "2->3": false, "3->2": false },
      "isolating node 3 cuts it from the nodes, not from the client");

    await heal(topo);
    for (const n of topo.nodes) assert.deepEqual(await blackholesIn(n.ns), [], `no blackhole left in ${n.ns}`);
    assert.deepEqual(await matrix(), all(true), "heal restores every link");
  } finally {
    const left = teardown(topo);
    assert.deepEqual(left, { namespaces: [], pids: [] }, "teardown leaves no namespace and no process");
  }
  for (const c of children) assert.ok(!fs.existsSync(`/proc/${c.pid}`) || fs.readFileSync(`/proc/${c.pid}/stat`, "utf8").split(" ")[2] === "Z", `listener ${c.pid} is gone`);
  assert.deepEqual(rootLinks(), before, "the root namespace's links are as before");
  assert.deepEqual(listNamespaces().filter((ns) => ns.startsWith(topo.tag)), []);
});
