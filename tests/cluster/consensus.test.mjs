// The consensus layer (src/cluster/) with real processes: three
// runnel-consensus-node processes x 8 groups on loopback, each group a
// libraft log applied by the toy state machine (tests/cluster/toy_fsm.c).
// The steps share one cluster and run in order. After each disruptive step
// the replicas must converge (equal count and digest per group) and every
// outcome a proposer saw must hold on every replica: "ok" exactly once at
// the position its apply reported, "not_leader"/"busy"/"not_proposed"
// never (nothing was proposed), "outcome_unknown" or a lost answer at most
// once. Low snapshot thresholds make snapshots, log compaction and
// snapshot installs part of every step.
import assert from "node:assert/strict";
import test from "node:test";
import { Cluster, sleep, waitFor } from "./lib.mjs";

const GROUPS = 8;
// Leader SIGKILL to the next write acknowledged, per group it led: an
// election timeout (1-2 s randomized), maybe a split vote and another, and
// the test's own leader lookup, on a shared 2-core machine, under ASan too
// (5.2 s seen there at load average 11). The figures are printed.
const KILL_BOUND_MS = 8000;
const cluster = new Cluster({
  groups: GROUPS,
  args: ["--snapshot-threshold", "64", "--snapshot-trailing", "16"],
});
const outcomes = []; // every proposal's {g, value, status, index, seq, sent, done}
const NOTHING_PROPOSED = new Set(["not_leader", "busy", "not_proposed"]);
let valueSeq = 0;

async function propose(node, g, tag = "v") {
  const value = `${tag}${valueSeq++}-g${g}`;
  const o = { g, value, node: node.id, sent: Date.now() };
  outcomes.push(o);
  try {
    Object.assign(o, await node.cmd(`propose ${g} ${value}`, 30000));
  } catch {
    o.status = "lost"; // the node died with the proposal pending: unknown
  }
  o.done = Date.now();
  return o;
}

// The node that says it leads g (highest term), among the live ones.
async function leaderOf(g) {
  let best = null;
  for (const n of cluster.live()) {
    try {
      const i = (await n.info())[g];
      if (i.state === "leader" && (!best || i.term > best.term)) best = { node: n, term: i.term };
    } catch {
      // a node dying under us: ask the others
    }
  }
  return best?.node ?? null;
}

// Checks every recorded outcome against the replicas of `nodes`, which
// must hold identical lists per group.
async function checkOutcomes(nodes) {
  for (let g = 0; g < GROUPS; g++) {
    const lists = await Promise.all(nodes.map(async (n) => (await n.cmd(`values ${g}`)).values));
    for (const l of lists.slice(1)) assert.deepEqual(l, lists[0], `group ${g}: replicas differ`);
    const position = new Map();
    lists[0].forEach((v, i) => {
      assert.ok(!position.has(v), `group ${g}: ${v} applied twice`);
      position.set(v, i + 1);
    });
    for (const o of outcomes.filter((x) => x.g === g)) {
      if (o.status === "ok") {
        assert.equal(position.get(o.value), o.seq, `group ${g}: acknowledged ${o.value} at ${o.seq}`);
      } else if (NOTHING_PROPOSED.has(o.status)) {
        assert.ok(!position.has(o.value), `group ${g}: ${o.value} answered ${o.status} but applied`);
      }
    }
  }
}

// Proposes from `loops` concurrent writers per group through whichever
// node leads, for ms milliseconds (or until stop() is called).
function load({ loops = 3, ms = Infinity } = {}) {
  let stopped = false;
  const until = Date.now() + ms;
  const writer = async (g) => {
    let node = null;
    while (!stopped && Date.now() < until) {
      node = node?.alive ? node : await leaderOf(g);
      if (!node) {
        await sleep(50);
        continue;
      }
      const o = await propose(node, g, "L");
      if (o.status !== "ok") {
        node = null;
        await sleep(20);
      }
    }
  };
  const all = [];
  for (let g = 0; g < GROUPS; g++) for (let k = 0; k < loops; k++) all.push(writer(g));
  const done = Promise.all(all);
  return { stop: () => { stopped = true; return done; }, done };
}

const byId = (id) => cluster.nodes.get(id);

