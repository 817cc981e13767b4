// Cluster measurements for BENCHMARKS.md (not a test: it asserts nothing).
// The server binary is RUNNEL_BIN (default build/runnel).
//
//   node bench/cluster.mjs recovery [--kills 5] [--groups 16] [--series FILE]
//     A 3-node cluster at default settings; 16 producers append to their
//     own streams (one write in flight each, through any node, following
//     redirects and repeating unknown outcomes with their key) while the
//     leader of a stream's group is SIGKILLed, --kills times (restarted on
//     its data after each). Per kill: the time from the SIGKILL until a
//     write to that group, sent after the kill, is acknowledged. Then every
//     acknowledged write is checked once at its offset on every replica.
//     --series FILE writes the acknowledgements per 100 ms and the kills'
//     times as JSON, for `node bench/plots.mjs failover FILE`.
//
//   node bench/cluster.mjs leader-reads [--seconds 20] [--rate 200] [--groups 16]
//                                       [--consistency leader|local|none] [--on leader|follower]
//     A 3-node cluster with 16 writers appending 256 B at --rate appends/s
//     in all (moderate load), and 8 readers reading their streams with
//     consistency=leader on the streams' leaders as fast as they answer:
//     the latency of those reads (each waits for a confirmation round: the
//     leader's peers asked, or a barrier entry, shared by the reads waiting
//     at once). --consistency local reads the same way without it: the
//     floor the machine and the HTTP path set. --on follower reads on a
//     follower of each stream's group instead; with --consistency none (no
//     parameter) a follower first waits for the leader's ReadIndex
//     (read-your-writes): the cost of a follower read.
//
//   node bench/cluster.mjs stream-asks [--streams 20000] [--rounds 20] [--groups 16]
//     What a peer's ask for the streams of the groups a node leads (the
//     subscriptions' deliverer's, every 250 ms) costs that node: --streams
//     streams are created, then each node is asked --rounds times for the
//     groups it leads, in full (no cursor) and with the cursor of its last
//     answer after 10 appends (the changes since): time to answer and
//     answer bytes, medians, measured once the creates' load has passed.
//
//   node bench/cluster.mjs follower-lag [--appends 400] [--groups 16]
//     Appends one at a time through a stream's leader and times, for each,
//     how long until a follower's local HEAD shows it (polled without
//     pause): how far behind a follower is at rest.
import fs from "node:fs";
import os from "node:os";
import { parseArgs } from "node:util";
import path from "node:path";
import { Cluster, follow, groupOf, peerSignature, req, sleep, waitFor } from "../tests/cluster/runnel_cluster.mjs";

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    kills: { type: "string", default: "5" },
    groups: { type: "string", default: "16" },
    seconds: { type: "string", default: "20" },
    rate: { type: "string", default: "200" },
    consistency: { type: "string", default: "leader" },
    on: { type: "string", default: "leader" },
    appends: { type: "string", default: "400" },
    streams: { type: "string", default: "20000" },
    rounds: { type: "string", default: "20" },
    series: { type: "string" },
  },
});
const GROUPS = Number(values.groups);

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

async function append(c, key, seq, body, deadline) {
  const headers = { "content-type": "text/plain", "producer-id": "bench", "producer-epoch": "0", "producer-seq": String(seq) };
  for (let attempt = 0; ; attempt++) {
    const n = (attempt % 3) + 1;
    if (c.alive(n)) {
      try {
        const r = await follow(`${c.url(n)}/${key}`, { method: "POST", headers, body, timeoutMs: 5000 });
        if (r.status === 200 || r.status === 204) return r;
      } catch {}
    }
    if (Date.now() > deadline) throw new Error(`${key} seq ${seq}: not acknowledged`);
    await sleep(20);
  }
}

