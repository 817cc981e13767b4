#!/usr/bin/env node
// killpoints_test.mjs - crash recovery at chosen points of the commit path.
//
// WHAT IT PROVES
//   For every kill point of the server (src/util/fault.h: the log write and
//   sync, the spare-segment rename, apply before the stream file write, the
//   checkpoint steps, snapshot publish after the blob, parts commit after the
//   assembly, retention before/after the hole punch, delete before/after the
//   file removal, history moving to the cold store: before and after the
//   object's put, after the move is recorded, before and after the stream
//   file's hole punch; the sweeps: before and after a staged part or cold
//   object is unlinked, before and after the orphan sweep's removal; a large
//   append written once: its body written to the stream file, then synced
//   there, before its log record), several pass counts N, and the
//   operations create (plain, JSON, empty, fork, created closed), append
//   (producer and plain, binary and JSON), close (with and without data),
//   delete (plain, re-create, fork source soft delete, last fork releasing
//   its source), snapshot publish (small, cold-store sized, parts commit),
//   retention and appends to streams whose history moves to the (local)
//   cold store (read back through the read cache after the restart), and
//   sweeps of staged parts no commit uses and of history objects of streams
//   that are gone (planted) while snapshots are published, and large
//   appends written once (--large-append-bytes 4096: creates of
//   5,000-40,000 bytes and some below 4096, binary appends large and small
//   to one stream, with and without producer headers, JSON appends whose
//   stored form is large, and a stream that took large appends deleted and
//   created again at its name with large appends; their log holds reference
//   records naming the range and its block checksums, not the bytes):
//     - the server dies (SIGKILL by itself) at the Nth pass of the point;
//     - restarted without the kill point on the same data directory, it
//       serves within 15 s and holds exactly the acknowledged state: for
//       each stream its existence (200/404/410), tail, closed flag, retained
//       offset, every byte from the retained offset to the tail, and its
//       latest snapshot's offset and body;
//     - the one operation each client had in flight when the server died is
//       either wholly applied or not at all (the state equals the model
//       without it or with it), so an unacknowledged write appears at most
//       once;
//     - the recovered server accepts writes again and stops gracefully
//       (after a "large" case: appends of both sizes to the streams the
//       kill interrupted, read back exact);
//     - after a sweep case, the recovered server removes every stale part
//       and planted history object within 10 s;
//     - a second crash during recovery (the replay of a log left by a
//       SIGKILL: apply before the stream-file write, retention before/after
//       the hole punch, delete before/after the file removal) loses nothing
//       either: the next recovery yields the same acknowledged state; also
//       for a log of reference records (killed while restoring a large
//       append's checksums and index entry, or after the files of a stream
//       whose reference records come earlier in the log were removed).
//
// HOW
//   For each operation kind a template data directory is prepared once by an
//   unarmed server (streams the workload needs, then SIGTERM: a checkpoint,
//   so recovery replays nothing). Each case copies the template, starts the
//   server with RUNNEL_FAULT_KILL_AT=point:N (passes counted from that start),
//   and runs three clients doing the operation kind plus a filler client
//   appending 64 KiB records (log volume, so segment rotations and
//   checkpoints happen: --wal-segment-bytes and --checkpoint-bytes are 1 MiB;
//   for "large", 4000-byte records, below its threshold, so that they still
//   go through the log).
//   Every client keeps a model of its own streams and at most one request in
//   flight. The "recovery" and "recovery-large" cases start from a template
//   left by SIGKILL with every operation still in the log (no checkpoint)
//   and arm the replay. Data directories live in /dev/shm when possible: a
//   SIGKILL keeps the page cache, so tmpfs proves the same as a disk,
//   faster (that the data file's sync of a large append is real, as the
//   log's, is the power-cut test's: tests/crash/crash_test.mjs).
//
// OUTPUT: "FAIL ..." per failed case, a "# ..." summary, and the last line
// "N passed, M failed" (one check per case: killed at the point, recovered,
// state exact, writable, graceful stop; a case whose point was not reached
// within the workload bound fails, and is listed too), plus two checks of the
// kill points themselves: an unknown point name is refused at start, and
// (the full matrix) every point the server names has a case.
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { Checks, NetError, Server, http, parseArgs, tempDir, sleep } from "./lib.mjs";

const USAGE = `usage: node tests/faults/killpoints_test.mjs --bin build/runnel [--quick] [--jobs 2]
  [--only POINT] [--ops create,append,...] [--seed N] [--case-ms 8000]
  --quick keeps the smallest and largest N of each (operation, point) pair (for the sanitizer build).`;
const opts = parseArgs(process.argv.slice(2), {
  bin: "build/runnel", quick: false, jobs: 2, only: "", ops: "", seed: 1, caseMs: 8000,
}, USAGE);

const checks = new Checks();
const BUCKET = "kpts";
const SERVER_ARGS = ["--wal-segment-bytes", "1048576", "--checkpoint-bytes", "1048576", "--test-hooks",
  "--long-poll-timeout-ms", "1000"];
const ACTORS = 3;
// The recovery template: everything stays in the log (no checkpoint), so a
// restart replays it all through the apply path's kill points.
const RECOVERY_ARGS = ["--wal-segment-bytes", "1048576", "--checkpoint-bytes", String(1 << 30), "--test-hooks"];
const RECOVERY_MIX = [["delete", 0, 1000], ["retention", 1, 30], ["publish", 2, 12], ["append", 0, 60]];
// Large appends written once: a body of at least 4 KiB goes to its stream
// file (synced) before a record naming it is logged.
const LARGE_ARGS = [...SERVER_ARGS, "--large-append-bytes", "4096"];
const AHEAD_POINTS = ["ahead-after-write", "ahead-after-sync"];
// The recovery templates: the mix each runs (workload, actor, steps), and
// the server's arguments; "recovery-large" leaves reference records in the
// log (large creates and appends, a stream deleted and created again with
// large appends, retention over them, a filler of 64 KiB appends).
const RECOVERIES = {
  recovery: { mix: RECOVERY_MIX, args: RECOVERY_ARGS },
  "recovery-large": { mix: [["large", 0, 50], ["large", 1, 50], ["retention", 2, 30]], args: [...RECOVERY_ARGS, "--large-append-bytes", "4096"] },
};
// History tiering on the local cold store: every whole 4 MiB chunk moves.
const TIER_ARGS = [...SERVER_ARGS, "--cold-store", "--hot-bytes", String(64 << 20)];
const TIER_POINTS = ["tier-before-put", "tier-after-put", "tier-after-record", "tier-before-punch", "tier-after-punch"];
// The sweeps on the local cold store: every 250 ms (a quarter of the grace).
const SWEEP_ARGS = [...SERVER_ARGS, "--cold-store", "--parts-grace-ms", "1000"];
const SWEEP_POINTS = ["sweep-before-unlink", "sweep-after-unlink", "orphan-before-remove", "orphan-after-remove"];

