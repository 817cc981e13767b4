// The consensus layer's benchmark: commit latency and throughput of 256 B
// proposals on one group of a 3-node loopback cluster, with 1, 8 and 64
// proposals in flight, with TCP_NODELAY (the default) and without it
// (Nagle), plus read barriers. Measured inside the leader
// (runnel-consensus-node's bench/readbench commands), so the driver's pipe
// is not part of it. Not a test: it prints a Markdown table.
//
//   RUNNEL_CONSENSUS_NODE=build/tests/runnel-consensus-node \
//     node tests/cluster/consensus_bench.mjs [--quick]
import { Cluster } from "./lib.mjs";

const quick = process.argv.includes("--quick");
const SIZE = 256;
// proposals per run: Nagle's runs are slow, so they get fewer
const runs = [
  { inflight: 1, count: { nodelay: 2000, nagle: 300 } },
  { inflight: 8, count: { nodelay: 10000, nagle: 1000 } },
  { inflight: 64, count: { nodelay: 40000, nagle: 10000 } },
];

async function measure(nodelay) {
  const cluster = new Cluster({ groups: 1, args: nodelay ? [] : ["--no-nodelay"] });
  const rows = [];
  try {
    await cluster.bootstrap([1, 2, 3]);
    const [{ node }] = await cluster.waitLeaders(30000);
    await node.cmd(`bench 0 200 8 ${SIZE}`, 120000); // warm-up
    for (const r of runs) {
      let count = r.count[nodelay ? "nodelay" : "nagle"];
      if (quick) count = Math.ceil(count / 10);
      const res = await node.cmd(`bench 0 ${count} ${r.inflight} ${SIZE}`, 600000);
      rows.push({ what: `propose ${SIZE} B`, inflight: r.inflight, ...res });
    }
    const reads = await node.cmd(`readbench 0 ${quick ? 500 : 5000} 64`, 600000);
    rows.push({ what: "read barrier", inflight: 64, ...reads });
    const single = await node.cmd(`readbench 0 ${quick ? 100 : 1000} 1`, 600000);
    rows.push({ what: "read barrier", inflight: 1, ...single });
  } finally {
    await cluster.stopAll();
  }
  return rows;
}

const ms = (us) => (us / 1000).toFixed(2);
console.log("| TCP_NODELAY | operation | in flight | count | per second | p50 ms | p99 ms | max ms |");
console.log("|---|---|---|---|---|---|---|---|");
for (const nodelay of [true, false]) {
  for (const r of await measure(nodelay)) {
    const extra = r.rounds !== undefined ? ` (${r.rounds} rounds)` : "";
    console.log(`| ${nodelay ? "on" : "off"} | ${r.what}${extra} | ${r.inflight} | ${r.ok}/${r.count} | ` +
      `${Math.round(r.per_sec)} | ${ms(r.p50_us)} | ${ms(r.p99_us)} | ${ms(r.max_us)} |`);
  }
}
