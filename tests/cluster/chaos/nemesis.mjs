// The nemesis: faults injected one at a time, each held for a while and
// then healed, on a schedule drawn from the run's seed. Kinds:
//   kill-leader     SIGKILL the leader of a group; restart it on its data
//   kill-follower   SIGKILL a node that does not lead that group; restart
//   pause-leader    SIGSTOP a group's leader past the election timeout;
//                   SIGCONT
//   isolate-node    blackhole a random node from the other two; heal
//   isolate-leader  split a group's leader from the majority; heal
//   cut-link        cut a group's leader from one follower only; heal
//   kill-majority   SIGKILL the leader and one follower (no quorum);
//                   restart both
//   kill-all        SIGKILL every node; restart them all
//   disk-full       fill a group's leader's disk with another file (its
//                   tmpfs); remove the file
//   bit-flip        SIGKILL a follower, flip one byte in the middle of its
//                   newest open Raft segment of a group with data, start it:
//                   it must refuse (exit by itself, its log naming the
//                   damage; one that starts is a failed heal); put the byte
//                   back and restart it
//   stream-flip     flip one byte in a whole 4 KiB block of a random
//                   node's largest stream data file, in place, while it
//                   runs (the Raft log may no longer hold those bytes):
//                   the node must never serve it (the checker reads every
//                   replica); heal: wait until the node counts a repaired
//                   block (its scrub or a read found and fetched it again)
//   slow-disk       stall every Raft log write of a group's leader (the test-only
//                   failure point log-stall holds them, as a stalled disk
//                   would): its commit-stall watchdog must hand the group's
//                   leadership to another node within 10 s (one that keeps
//                   it is a failed heal); heal: writes resume
//   drain           drain a group's leader (it hands every leadership
//                   over and leads nothing); undrain it
//   decommission    start a new node in the spare namespace and add it
//                   (replicas move onto it), and decommission a random
//                   other node (its replicas move away); heal: wait until
//                   it is removed, then SIGTERM it
//   replace-node    SIGKILL a random node for good (its disk is lost);
//                   heal: add a new node (a new id, an empty directory)
//                   in the spare namespace and decommission the dead one,
//                   waiting until its replicas moved to the new one
// These three, stream-flip and slow-disk need a real cluster (one that
// reports placement, issue 26: stream files, a scrub, failure points);
// against one that does not (the fake), they are not drawn. A cluster's table
// keeps every node id it ever had, 32 at most: once 28 were used, a
// decommission or replace-node drawn is a drain instead.
// A slow disk is emulated (slow-disk): the data directories are tmpfs, which
// cgroup blkio throttling cannot slow; cluster_disk throttles a real one.
// Also the leader monitor, which polls /__runnel/cluster and counts
// leader changes.
import fs from "node:fs";
import path from "node:path";
import { request } from "./http.mjs";
import { cut, heal as healNetwork, isolate } from "./netns.mjs";
import { sleep } from "./rng.mjs";

export const KINDS = ["kill-leader", "kill-follower", "pause-leader", "isolate-node", "isolate-leader", "cut-link",
  "kill-majority", "kill-all", "disk-full", "bit-flip", "stream-flip", "slow-disk", "drain", "decommission", "replace-node"];
const REAL_ONLY = new Set(["drain", "decommission", "replace-node", "stream-flip", "slow-disk"]);
const MAX_NODE_ID = 28;
const WEIGHTS = { "kill-all": 0.5 };

// The schedules run.mjs offers: faults, how long each is held and the
// quiet time after each heal (ms ranges). The short one (CI's) injects each
// kind once against a real cluster: its time is the test command's budget,
// and the faults drawn after the first of each kind cost about 6 s apiece;
// the long one draws on.
export const SCHEDULES = {
  short: { faults: KINDS.length, hold: [1000, 3000], quiet: [1000, 2000], maxMinutes: 20 },
  long: { faults: 1000, hold: [500, 2500], quiet: [500, 1500], maxMinutes: 360 },
};

export class Nemesis {
  // hotGroups: the groups the workload's streams live in, as far as known
  // (a fault aims at one of them when it can).
  constructor({ cluster, topo, history, rng, electionTimeoutMs, hotGroups = new Set(), log = () => {} }) {
    Object.assign(this, { cluster, topo, history, rng, electionTimeoutMs, hotGroups, log });
    this.kinds = KINDS.filter((k) => cluster.placement || !REAL_ONLY.has(k));
    this.active = null; // the fault in place: {event, heal}
    this.failure = null; // a heal that did not work (a node that did not come back)
  }

  // The kinds in order for fault i: each kind once first (in a seeded
  // order), then drawn by weight.
  kindFor(i, order) {
    if (i < order.length) return order[i];
    const total = this.kinds.reduce((t, k) => t + (WEIGHTS[k] ?? 1), 0);
    let x = this.rng.next() * total;
    for (const k of this.kinds) if ((x -= WEIGHTS[k] ?? 1) < 0) return k;
    return this.kinds[0];
  }