// ---------------------------------------------------------------- the matrix

const GENERIC = ["wal-after-write", "wal-after-sync", "apply-before-store"];
const ROTATION = ["wal-after-spare-rename", "checkpoint-after-syncfs", "checkpoint-before-rename", "checkpoint-before-drop"];
const OPS = ["create", "append", "close", "delete", "publish", "retention"];
function matrix() {
  const cases = [];
  for (const op of OPS) {
    for (const p of GENERIC) for (const n of [1, 2, 3, 5, 8, 13, 21]) cases.push({ op, point: p, n });
    for (const p of ROTATION) for (const n of [1, 2, 3]) cases.push({ op, point: p, n });
  }
  for (const n of [1, 2, 3, 5, 8, 13]) {
    cases.push({ op: "publish", point: "publish-after-blob", n });
    cases.push({ op: "retention", point: "publish-after-blob", n });
    cases.push({ op: "retention", point: "retain-before-punch", n });
    cases.push({ op: "retention", point: "retain-after-punch", n });
    cases.push({ op: "delete", point: "delete-before-remove", n });
    cases.push({ op: "delete", point: "delete-after-remove", n });
  }
  for (const n of [1, 2, 3, 4]) cases.push({ op: "publish", point: "commit-after-assemble", n });
  // history moving to the cold store: the object written, the move logged,
  // the stream file's blocks given back
  for (const p of TIER_POINTS) for (const n of [1, 2, 4, 7]) cases.push({ op: "tiered", point: p, n });
  // the sweeps: a stale part or orphan object unlinked, an orphan sweep's removal
  for (const p of SWEEP_POINTS) for (const n of [1, 3]) cases.push({ op: "sweep", point: p, n });
  // a second crash during the replay of an unclean stop
  for (const n of [1, 10, 30, 60, 90]) cases.push({ op: "recovery", point: "apply-before-store", n });
  for (const n of [1, 4, 9]) {
    cases.push({ op: "recovery", point: "retain-before-punch", n });
    cases.push({ op: "recovery", point: "retain-after-punch", n });
  }
  for (const n of [1, 10, 25]) {
    cases.push({ op: "recovery", point: "delete-before-remove", n });
    cases.push({ op: "recovery", point: "delete-after-remove", n });
  }
  // large appends written once: the generic and rotation points, the two of
  // the path (the body written, then synced, before its record), and the
  // replay of a log of reference records killed while restoring them or
  // after removing a deleted stream's files (whose records come before)
  for (const p of GENERIC) for (const n of [1, 3, 8, 21]) cases.push({ op: "large", point: p, n });
  for (const p of ROTATION) for (const n of [1, 2, 3]) cases.push({ op: "large", point: p, n });
  for (const p of AHEAD_POINTS) for (const n of [1, 2, 3, 5, 8]) cases.push({ op: "large", point: p, n });
  for (const n of [1, 20, 60, 100]) cases.push({ op: "recovery-large", point: "apply-before-store", n });
  for (const n of [1, 6]) {
    cases.push({ op: "recovery-large", point: "delete-before-remove", n });
    cases.push({ op: "recovery-large", point: "delete-after-remove", n });
  }
  let out = cases;
  if (opts.only) out = out.filter((c) => c.point === opts.only);
  if (opts.ops) out = out.filter((c) => opts.ops.split(",").includes(c.op));
  if (opts.quick) {
    // every (operation, point) pair keeps its smallest and largest N
    const groups = new Map();
    for (const c of out) {
      const k = `${c.op} ${c.point}`;
      if (!groups.has(k)) groups.set(k, []);
      groups.get(k).push(c);
    }
    out = [...groups.values()].flatMap((g) => (g.length > 1 ? [g[0], g[g.length - 1]] : g));
  }
  return out;
}

// ---------------------------------------------------------------- helpers

const tok = (n) => `0000000000000000_${String(n).padStart(16, "0")}`;
const url = (srv, name) => `${srv.url}/${BUCKET}/${name}`;
function rng(seed) {
  let a = seed >>> 0;
  return (lo, hi) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return lo + Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * (hi - lo + 1));
  };
}
function bytes(n, tag) {
  const key = crypto.createHash("sha256").update(String(tag)).digest();
  const c = crypto.createCipheriv("aes-256-ctr", key, Buffer.alloc(16));
  return Buffer.concat([c.update(Buffer.alloc(n)), c.final()]);
}
function jsonBody(tag, count) {
  const msgs = [];
  for (let i = 0; i < count; i++) msgs.push({ t: tag, i, p: bytes(8, `${tag}/${i}`).toString("hex") });
  return { body: JSON.stringify(msgs), stored: Buffer.from(msgs.map((m) => JSON.stringify(m) + "\n").join("")) };
}
function b3(type, body) {
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(type)));
  const r = spawnSync("b3sum", ["--no-names"], { input: Buffer.concat([len, Buffer.from(type), body]) });
  if (r.status !== 0) throw new Error(`b3sum failed: ${r.stderr}`);
  return r.stdout.toString().trim();
}