async function recovery(c) {
  const keys = Array.from({ length: 16 }, (_, i) => `benchrec/s${i}`);
  for (const key of keys) await follow(`${c.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } });
  const acked = new Map(keys.map((k) => [k, []]));
  const lastAck = new Map(); // group -> time of the newest ack of a write sent then
  const BUCKET_MS = 100;
  const start = Date.now();
  const buckets = []; // acknowledgements per BUCKET_MS since start
  const kills = [];
  let stop = false;
  const writers = keys.map(async (key) => {
    for (let seq = 0; !stop; seq++) {
      const body = `${key}:${seq};`;
      const sent = Date.now();
      const r = await append(c, key, seq, body, Date.now() + 120000);
      acked.get(key).push({ body, next: r.headers.get("stream-next-offset") });
      const b = Math.floor((Date.now() - start) / BUCKET_MS);
      while (buckets.length <= b) buckets.push(0);
      buckets[b]++;
      const g = groupOf(key, GROUPS);
      lastAck.set(g, Math.max(lastAck.get(g) ?? 0, sent));
    }
  });
  const times = [];
  for (let k = 0; k < Number(values.kills); k++) {
    await sleep(2000);
    const g = groupOf(keys[k % keys.length], GROUPS);
    const { node, term } = await c.leaderOf(g);
    await c.crash(node);
    const killed = Date.now();
    kills.push({ at_ms: killed - start, group: g, node });
    await waitFor(`group ${g} acknowledging again`, () => (lastAck.get(g) ?? 0) >= killed, 60000, 10);
    const t = Date.now() - killed;
    const after = await c.leaderOf(g);
    times.push(t);
    console.log(`kill ${k + 1}: leader of group ${g} (node ${node}, term ${term}): writes acknowledged ` +
      `again after ${t} ms, by node ${after.node} in term ${after.term}`);
    await c.restart(node);
  }
  stop = true;
  await Promise.all(writers);
  await c.converged();
  let lost = 0;
  for (const key of keys) {
    const want = acked.get(key).map((a) => a.body).join("");
    for (let n = 1; n <= 3; n++) if ((await req(`${c.url(n)}/${key}`)).text !== want) lost++;
  }
  times.sort((a, b) => a - b);
  console.log(`recovery after a leader SIGKILL: n=${times.length} median ${quantile(times, 0.5)} ms, max ${times[times.length - 1]} ms`);
  console.log(`acknowledged writes: ${[...acked.values()].reduce((s, l) => s + l.length, 0)}; replicas that differ from them: ${lost}`);
  if (values.series)
    fs.writeFileSync(values.series, JSON.stringify({ writers: keys.length, bucket_ms: BUCKET_MS, buckets, kills }));
}

async function leaderReads(c) {
  const keys = Array.from({ length: 16 }, (_, i) => `benchrd/s${i}`);
  const leaderUrl = new Map();
  const readUrl = new Map();
  const param = values.consistency === "none" ? "" : `&consistency=${values.consistency}`;
  for (const key of keys) {
    await follow(`${c.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } });
    const { node } = await c.leaderOf(groupOf(key, GROUPS));
    leaderUrl.set(key, c.url(node));
    readUrl.set(key, c.url(values.on === "follower" ? (node % 3) + 1 : node));
  }
  const body = "x".repeat(256);
  const end = Date.now() + Number(values.seconds) * 1000;
  const interval = 1000 / (Number(values.rate) / keys.length);
  const writers = keys.map(async (key) => {
    while (Date.now() < end) {
      const t = Date.now();
      await req(`${leaderUrl.get(key)}/${key}`, { method: "POST", headers: { "content-type": "text/plain" }, body });
      await sleep(Math.max(0, interval - (Date.now() - t)));
    }
  });
  const lat = [];
  const readers = keys.slice(0, 8).map(async (key) => {
    while (Date.now() < end) {
      const t = process.hrtime.bigint();
      const r = await req(`${readUrl.get(key)}/${key}?offset=-1&max_bytes=1${param}`);
      if (r.status === 200) lat.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
  });
  await Promise.all([...writers, ...readers]);
  lat.sort((a, b) => a - b);
  console.log(`consistency=${values.consistency} reads on the ${values.on}: n=${lat.length} (${(lat.length / Number(values.seconds)).toFixed(0)}/s) p50 ${quantile(lat, 0.5).toFixed(2)} ms, p99 ${quantile(lat, 0.99).toFixed(2)} ms, max ${lat[lat.length - 1].toFixed(2)} ms`);
}