  // Runs `faults` faults (or until the deadline or a failed heal).
  async run({ faults, hold, quiet, deadline }) {
    const order = [...this.kinds].sort(() => this.rng.next() - 0.5);
    for (let i = 0; i < faults && Date.now() < deadline && !this.failure; i++) {
      const kind = this.kindFor(i, order);
      await this.inject(kind);
      let ms = this.rng.int(...hold);
      if (kind === "pause-leader") ms = Math.max(ms, 2.5 * this.electionTimeoutMs);
      await sleep(ms);
      await this.heal();
      await sleep(this.rng.int(...quiet));
    }
  }

  // Picks a group with a known leader, one of the workload's if it can:
  // {group, leader, term, follower, led (the groups its leader leads)}.
  async target() {
    const leaders = await this.cluster.leaders();
    const ids = this.cluster.nodes.map((n) => n.id);
    const all = [...leaders.keys()];
    const hot = all.filter((g) => this.hotGroups.has(g));
    const groups = hot.length ? hot : all;
    if (groups.length === 0) {
      const leader = this.rng.pick(ids);
      return { group: null, leader, term: null, follower: this.rng.pick(ids.filter((x) => x !== leader)), led: [] };
    }
    const group = this.rng.pick(groups);
    const { leader, term } = leaders.get(group);
    const led = all.filter((g) => leaders.get(g).leader === leader);
    return { group, leader, term, follower: this.rng.pick(ids.filter((x) => x !== leader)), led };
  }

  async inject(kind) {
    /* the table keeps every node id it ever had (32 at most): past 28, no more new nodes */
    if ((kind === "decommission" || kind === "replace-node") && this.cluster.nextId > MAX_NODE_ID) kind = "drain";
    const t = await this.target();
    const c = this.cluster;
    const all = c.nodes.map((n) => n.id);
    const restart = (ids) => () => c.restart(ids);
    let nodes;
    let heal;
    switch (kind) {
      case "kill-leader":
        nodes = [t.leader];
        heal = restart(nodes);
        break;
      case "kill-follower":
        nodes = [t.follower];
        heal = restart(nodes);
        break;
      case "kill-majority":
        nodes = [t.leader, t.follower];
        heal = restart(nodes);
        break;
      case "kill-all":
        nodes = all;
        heal = restart(nodes);
        break;
      case "pause-leader":
        nodes = [t.leader];
        c.stop(t.leader);
        heal = async () => c.resume(t.leader);
        break;
      case "isolate-node":
        nodes = [this.rng.pick(all)];
        await isolate(this.topo, nodes[0]);
        heal = () => healNetwork(this.topo);
        break;
      case "isolate-leader":
        nodes = [t.leader];
        await isolate(this.topo, t.leader);
        heal = () => healNetwork(this.topo);
        break;
      case "cut-link":
        nodes = [t.leader, t.follower];
        await cut(this.topo, t.leader, t.follower);
        heal = () => healNetwork(this.topo);
        break;
      case "disk-full":
        nodes = [t.leader];
        c.fill(t.leader);
        heal = async () => c.unfill(t.leader);
        break;
      case "bit-flip":
        nodes = [t.follower];
        heal = await this.flipByte(t.follower);
        break;
      case "stream-flip":
        nodes = [this.rng.pick(all)];
        heal = await this.flipStreamByte(nodes[0]);
        break;
      case "slow-disk": {
        nodes = [t.leader];
        const point = (n) => c.operator("POST", `/__runnel/test/fail?point=log-stall&n=${n}`, 204, 5000, t.leader);
        await point(1000000);
        const handedOver = t.group === null ? Promise.resolve(true) : (async () => {
          for (let i = 0; i < 50; i++) {
            const l = (await c.leaders()).get(t.group);
            if (l && l.leader !== t.leader) return true;
            await sleep(200);
          }
          return false;
        })();
        heal = async () => {
          const moved = await handedOver;
          await point(0);
          if (!moved) this.failure ??= `slow-disk: node ${t.leader} still led group ${t.group} 10 s after its log writes stalled`;
        };
        break;
      }
      case "drain":
        nodes = [t.leader];
        await c.operator("POST", `/__runnel/cluster/drain/${t.leader}`, 202);
        heal = async () => c.operator("DELETE", `/__runnel/cluster/drain/${t.leader}`, 202);
        break;
      case "decommission": {
        const gone = this.rng.pick(all);
        const added = await c.join();
        nodes = [gone, added.id];
        await c.operator("DELETE", `/__runnel/cluster/members/${gone}`, 202);
        heal = () => c.retire(gone, { asked: true });
        break;
      }
      case "replace-node": {
        const dead = this.rng.pick(all);
        nodes = [dead];
        await c.kill(dead);
        heal = async () => {
          await c.join();
          await c.retire(dead);
        };
        break;
      }
      default:
        throw new Error(`unknown fault ${kind}`);
    }
    if (kind.startsWith("kill")) for (const id of nodes) await c.kill(id);
    const event = this.history.event({ kind, nodes, group: t.group, term: t.term, led: t.led, at: this.history.now(), healed: null });
    this.log(`fault ${this.history.events.length}: ${kind} node(s) ${nodes.join(",")}${t.group === null ? "" : ` (group ${t.group} term ${t.term})`}`);
    this.active = { event, heal };
  }