// A stream's state in a model. content is an array of Buffers (appends).
const live = (json = false, content = [], extra = {}) => ({ status: 200, json, content, closed: false, retained: 0, snap: null, ...extra });
const clen = (st) => st.content.reduce((a, b) => a + b.length, 0);
const cloneModel = (m) => new Map([...m].map(([k, v]) => [k, { ...v }]));

// ---------------------------------------------------------------- workloads
//
// A workload is { setup(srv, actor) -> model entries (run unarmed, once per
// template), ops(actor) -> generator of ops }. An op is { req: {name, path?,
// method, headers, body}, ok: (res) => bool, apply: (model) => void } or a
// function returning a promise of such (for multi-request steps, see parts).

async function must(res, want, what) {
  if (!want.includes(res.status)) throw new Error(`${what} answered ${res.status} ${res.text.slice(0, 200)}`);
  return res;
}
async function mkStream(srv, model, name, { type = "application/octet-stream", body, json = false, headers = {} } = {}) {
  const b = json ? jsonBody(name, 3) : null;
  const data = json ? b.stored : body ?? Buffer.alloc(0);
  await must(await http(url(srv, name), { method: "PUT", headers: { "content-type": type, ...headers }, body: json ? b.body : body }), [201], `create ${name}`);
  model.set(name, live(json, data.length ? [data] : []));
}