test("consensus layer: 3 nodes x 8 groups", { timeout: 600000 }, async (t) => {
  t.after(() => cluster.stopAll());

  await t.test("elects a leader in every group", async () => {
    await cluster.bootstrap([1, 2, 3]);
    const leaders = await cluster.waitLeaders(30000);
    assert.equal(leaders.length, GROUPS);
  });

  await t.test("replicates proposals in the same order on every replica", async () => {
    const leaders = await cluster.waitLeaders();
    await Promise.all(leaders.map(async ({ node }, g) => {
      const results = await Promise.all(Array.from({ length: 100 }, () => propose(node, g)));
      for (const r of results) assert.equal(r.status, "ok", JSON.stringify(r));
      const seqs = results.map((r) => r.seq).sort((a, b) => a - b);
      assert.deepEqual(seqs, Array.from({ length: 100 }, (_, i) => seqs[0] + i));
    }));
    // A follower proposes nothing: not_leader, and the value never applies.
    const follower = cluster.live().find((n) => n !== leaders[0].node);
    assert.equal((await propose(follower, 0)).status, "not_leader");
    const infos = await cluster.waitConverged();
    for (const i of infos) assert.ok(i.every((g) => g.count >= 100));
    // threshold 64: every node snapshots every group (stored in the
    // background, so wait for libraft to record it)
    await waitFor("a stored snapshot of every group on every node", async () => {
      const all = await Promise.all(cluster.live().map((n) => n.info()));
      return all.every((i) => i.every((g) => g.snapshots >= 1 && g.snapshot > 0));
    });
    await checkOutcomes(cluster.live());
  });

  await t.test("every connection has TCP_NODELAY, on both sides", async () => {
    for (const n of cluster.live()) {
      const s = await n.cmd("sockets");
      assert.ok(s.tcp >= 4, `node ${n.id}: ${s.tcp} connections`);
      assert.equal(s.nodelay, s.tcp, `node ${n.id}: ${s.nodelay} of ${s.tcp} with TCP_NODELAY`);
    }
  });

  await t.test("read barriers: linearizable, and concurrent reads share rounds", async (t) => {
    const leaders = await cluster.waitLeaders();
    const { node } = leaders[1];
    const w = await propose(node, 1);
    assert.equal(w.status, "ok");
    const before = (await node.info())[1];
    const reads = await Promise.all(Array.from({ length: 200 }, () => node.cmd("read 1")));
    for (const r of reads) {
      assert.equal(r.status, "ok");
      assert.ok(r.applied >= w.index, `read saw ${r.applied}, write was ${w.index}`);
    }
    const after = (await node.info())[1];
    const rounds = after.read_rounds - before.read_rounds;
    const barriers = after.read_barriers - before.read_barriers;
    t.diagnostic(`200 concurrent reads took ${rounds} confirmation rounds, ${barriers} of them barrier entries`);
    // a ready leader confirms by asking its peers: no log entry (a
    // round's answers may be late on a loaded machine, then a barrier)
    assert.ok(barriers < rounds, `${barriers} of ${rounds} rounds were barrier entries`);
    assert.equal(after.last - before.last, barriers, "entries appended besides the barrier rounds'");
    // they arrive over the pipe in many loop turns, and a confirm round
    // takes about one round trip, so several rounds; one per read would be 200
    assert.ok(rounds >= 1 && rounds <= 100, `200 concurrent reads took ${rounds} rounds`);
    // issued inside the node, 64 at a time: about two rounds per 64
    const rb = await node.cmd("readbench 1 640 64");
    assert.equal(rb.ok, 640);
    t.diagnostic(`640 reads, 64 at a time, took ${rb.rounds} rounds`);
    assert.ok(rb.rounds <= 40, `640 reads took ${rb.rounds} rounds`);
    const follower = cluster.live().find((n) => n !== node);
    const fr = await follower.cmd("read 1");
    assert.equal(fr.status, "not_leader");
  });

  let killed;
  await t.test("a leader SIGKILLed under load: new leaders within the bound, nothing lost", async (t) => {
    const leaders = await cluster.waitLeaders();
    const counts = new Map();
    for (const l of leaders) counts.set(l.node.id, (counts.get(l.node.id) ?? 0) + 1);
    killed = [...counts.entries()].sort((a, b) => b[1] - a[1])[0][0];
    const ledGroups = leaders.flatMap((l, g) => (l.node.id === killed ? [g] : []));
    const writes = load();
    await sleep(1500);
    const killedAt = Date.now();
    await byId(killed).kill("SIGKILL");
    await sleep(6000);
    await writes.stop();
    const survivors = cluster.live();
    await cluster.waitLeaders(20000, survivors);
    await cluster.waitConverged(30000, survivors);
    const recovery = ledGroups.map((g) => {
      const next = outcomes.find((o) => o.g === g && o.status === "ok" && o.sent >= killedAt);
      assert.ok(next, `group ${g}: no write acknowledged after the kill`);
      return next.done - killedAt;
    });
    t.diagnostic(`node ${killed} led groups ${ledGroups}; writes acknowledged again after ` +
      `${recovery.join(", ")} ms`);
    for (const ms of recovery) assert.ok(ms < KILL_BOUND_MS, `recovery took ${ms} ms`);
    const ok = outcomes.filter((o) => o.status === "ok").length;
    assert.ok(ok > 100, `only ${ok} writes acknowledged`);
    // linearizable across the change: a read on each new leader sees every
    // acknowledged write of its group
    for (let g = 0; g < GROUPS; g++) {
      const leader = await leaderOf(g);
      const r = await leader.cmd(`read ${g}`);
      assert.equal(r.status, "ok");
      const acked = outcomes.filter((o) => o.g === g && o.status === "ok");
      assert.ok(r.applied >= Math.max(...acked.map((o) => o.index)));
    }
    await checkOutcomes(survivors);
  });

  await t.test("the killed node restarts from its data (snapshot + log) and catches up", async () => {
    const node = byId(killed);
    await node.start();
    await cluster.waitConverged(60000);
    const infos = await node.info();
    // its own snapshot at start; a leader that compacted past it meanwhile
    // sent one more
    for (const g of infos) assert.ok(g.restores >= 1, `group ${g.group} restored ${g.restores}`);
    await checkOutcomes(cluster.live());
  });

  await t.test("a node far behind installs the leader's snapshot", async (t) => {
    const lagging = cluster.live().find((n) => n.id !== killed);
    const lagged = (await lagging.info()).map((g) => g.last);
    await lagging.kill("SIGKILL");
    const leaders = await cluster.waitLeaders(20000, cluster.live());
    // 200 entries per group: past threshold + trailing, so the leaders'
    // logs no longer hold what the lagging node lacks
    await Promise.all(leaders.map(async ({ node }, g) => {
      for (let k = 0; k < 4; k++) {
        const rs = await Promise.all(Array.from({ length: 50 }, () => propose(node, g)));
        for (const r of rs) assert.equal(r.status, "ok");
      }
    }));
    // a snapshot is taken after its entries apply: on a busy machine the
    // last may come later than the proposals' answers. Every live node's
    // log, not only the leaders': a leadership that moves while the
    // lagging node restarts goes to a node that must not still hold the
    // entries it lacks (CI once saw a group catch up without a snapshot)
    let compacted;
    await waitFor("every live node's log compacted past the lagging node's last entry", async () => {
      compacted = await Promise.all(cluster.live().filter((n) => n !== lagging).map((n) => n.info()));
      return compacted.every((info) => info.every((g, i) => g.snapshot > lagged[i] + 16)); /* --snapshot-trailing 16 */
    }, 20000);
    await lagging.start();
    await cluster.waitConverged(60000);
    // restores counts since the process started: its own snapshot at
    // start, then the one the leader sent. A group may catch up without
    // one, correctly: libraft keeps the last 3 messages for a peer it
    // cannot reach and sends them once it is back, and a leader probing
    // the dead node resends every entry it lacks in each heartbeat, so
    // the last one queued before the leader compacted can still carry them
    // (seen in CI and under LIBRAFT_TRACE: an AppendEntries of entries
    // 823-976 queued 130 ms before the leader's snapshot at 976 was
    // written, delivered on the restart; the install sent after it was
    // refused as busy). So most groups, not all, must have installed.
    const after = await lagging.info();
    const told = (g) => JSON.stringify({ lagged: lagged[g.group], lagging: g,
      leader: compacted.map((info) => info[g.group]) });
    const installed = after.filter((g) => g.restores >= 2);
    for (const g of after) if (g.restores < 2) t.diagnostic(`group ${g.group} caught up from entries: ${told(g)}`);
    assert.ok(installed.length >= GROUPS / 2, `${installed.length} of ${GROUPS} groups installed a snapshot`);
    await checkOutcomes(cluster.live());
  });

  await t.test("a leader that loses its majority after proposing answers outcome_unknown", async (t) => {
    const leaders = await cluster.waitLeaders();
    const { node } = leaders[2];
    const others = cluster.live().filter((n) => n !== node);
    for (const n of others) n.proc.kill("SIGSTOP");
    let o;
    try {
      const started = Date.now();
      o = await propose(node, 2, "U");
      t.diagnostic(`cut-off leader answered ${o.status} after ${Date.now() - started} ms`);
    } finally {
      for (const n of others) n.proc.kill("SIGCONT");
    }
    assert.equal(o.status, "outcome_unknown");
    assert.ok(o.index > 0);
    await cluster.waitLeaders(30000);
    await cluster.waitConverged();
    await checkOutcomes(cluster.live());
  });

  await t.test("leadership transfer", async () => {
    const leaders = await cluster.waitLeaders();
    const from = leaders[3].node;
    const to = cluster.live().find((n) => n !== from);
    assert.equal((await to.cmd(`transfer 3 ${from.id}`)).status, "not_leader");
    assert.equal((await from.cmd("transfer 3 99")).status, "invalid");
    assert.equal((await from.cmd(`transfer 3 ${to.id}`)).status, "ok");
    await waitFor("the target to lead", async () => (await leaderOf(3)) === to);
    assert.equal((await propose(from, 3)).status, "not_leader");
    assert.equal((await propose(to, 3)).status, "ok");
    await cluster.waitConverged();
    await checkOutcomes(cluster.live());
  });

  await t.test("a dead node is replaced by an empty one that catches up on everything", async () => {
    const dead = byId(3);
    await dead.kill("SIGKILL");
    const survivors = cluster.live();
    const fresh = await cluster.addNode(4, { join: true });
    await fresh.start();
    for (let g = 0; g < GROUPS; g++) {
      const leader = await waitFor(`a leader of ${g}`, () => leaderOf(g));
      const follower = survivors.find((n) => n !== leader);
      assert.equal((await follower.cmd(`remove ${g} 3`)).status, "not_leader");
      assert.equal((await leader.cmd(`remove ${g} 99`)).status, "invalid");
      assert.equal((await leader.cmd(`remove ${g} 3`)).status, "ok");
      assert.equal((await leader.cmd(`add ${g} 4 ${fresh.address}`)).status, "ok");
      assert.equal((await leader.cmd(`add ${g} 4 ${fresh.address}`)).status, "invalid");
      assert.equal((await leader.cmd(`assign ${g} 4 voter`)).status, "ok");
      const members = (await leader.cmd(`members ${g}`)).members;
      assert.deepEqual(members.map((m) => `${m.id}:${m.role}`).sort(),
        ["1:voter", "2:voter", "4:voter"]);
    }
    await cluster.waitConverged(60000);
    await checkOutcomes(cluster.live());
    // node 4 votes and holds everything: with node 1 gone, 2 and 4 carry on
    await byId(1).kill("SIGKILL");
    const rest = cluster.live();
    assert.deepEqual(rest.map((n) => n.id).sort(), [2, 4]);
    await cluster.waitLeaders(30000, rest);
    for (let g = 0; g < GROUPS; g++) {
      const leader = await leaderOf(g);
      assert.equal((await propose(leader, g)).status, "ok");
    }
    await cluster.waitConverged(30000, rest);
    await checkOutcomes(rest);
  });

  await t.test("an entry larger than a log segment", async () => {
    const leader = await leaderOf(5);
    const r = await leader.cmd("bench 5 1 1 3145728");
    assert.equal(r.ok, 1, JSON.stringify(r));
    await cluster.waitConverged();
  });

  await t.test("graceful stops exit 0 (no leak under ASan)", async () => {
    await byId(1).start(); // back from its data, in a configuration without node 3
    await cluster.waitConverged(60000);
    const exits = await cluster.stopAll();
    for (const e of exits) assert.deepEqual(e, { code: 0, signal: null });
  });
});