  // SIGKILLs node id, flips a byte in the middle of the data of its newest
  // open Raft segment holding data, and starts it, which must refuse;
  // returns the heal (the byte put back, the node restarted).
  async flipByte(id) {
    const c = this.cluster;
    const n = c.node(id);
    await c.kill(id);
    const raft = path.join(n.dataDir, "raft");
    let target = null;
    for (const g of fs.existsSync(raft) ? fs.readdirSync(raft) : []) {
      for (const name of fs.readdirSync(path.join(raft, g)).filter((x) => x.startsWith("open-"))) {
        const file = path.join(raft, g, name);
        const bytes = fs.readFileSync(file);
        let end = bytes.length;
        while (end > 8 && bytes[end - 1] === 0) end--;
        if (end > 256 && (!target || end > target.end)) target = { file, bytes, end };
      }
    }
    const restart = () => c.restart([id]);
    if (!target) return restart; /* nothing written worth flipping: a plain restart */
    const at = Math.floor(target.end / 2);
    const flipped = Buffer.from(target.bytes);
    flipped[at] ^= 0x20;
    fs.writeFileSync(target.file, flipped);
    c.spawn(n);
    n.signalled = true; /* its exit is expected: not one "by itself" */
    const exited = await Promise.race([n.exited, sleep(15000).then(() => null)]);
    const refused = exited && exited.code !== 0 && / is damaged at byte /.test(c.logTail(n, 5));
    if (!refused) {
      this.failure ??= `bit-flip: node ${id} started on ${target.file} with byte ${at} flipped (or did not name the damage)`;
      await c.kill(id);
    }
    return async () => {
      fs.writeFileSync(target.file, target.bytes);
      await restart();
    };
  }

  // Flips a byte in the middle of node id's largest stream data file, in
  // place (the file is being appended to: only a whole block well below
  // its end is touched); returns the heal, which waits (bounded) until the
  // node counts a repaired block.
  async flipStreamByte(id) {
    const n = this.cluster.node(id);
    const repaired = async () => {
      const a = await request(`${n.url}/__runnel/metrics`, { timeoutMs: 2000 });
      return Number(/^runnel_data_blocks_repaired_total (\d+)/m.exec(a.body.toString())?.[1] ?? NaN);
    };
    const files = [];
    const walk = (dir) => {
      for (const e of fs.existsSync(dir) ? fs.readdirSync(dir, { withFileTypes: true }) : []) {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) walk(p);
        else if (e.name.endsWith(".dat")) files.push({ p, size: fs.statSync(p).size });
      }
    };
    walk(path.join(n.dataDir, "streams"));
    const target = files.sort((a, b) => b.size - a.size)[0];
    const before = await repaired();
    if (!target || target.size < 4 * 4096 || Number.isNaN(before)) {
      this.log(`stream-flip: node ${id} holds no stream file worth flipping`);
      return async () => {};
    }
    const at = Math.floor(target.size / 2 / 4096) * 4096 + 1234;
    this.log(`stream-flip: byte ${at} of ${target.p} (${target.size} bytes)`);
    const fd = fs.openSync(target.p, "r+");
    try {
      const b = Buffer.alloc(1);
      fs.readSync(fd, b, 0, 1, at);
      b[0] ^= 0x20;
      fs.writeSync(fd, b, 0, 1, at);
    } finally {
      fs.closeSync(fd);
    }
    return async () => {
      for (let i = 0; i < 150; i++) {
        if ((await repaired()) > before) return;
        await sleep(200);
      }
      this.failure ??= `stream-flip: node ${id} did not repair byte ${at} of ${target.p} within 30 s`;
    };
  }

  async heal() {
    if (!this.active) return;
    const { event, heal } = this.active;
    this.active = null;
    try {
      await heal();
    } catch (err) {
      this.failure = `healing ${event.kind} of node(s) ${event.nodes.join(",")}: ${err.message}`;
    }
    event.healed = this.history.now();
  }

  // Undoes everything: the active fault, then any node still stopped or
  // down and any blackhole left.
  async healAll() {
    await this.heal();
    for (const n of this.cluster.nodes) this.cluster.resume(n.id);
    try {
      await this.cluster.restart(this.cluster.nodes.map((n) => n.id));
    } catch (err) {
      this.failure ??= `restarting nodes at the end: ${err.message}`;
    }
    await healNetwork(this.topo);
  }
}

// Polls the leaders every `everyMs` and counts leader changes per group.
export class LeaderMonitor {
  constructor(cluster, everyMs = 500) {
    Object.assign(this, { cluster, everyMs });
    this.last = new Map();
    this.changes = 0;
    this.running = false;
  }

  start() {
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        const leaders = await this.cluster.leaders();
        for (const [g, { leader, term }] of leaders) {
          const prev = this.last.get(g);
          if (prev && (prev.leader !== leader) && term > prev.term) this.changes++;
          if (!prev || term >= prev.term) this.last.set(g, { leader, term });
        }
        await sleep(this.everyMs);
      }
    })();
  }

  async stop() {
    this.running = false;
    await this.loop;
  }
}