const WORKLOADS = {
  create: {
    async setup(srv, a, model) {
      await mkStream(srv, model, `src${a}`, { body: bytes(3000, `src${a}`) });
    },
    *ops(a) {
      const r = rng(a * 31 + opts.seed);
      for (let k = 0; ; k++) {
        const name = `c${a}-${k}`;
        const v = k % 5;
        if (v === 0) {
          const body = bytes(r(1, 3000), name);
          yield { req: { name, method: "PUT", headers: { "content-type": "application/octet-stream" }, body }, ok: [201],
            apply: (m) => m.set(name, live(false, [body])) };
        } else if (v === 1) {
          const j = jsonBody(name, r(1, 3));
          yield { req: { name, method: "PUT", headers: { "content-type": "application/json" }, body: j.body }, ok: [201],
            apply: (m) => m.set(name, live(true, [j.stored])) };
        } else if (v === 2) {
          yield { req: { name, method: "PUT", headers: { "content-type": "text/plain" } }, ok: [201], apply: (m) => m.set(name, live()) };
        } else if (v === 3) {
          const body = bytes(r(0, 500), name);
          yield { req: { name, path: `/v1/stream/${BUCKET}/${name}`, method: "PUT",
            headers: { "content-type": "application/octet-stream", "stream-forked-from": `/v1/stream/${BUCKET}/src${a}` }, body }, ok: [201],
          apply: (m) => m.set(name, live(false, [...m.get(`src${a}`).content, ...(body.length ? [body] : [])])) };
        } else {
          const body = bytes(r(1, 800), name);
          yield { req: { name, method: "PUT", headers: { "content-type": "application/octet-stream", "stream-closed": "true" }, body }, ok: [201],
            apply: (m) => m.set(name, live(false, [body], { closed: true })) };
        }
      }
    },
  },
  append: {
    async setup(srv, a, model) {
      await mkStream(srv, model, `ab${a}`, { body: bytes(500, `ab${a}`) });
      await mkStream(srv, model, `aj${a}`, { type: "application/json", json: true });
    },
    *ops(a) {
      const r = rng(a * 37 + opts.seed);
      let seq = 0;
      for (let k = 0; ; k++) {
        if (k % 2 === 0) {
          const name = `ab${a}`;
          const body = bytes(r(1, 8000), `${name}/${k}`);
          const producer = k % 4 === 0;
          const headers = { "content-type": "application/octet-stream" };
          if (producer) Object.assign(headers, { "producer-id": `p${a}`, "producer-epoch": "0", "producer-seq": String(seq++) });
          yield { req: { name, method: "POST", headers, body }, ok: producer ? [200] : [204],
            apply: (m) => { const s = m.get(name); s.content = [...s.content, body]; } };
        } else {
          const name = `aj${a}`;
          const j = jsonBody(`${name}/${k}`, r(1, 3));
          yield { req: { name, method: "POST", headers: { "content-type": "application/json" }, body: j.body }, ok: [204],
            apply: (m) => { const s = m.get(name); s.content = [...s.content, j.stored]; } };
        }
      }
    },
  },
  close: {
    async setup(srv, a, model) {
      for (let j = 0; j < 40; j++) await mkStream(srv, model, `k${a}-${j}`, { body: bytes(100, `k${a}-${j}`) });
    },
    *ops(a) {
      const r = rng(a * 41 + opts.seed);
      for (let j = 0; j < 40; j++) {
        const name = `k${a}-${j}`;
        if (j % 3 === 0) {
          const body = bytes(r(1, 2000), `${name}/x`);
          yield { req: { name, method: "POST", headers: { "content-type": "application/octet-stream" }, body }, ok: [204],
            apply: (m) => { const s = m.get(name); s.content = [...s.content, body]; } };
        }
        if (j % 2 === 0) {
          yield { req: { name, method: "POST", headers: { "stream-closed": "true" } }, ok: [204],
            apply: (m) => { m.get(name).closed = true; } };
        } else {
          const body = bytes(r(1, 2000), `${name}/c`);
          yield { req: { name, method: "POST", headers: { "content-type": "application/octet-stream", "stream-closed": "true" }, body }, ok: [204],
            apply: (m) => { const s = m.get(name); s.content = [...s.content, body]; s.closed = true; } };
        }
      }
    },
  },
  delete: {
    async setup(srv, a, model) {
      for (let j = 0; j < 30; j++) await mkStream(srv, model, `d${a}-${j}`, { body: bytes(500, `d${a}-${j}`) });
      const src = bytes(1000, `ds${a}`);
      await mkStream(srv, model, `ds${a}`, { body: src });
      const own = bytes(100, `df${a}`);
      await must(await http(`${srv.url}/v1/stream/${BUCKET}/df${a}`, { method: "PUT",
        headers: { "content-type": "application/octet-stream", "stream-forked-from": `/v1/stream/${BUCKET}/ds${a}` }, body: own }), [201], "fork");
      model.set(`df${a}`, live(false, [src, own]));
    },
    *ops(a) {
      const r = rng(a * 43 + opts.seed);
      yield { req: { name: `ds${a}`, method: "DELETE" }, ok: [204, 200],
        apply: (m) => { m.get(`ds${a}`).status = 410; } };
      for (let j = 0; j < 30; j++) {
        const name = `d${a}-${j}`;
        yield { req: { name, method: "DELETE" }, ok: [204, 200], apply: (m) => m.set(name, { status: 404 }) };
        if (j % 3 === 0) {
          const body = bytes(r(1, 1500), `${name}/again`);
          yield { req: { name, method: "PUT", headers: { "content-type": "text/plain" }, body }, ok: [201],
            apply: (m) => m.set(name, live(false, [body])) };
        }
        if (j === 8) {
          yield { req: { name: `df${a}`, method: "DELETE" }, ok: [204, 200],
            apply: (m) => { m.set(`df${a}`, { status: 404 }); m.set(`ds${a}`, { status: 404 }); } };
        }
      }
    },
  },
  publish: {
    async setup(srv, a, model) {
      await mkStream(srv, model, `p${a}`, { body: bytes(1000, `p${a}`) });
    },
    *ops(a) {
      const r = rng(a * 47 + opts.seed);
      const name = `p${a}`;
      for (let k = 0; ; k++) {
        const body = bytes(r(1, 400), `${name}/${k}`);
        yield { req: { name, method: "POST", headers: { "content-type": "application/octet-stream" }, body }, ok: [204],
          apply: (m) => { const s = m.get(name); s.content = [...s.content, body]; } };
        if (k % 4 === 3) {
          // parts commit: stage two parts (not visible), then commit them
          yield async (srv, m) => {
            const off = clen(m.get(name));
            const p1 = bytes(r(1, 20000), `${name}/${k}/p1`);
            const p2 = bytes(r(1, 20000), `${name}/${k}/p2`);
            const ids = [];
            for (const p of [p1, p2]) {
              const res = await http(`${url(srv, name)}/snapshot/${tok(off)}/parts`, { method: "POST", headers: { "content-type": "text/plain" }, body: p });
              if (res.status !== 201) throw new Error(`stage part answered ${res.status} ${res.text}`);
              ids.push(res.headers.get("stream-snapshot-part"));
            }
            const snap = Buffer.concat([p1, p2]);
            return { req: { name, path: `/${BUCKET}/${name}/snapshot/${tok(off)}`, method: "PUT",
              headers: { "content-type": "text/plain", "stream-snapshot-parts": "2", "stream-snapshot-digest": b3("text/plain", snap) },
              body: ids.map((i) => `${i}\n`).join("") }, ok: [204],
            apply: (mm) => { mm.get(name).snap = { offset: off, body: snap }; } };
          };
        } else {
          yield (srv, m) => {
            const off = clen(m.get(name));
            const snap = k % 6 === 5 ? bytes((1 << 20) + r(0, 5000), `${name}/${k}/big`) : bytes(r(1, 3000), `${name}/${k}/s`);
            return { req: { name, path: `/${BUCKET}/${name}/snapshot/${tok(off)}`, method: "PUT", headers: { "content-type": "application/x-state" }, body: snap },
              ok: [204], apply: (mm) => { mm.get(name).snap = { offset: off, body: snap }; } };
          };
        }
      }
    },
  },
  retention: {
    async setup(srv, a, model) {
      await mkStream(srv, model, `r${a}`, { body: bytes(1000, `r${a}`) });
    },
    *ops(a) {
      const r = rng(a * 53 + opts.seed);
      const name = `r${a}`;
      for (let k = 0; ; k++) {
        const body = bytes(r(1, 5000), `${name}/${k}`);
        yield { req: { name, method: "POST", headers: { "content-type": "application/octet-stream" }, body }, ok: [204],
          apply: (m) => { const s = m.get(name); s.content = [...s.content, body]; } };
        yield (srv, m) => {
          const off = clen(m.get(name));
          const snap = bytes(r(1, 500), `${name}/${k}/s`);
          return { req: { name, path: `/${BUCKET}/${name}/snapshot/${tok(off)}`, method: "PUT", headers: { "content-type": "application/x-state" }, body: snap },
            ok: [204], apply: (mm) => { mm.get(name).snap = { offset: off, body: snap }; } };
        };
        yield (srv, m) => {
          const off = clen(m.get(name));
          return { req: { name, path: `/${BUCKET}/${name}/retention/${tok(off)}`, method: "PUT" }, ok: [204],
            apply: (mm) => { mm.get(name).retained = off; } };
        };
      }
    },
  },
};

// Appends of 64-512 KiB (with the filler's, a chunk is due every few
// appends), on a server that moves history to the cold store.
WORKLOADS.tiered = {
  args: TIER_ARGS,
  async setup(srv, a, model) {
    await mkStream(srv, model, `t${a}`, { body: bytes(1000, `t${a}`) });
  },
  *ops(a) {
    const r = rng(a * 59 + opts.seed);
    const name = `t${a}`;
    for (let k = 0; ; k++) {
      const body = bytes(r(64 << 10, 512 << 10), `${name}/${k}`);
      yield { req: { name, method: "POST", headers: { "content-type": "application/octet-stream" }, body }, ok: [204],
        apply: (m) => { const s = m.get(name); s.content = [...s.content, body]; } };
    }
  },
};