async function followerLag(c) {
  const key = "benchlag/s";
  await follow(`${c.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } });
  const { node: leader } = await c.leaderOf(groupOf(key, GROUPS));
  const follower = (leader % 3) + 1;
  const offsetOf = (tok) => BigInt(tok.split("_")[1]);
  const lags = [];
  for (let i = 0; i < Number(values.appends); i++) {
    const a = await req(`${c.url(leader)}/${key}`, { method: "POST", headers: { "content-type": "text/plain" }, body: "x" });
    if (a.status !== 204) continue;
    const next = offsetOf(a.headers.get("stream-next-offset"));
    const t = process.hrtime.bigint();
    for (;;) {
      const h = await req(`${c.url(follower)}/${key}?consistency=local`, { method: "HEAD" });
      if (h.status === 200 && offsetOf(h.headers.get("stream-next-offset")) >= next) break;
    }
    lags.push(Number(process.hrtime.bigint() - t) / 1e6);
    await sleep(10);
  }
  lags.sort((a, b) => a - b);
  console.log(`follower lag over ${lags.length} appends: p50 ${quantile(lags, 0.5).toFixed(2)} ms, p90 ${quantile(lags, 0.9).toFixed(2)} ms, p99 ${quantile(lags, 0.99).toFixed(2)} ms, max ${lags[lags.length - 1].toFixed(2)} ms`);
}

async function streamAsks(c) {
  const n = Number(values.streams);
  const key = fs.readFileSync(path.join(c.dir, "cluster.key"), "utf8").trim();
  let next = 0;
  await Promise.all(Array.from({ length: 64 }, async () => {
    for (let i = next++; i < n; i = next++) {
      const r = await follow(`${c.url((i % 3) + 1)}/benchask/s${i}`, { method: "PUT", headers: { "content-type": "text/plain" } });
      if (r.status !== 201) throw new Error(`create benchask/s${i}: ${r.status} ${r.text}`);
    }
  }));
  const groups = [...Array(GROUPS).keys()].join(",");
  const ask = async (node, since) => {
    const target = `/__runnel/cluster/streams?groups=${groups}${since ? `&since=${since}` : ""}`;
    const t = process.hrtime.bigint();
    const r = await req(c.url(node) + target, { headers: peerSignature(key, "GET", target, node === 1 ? 2 : 1, Date.now()), timeoutMs: 60000 });
    const ms = Number(process.hrtime.bigint() - t) / 1e6;
    if (r.status !== 200) throw new Error(`ask node ${node}: ${r.status} ${r.text}`);
    return { ms, bytes: r.body.length, doc: JSON.parse(r.text) };
  };
  // the creates loaded the machine: the asks are measured once it is quiet
  // again (a 1-minute load below 1, waited for up to 3 minutes)
  for (let waited = 0; os.loadavg()[0] >= 1 && waited < 180; waited++) await sleep(1000);
  const loadBefore = os.loadavg()[0];
  const full = [], changes = [];
  for (let round = 0; round < Number(values.rounds); round++) {
    for (let node = 1; node <= 3; node++) {
      const a = await ask(node);
      full.push(a);
      for (let k = 0; k < 10; k++)
        await follow(`${c.url(1)}/benchask/s${(round * 10 + k) % n}`, { method: "POST", headers: { "content-type": "text/plain" }, body: "x" });
      const b = await ask(node, a.doc.cursor);
      if (b.doc.full !== false) throw new Error(`node ${node}: the ask with a cursor was answered in full`);
      changes.push(b);
    }
  }
  const med = (xs, f) => quantile(xs.map(f).sort((x, y) => x - y), 0.5);
  const named = (xs) => med(xs, (a) => a.doc.streams.length);
  console.log(`${n} streams, ${GROUPS} groups, ${full.length} asks of each kind (one per node per round), 1-minute load ${loadBefore.toFixed(2)} -> ${os.loadavg()[0].toFixed(2)}:`);
  console.log(`  in full:           answer ${med(full, (a) => a.ms).toFixed(2)} ms, ${med(full, (a) => a.bytes)} bytes, ${named(full)} streams named (medians)`);
  console.log(`  changes since:     answer ${med(changes, (a) => a.ms).toFixed(2)} ms, ${med(changes, (a) => a.bytes)} bytes, ${named(changes)} streams named (medians)`);
}

const modes = { recovery, "leader-reads": leaderReads, "follower-lag": followerLag, "stream-asks": streamAsks };
const mode = positionals[0];
if (!modes[mode]) {
  console.error("usage: node bench/cluster.mjs recovery|leader-reads|follower-lag|stream-asks [options]");
  process.exit(2);
}
const c = await Cluster.start({ groups: GROUPS });
try {
  await modes[mode](c);
} finally {
  c.stop();
}