// Large appends written once (LARGE_ARGS: 4 KiB and more): creates of
// 5,000-40,000 bytes, binary and JSON, and every third one below 4 KiB;
// appends to one binary stream, large (plain and with producer headers) and
// small between them (blocks shared by both paths); JSON appends whose
// stored form is large; and the trap: a stream that took large appends
// deleted, created again at its name with a large body and appended to,
// with no checkpoint between them unless the filler's log volume brings one.
// The filler appends 4000-byte records, below the threshold, so the log
// still fills, rotates and is checkpointed.
WORKLOADS.large = {
  args: LARGE_ARGS,
  filler: [4000, 2600],
  async setup(srv, a, model) {
    await mkStream(srv, model, `lb${a}`, { body: bytes(6000, `lb${a}`) });
    await mkStream(srv, model, `lj${a}`, { type: "application/json", json: true });
    await mkStream(srv, model, `lt${a}`, { body: bytes(9000, `lt${a}`) });
  },
  *ops(a) {
    const r = rng(a * 67 + opts.seed);
    const octet = { "content-type": "application/octet-stream" };
    const append = (name, body, headers = octet, ok = [204]) => ({ req: { name, method: "POST", headers, body }, ok,
      apply: (m) => { const s = m.get(name); s.content = [...s.content, body]; } });
    let seq = 0;
    for (let k = 0; ; k++) {
      const tag = `l${a}/${k}`;
      const name = `lc${a}-${k}`;
      if (k % 3 === 1) {
        const j = jsonBody(name, r(120, 500)); // 5-25 KB stored
        yield { req: { name, method: "PUT", headers: { "content-type": "application/json" }, body: j.body }, ok: [201],
          apply: (m) => m.set(name, live(true, [j.stored])) };
      } else {
        const body = bytes(k % 3 === 0 ? r(5000, 40000) : r(1, 4095), name);
        yield { req: { name, method: "PUT", headers: octet, body }, ok: [201], apply: (m) => m.set(name, live(false, [body])) };
      }
      yield append(`lb${a}`, bytes(r(4096, 40000), `${tag}/b`));
      yield append(`lb${a}`, bytes(r(1, 4095), `${tag}/s`));
      yield append(`lb${a}`, bytes(r(5000, 40000), `${tag}/p`),
        { ...octet, "producer-id": `lp${a}`, "producer-epoch": "0", "producer-seq": String(seq++) }, [200]);
      const j = jsonBody(`lj${a}/${k}`, r(120, 500));
      yield { req: { name: `lj${a}`, method: "POST", headers: { "content-type": "application/json" }, body: j.body }, ok: [204],
        apply: (m) => { const s = m.get(`lj${a}`); s.content = [...s.content, j.stored]; } };
      // the trap: lt{a} took a large append; deleted, created again at its
      // name (another stream file) with a large body, appended to
      const t = `lt${a}`;
      yield append(t, bytes(r(5000, 40000), `${tag}/t1`));
      yield { req: { name: t, method: "DELETE" }, ok: [204, 200], apply: (m) => m.set(t, { status: 404 }) };
      const again = bytes(r(5000, 40000), `${tag}/again`);
      yield { req: { name: t, method: "PUT", headers: octet, body: again }, ok: [201], apply: (m) => m.set(t, live(false, [again])) };
      yield append(t, bytes(r(5000, 40000), `${tag}/t2`));
    }
  },
  // the recovered server takes appends of both sizes to each binary stream
  // (a killed large append may have left its bytes and checksums past the
  // tail, in the tail's block) and reads them back
  async settled(srv) {
    const issues = [];
    for (let a = 0; a < ACTORS; a++) {
      const name = `lb${a}`;
      const h = await http(url(srv, name), { method: "HEAD" });
      if (h.status !== 200) { issues.push(`${name}: HEAD after the recovery answered ${h.status}`); continue; }
      let off = h.headers.get("stream-next-offset");
      const failed = issues.length;
      const more = [bytes(100, `${name}/after/1`), bytes(70000, `${name}/after/2`), bytes(3000, `${name}/after/3`), bytes(9000, `${name}/after/4`)];
      for (const body of more) {
        const w = await http(url(srv, name), { method: "POST", headers: { "content-type": "application/octet-stream" }, body });
        if (w.status !== 204) issues.push(`${name}: an append of ${body.length} bytes after the recovery answered ${w.status} ${w.text.slice(0, 160)}`);
      }
      if (issues.length > failed) continue;
      const parts = [];
      for (let i = 0; i < 100; i++) {
        const g = await http(`${url(srv, name)}?offset=${off}`);
        if (g.status !== 200) { issues.push(`${name}: a read at ${off} after the recovery's appends answered ${g.status}`); break; }
        parts.push(g.body);
        off = g.headers.get("stream-next-offset");
        if (g.headers.get("stream-up-to-date") === "true") break;
      }
      if (!Buffer.concat(parts).equals(Buffer.concat(more))) issues.push(`${name}: the appends after the recovery read back as ${Buffer.concat(parts).length} other bytes`);
    }
    return issues;
  },
};

// Files under dir at any depth ([] when it does not exist), as paths
// relative to dir; temporary files of interrupted writes are left out.
function filesUnder(dir) {
  let names = [];
  try {
    names = fs.readdirSync(dir, { recursive: true });
  } catch {
    return [];
  }
  return names.filter((f) => {
    try {
      return !f.endsWith(".tmp") && fs.statSync(path.join(dir, f)).isFile();
    } catch {
      return false; // removed meanwhile
    }
  });
}

// Appends, a part staged and never committed (stale once the grace went
// by) and a history object of a stream no state has (ids are issued from
// 1; "ff..." never is) planted in the cold store at every step; every third
// step a snapshot, small or cold-store sized, is published. After the
// restart every stale part and planted object must go.
WORKLOADS.sweep = {
  args: SWEEP_ARGS,
  async setup(srv, a, model) {
    await mkStream(srv, model, `w${a}`, { body: bytes(1000, `w${a}`) });
  },
  *ops(a) {
    const r = rng(a * 61 + opts.seed);
    const name = `w${a}`;
    for (let k = 0; ; k++) {
      yield async (srv, m) => {
        const off = clen(m.get(name));
        const part = await http(`${url(srv, name)}/snapshot/${tok(off)}/parts`, { method: "POST", headers: { "content-type": "text/plain" }, body: bytes(r(1, 2000), `${name}/${k}/part`) });
        if (part.status !== 201) throw new Error(`stage part answered ${part.status} ${part.text}`);
        const id = `ff${String(a).padStart(6, "0")}${k.toString(16).padStart(8, "0")}`;
        fs.mkdirSync(path.join(srv.dataDir, "cold", "history", id), { recursive: true });
        fs.writeFileSync(path.join(srv.dataDir, "cold", "history", id, "0000000000000000"), bytes(1000, id));
        const body = bytes(r(1, 3000), `${name}/${k}`);
        return { req: { name, method: "POST", headers: { "content-type": "application/octet-stream" }, body }, ok: [204],
          apply: (mm) => { const s = mm.get(name); s.content = [...s.content, body]; } };
      };
      if (k % 3 === 2) {
        yield (srv, m) => {
          const off = clen(m.get(name));
          const snap = k % 6 === 5 ? bytes((1 << 20) + r(0, 5000), `${name}/${k}/big`) : bytes(r(1, 3000), `${name}/${k}/s`);
          return { req: { name, path: `/${BUCKET}/${name}/snapshot/${tok(off)}`, method: "PUT", headers: { "content-type": "application/x-state" }, body: snap },
            ok: [204], apply: (mm) => { mm.get(name).snap = { offset: off, body: snap }; } };
        };
      }
    }
  },
  // the recovered server's sweeps remove what the sweep cases left
  async settled(srv) {
    const left = () => ["parts", "history"].flatMap((d) => filesUnder(path.join(srv.dataDir, "cold", d)).map((f) => `${d}/${f}`));
    const t0 = Date.now();
    while (left().length && Date.now() - t0 < 10000) await sleep(200);
    const l = left();
    if (!l.length) return [];
    // what the sweeps said after the restart, to tell a failed listing from a slow one
    const said = fs.readFileSync(srv.logPath, "utf8").split("\n").filter((x) => /orphan_sweep|parts_sweep/.test(x)).slice(-4);
    return [`${l.length} stale parts or orphan objects left 10 s after the restart: ${l.slice(0, 3).join(", ")}; the log: ${said.join(" | ") || "nothing about sweeps"}`];
  },
};

const FILLER = {
  async setup(srv, model) {
    await mkStream(srv, model, "filler");
  },
  // count appends of size bytes (a workload's `filler` names its own)
  *ops(size = 64 * 1024, count = 160) {
    for (let k = 0; k < count; k++) {
      const body = bytes(size, `filler/${k}`);
      yield { req: { name: "filler", method: "POST", headers: { "content-type": "application/octet-stream" }, body }, ok: [204],
        apply: (m) => { const s = m.get("filler"); s.content = [...s.content, body]; } };
    }
  },
};

// ---------------------------------------------------------------- observing and comparing

async function observe(srv, name) {
  const h = await http(url(srv, name), { method: "HEAD" });
  if (h.status !== 200) return { status: h.status };
  const tail = Number(h.headers.get("stream-next-offset").split("_")[1]);
  const retained = Number((h.headers.get("stream-retained-offset") ?? tok(0)).split("_")[1]);
  const o = { status: 200, tail, retained, closed: h.headers.get("stream-closed") === "true", snap: null };
  const snapOff = h.headers.get("stream-snapshot-offset");
  if (snapOff) {
    const g = await http(`${url(srv, name)}/snapshot/${snapOff}`);
    o.snap = { offset: Number(snapOff.split("_")[1]), status: g.status, body: g.body };
  }
  const parts = [];
  let off = tok(retained);
  for (let i = 0; i < 10000; i++) {
    const r = await http(`${url(srv, name)}?offset=${off}`);
    if (r.status !== 200) { o.readError = `read at ${off} answered ${r.status}`; break; }
    parts.push(r.body);
    off = r.headers.get("stream-next-offset");
    if (r.headers.get("stream-up-to-date") === "true") break;
  }
  o.data = Buffer.concat(parts);
  return o;
}

// Differences between an observed stream and a model state ([] when equal).
function diff(name, o, st) {
  const want = st ?? { status: 404 };
  if (o.status !== want.status) return [`${name}: status ${o.status}, expected ${want.status}`];
  if (o.status !== 200) return [];
  const out = [];
  const content = Buffer.concat(want.content);
  if (o.tail !== content.length) out.push(`${name}: tail ${o.tail}, expected ${content.length}`);
  if (o.closed !== want.closed) out.push(`${name}: closed ${o.closed}, expected ${want.closed}`);
  if (o.retained !== want.retained) out.push(`${name}: retained ${o.retained}, expected ${want.retained}`);
  if (o.readError) out.push(`${name}: ${o.readError}`);
  else if (!o.data.equals(content.subarray(want.retained))) {
    let i = 0;
    const w = content.subarray(want.retained);
    while (i < o.data.length && o.data[i] === w[i]) i++;
    out.push(`${name}: bytes differ from ${want.retained + i} (got ${o.data.length}, expected ${w.length})`);
  }
  if (!want.snap !== !o.snap) out.push(`${name}: snapshot ${o.snap ? `at ${o.snap.offset}` : "absent"}, expected ${want.snap ? `at ${want.snap.offset}` : "none"}`);
  else if (want.snap) {
    if (o.snap.offset !== want.snap.offset) out.push(`${name}: snapshot at ${o.snap.offset}, expected ${want.snap.offset}`);
    else if (o.snap.status !== 200 || !o.snap.body.equals(want.snap.body)) out.push(`${name}: snapshot body differs (read ${o.snap.status}, ${o.snap.body.length} bytes, expected ${want.snap.body.length})`);
  }
  return out;
}

// ---------------------------------------------------------------- templates and cases

const root = tempDir("runnel-kp-", { fast: true, keep: true });
const templates = new Map(); // op -> {dir, models: [Map per actor], filler: Map}

function* take(gen, n) {
  for (const x of gen) {
    if (n-- <= 0) return;
    yield x;
  }
}

// A recovery template (RECOVERIES): its mix of workloads run to completion
// (acknowledged), then SIGKILL, so the next start replays the whole log.
async function buildRecoveryTemplate(op) {
  const { mix, args } = RECOVERIES[op];
  const dir = path.join(root, `template-${op}`);
  fs.mkdirSync(dir);
  const srv = new Server({ bin: opts.bin, dataDir: path.join(dir, "data"), args, logPath: path.join(dir, "server.log") });
  const models = [];
  const filler = new Map();
  try {
    await srv.start();
    for (const [kind, a, steps] of mix) {
      const m = new Map();
      await WORKLOADS[kind].setup(srv, a, m);
      const r = await runClient(srv, m, take(WORKLOADS[kind].ops(a), steps), { stop: false });
      if (r.inDoubt || r.issues.length) throw new Error(`${op} template (${kind}): ${r.issues.join("; ") || "a request failed"}`);
      models.push(m);
    }
    await FILLER.setup(srv, filler);
    const r = await runClient(srv, filler, take(FILLER.ops(), 20), { stop: false });
    if (r.inDoubt || r.issues.length) throw new Error(`${op} template (filler): ${r.issues.join("; ")}`);
  } catch (e) {
    srv.killNow();
    throw e;
  }
  await srv.stop("SIGKILL");
  templates.set(op, { dir, models, filler, args, replay: true });
}

async function buildTemplate(op) {
  if (op in RECOVERIES) return buildRecoveryTemplate(op);
  const dir = path.join(root, `template-${op}`);
  fs.mkdirSync(dir);
  const args = WORKLOADS[op].args ?? SERVER_ARGS;
  const srv = new Server({ bin: opts.bin, dataDir: path.join(dir, "data"), args, logPath: path.join(dir, "server.log") });
  const models = [];
  const filler = new Map();
  try {
    await srv.start();
    for (let a = 0; a < ACTORS; a++) {
      const m = new Map();
      await WORKLOADS[op].setup(srv, a, m);
      models.push(m);
    }
    await FILLER.setup(srv, filler);
  } catch (e) {
    srv.killNow();
    throw e;
  }
  const ex = await srv.stop("SIGTERM");
  if (ex.code !== 0) throw new Error(`template server for ${op} exited ${JSON.stringify(ex)}`);
  templates.set(op, { dir, models, filler, args });
}

// Runs one client: ops in order, one in flight. Returns {inDoubt, issues}.
async function runClient(srv, model, gen, ctx) {
  const issues = [];
  for (const step of gen) {
    if (ctx.stop) return { inDoubt: null, issues };
    let op;
    try {
      op = typeof step === "function" ? await step(srv, model) : step;
    } catch (e) {
      // a preparatory request (a part upload) failed: nothing of the op was sent
      if (e instanceof NetError || /fetch failed|ECONN|socket/.test(String(e.message))) { ctx.stop = true; return { inDoubt: null, issues }; }
      issues.push(String(e.message));
      ctx.stop = true;
      return { inDoubt: null, issues };
    }
    const r = op.req;
    let res;
    try {
      res = await http(`${srv.url}${r.path ?? `/${BUCKET}/${r.name}`}`, { method: r.method, headers: r.headers, body: r.body, timeoutMs: 20000 });
    } catch (e) {
      ctx.stop = true;
      return { inDoubt: op, issues };
    }
    if (!op.ok.includes(res.status)) {
      issues.push(`${r.method} ${r.path ?? r.name} answered ${res.status} ${res.text.slice(0, 160)} (expected ${op.ok.join("/")})`);
      ctx.stop = true;
      return { inDoubt: null, issues };
    }
    op.apply(model);
  }
  return { inDoubt: null, issues };
}

async function runCase(c, idx) {
  const tpl = templates.get(c.op);
  const dir = path.join(root, `case-${idx}`);
  fs.cpSync(tpl.dir, dir, { recursive: true });
  fs.rmSync(path.join(dir, "server.log"), { force: true });
  const logPath = path.join(dir, "server.log");
  const dataDir = path.join(dir, "data");
  const name = `${c.op} ${c.point}:${c.n}`;
  const issues = [];
  const models = tpl.models.map(cloneModel);
  const filler = cloneModel(tpl.filler);
  const args = tpl.args ?? SERVER_ARGS;
  let srv = new Server({ bin: opts.bin, dataDir, args, logPath, env: { RUNNEL_FAULT_KILL_AT: `${c.point}:${c.n}` } });
  let reached = false;
  try {
    try {
      await srv.start();
    } catch (e) {
      if (srv.exitInfo?.signal !== "SIGKILL") throw e;
      reached = true; // killed during start (recovery)
      if (!fs.readFileSync(logPath, "utf8").includes("killed at a kill point")) issues.push("server died by SIGKILL without the kill-point message");
    }
    let results = [];
    if (!reached) {
      const ctx = { stop: false };
      const timer = setTimeout(() => { ctx.stop = true; }, opts.caseMs);
      const clients = tpl.replay ? [] : models.map((m, a) => runClient(srv, m, WORKLOADS[c.op].ops(a), ctx));
      if (!tpl.replay) clients.push(runClient(srv, filler, FILLER.ops(...(WORKLOADS[c.op].filler ?? [])), ctx));
      results = await Promise.all(clients);
      clearTimeout(timer);
      for (const r of results) issues.push(...r.issues);
      // a request without an answer means the server is dying: give it time
      const dying = results.some((r) => r.inDoubt);
      const ex = await Promise.race([srv.exited, sleep(dying ? 10000 : 300).then(() => null)]);
      if (ex === null) {
        // the point was not reached: a failure (a point removed from the
        // code, or a workload that no longer passes it, proves nothing);
        // stop and still verify (nothing in doubt)
        issues.push(`the kill point was not reached: the server passed ${c.point} fewer than ${c.n} times in ${opts.caseMs} ms of workload`);
        const stopEx = await srv.stop("SIGTERM");
        if (results.some((r) => r.inDoubt)) issues.push(`a request failed without the server dying (${JSON.stringify(stopEx)})`);
      } else if (ex.signal !== "SIGKILL") {
        issues.push(`server exited ${JSON.stringify(ex)}, expected SIGKILL at the kill point`);
      } else {
        reached = true;
        if (!fs.readFileSync(logPath, "utf8").includes("killed at a kill point")) issues.push("server died by SIGKILL without the kill-point message");
      }
    }
    // restart without the kill point and verify every client's streams
    srv = new Server({ bin: opts.bin, dataDir, args, logPath, port: srv.port });
    await srv.start();
    // no write has run since the start, so no checkpoint is being written
    if (fs.existsSync(path.join(dataDir, "checkpoint.tmp"))) issues.push("recovery left a half-written checkpoint.tmp behind");
    const all = [...models.map((m, a) => ({ m, inDoubt: results[a]?.inDoubt })), { m: filler, inDoubt: results[models.length]?.inDoubt }];
    let applied = 0;
    for (const { m, inDoubt } of all) {
      const names = new Set(m.keys());
      let after = null;
      if (inDoubt) {
        after = cloneModel(m);
        inDoubt.apply(after);
        for (const k of after.keys()) names.add(k);
      }
      const observed = new Map();
      for (const n of names) observed.set(n, await observe(srv, n));
      const before = [...names].flatMap((n) => diff(n, observed.get(n), m.get(n)));
      if (before.length === 0) continue;
      const withOp = after ? [...names].flatMap((n) => diff(n, observed.get(n), after.get(n))) : null;
      if (withOp && withOp.length === 0) { applied++; continue; }
      issues.push(...before.map((d) => `${d}${inDoubt ? ` (nor with the in-flight ${inDoubt.req.method} ${inDoubt.req.path ?? inDoubt.req.name}: ${withOp[0]})` : ""}`));
    }
    if (WORKLOADS[c.op]?.settled) issues.push(...await WORKLOADS[c.op].settled(srv));
    // writable again, and a graceful stop
    const w = await http(url(srv, "filler"), { method: "POST", headers: { "content-type": "application/octet-stream" }, body: "after" });
    if (w.status !== 204) issues.push(`append after recovery answered ${w.status} ${w.text.slice(0, 200)}`);
    const ex = await srv.stop("SIGTERM");
    if (ex.code !== 0) issues.push(`graceful stop after recovery exited ${JSON.stringify(ex)}`);
    const inDoubtCount = results.filter((r) => r?.inDoubt).length;
    return { name, reached, issues, inDoubt: inDoubtCount, applied };
  } catch (e) {
    issues.push(`error: ${e.message.slice(0, 1500)}`);
    srv.killNow();
    return { name, reached, issues, inDoubt: 0, applied: 0 };
  } finally {
    if (issues.length === 0) fs.rmSync(dir, { recursive: true, force: true });
    else issues.push(`(kept ${dir})`);
  }
}

// The server refuses a kill point it does not have (a misspelt or removed
// point would never fire), naming the ones it has; the full matrix has a
// case for each of those.
async function checkPointNames(cases) {
  const dir = tempDir("runnel-kp-names-");
  const srv = new Server({ bin: opts.bin, dataDir: dir, args: SERVER_ARGS, env: { RUNNEL_FAULT_KILL_AT: "no-such-point:1" } });
  let started = null;
  try {
    await srv.start({ readyMs: 5000 });
    started = "it started";
  } catch { /* refused, as it must */ }
  srv.killNow();
  const ex = await srv.exited;
  const m = srv.log.match(/names no kill point of this build: no-such-point \(known: ([^)]*)\)/);
  checks.check("an unknown kill point is refused at start (exit 1, naming the known points)",
    !started && ex.code === 1 && m !== null, `${started ?? `exit ${JSON.stringify(ex)}`}: ${srv.logTail(3)}`);
  if (m && !opts.only && !opts.ops && !opts.quick) {
    const tested = new Set(cases.map((c) => c.point));
    const missing = m[1].split(" ").filter((p) => !tested.has(p));
    checks.check("every kill point of the server has a case", missing.length === 0, `no case for ${missing.join(", ")}`);
  }
  fs.rmSync(dir, { recursive: true, force: true });
}

async function main() {
  const t0 = Date.now();
  const cases = matrix();
  console.log(`# kill-point test: ${cases.length} cases, ${opts.jobs} at a time, data under ${root}`);
  await checkPointNames(cases);
  for (const op of new Set(cases.map((c) => c.op))) await buildTemplate(op);
  let next = 0;
  const notReached = [];
  let hit = 0, inDoubt = 0, applied = 0;
  const perPoint = new Map();
  async function worker() {
    while (next < cases.length) {
      const i = next++;
      const c = cases[i];
      const t = Date.now();
      const r = await runCase(c, i);
      if (r.reached) hit++;
      else notReached.push(r.name);
      inDoubt += r.inDoubt;
      applied += r.applied;
      if (r.reached) perPoint.set(c.point, (perPoint.get(c.point) ?? 0) + 1);
      checks.check(`${r.name}`, r.issues);
      if (process.env.KP_VERBOSE) console.log(`# ${r.name}: ${r.reached ? "killed" : "not reached"}, ${Date.now() - t} ms`);
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, opts.jobs) }, worker));
  console.log(`# kill points hit: ${hit} of ${cases.length} cases (${[...perPoint].map(([p, n]) => `${p}=${n}`).join(" ")})`);
  if (notReached.length) console.log(`# not reached within the workload bound: ${notReached.join(", ")}`);
  console.log(`# requests in flight at the kill: ${inDoubt}; found applied after recovery: ${applied}`);
  console.log(`# runtime ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  if (checks.failed === 0) fs.rmSync(root, { recursive: true, force: true });
  process.exit(checks.summary());
}

main().catch((e) => {
  console.log(`FAIL internal error: ${e.stack}`);
  checks.failed++;
  process.exit(checks.summary());
});
