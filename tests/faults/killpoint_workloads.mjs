// killpoint_workloads.mjs - the clients of the kill-point matrix
// (killpoints_test.mjs): per operation kind, how a template's streams are
// made, what each client does (a generator of requests, each with the
// change it makes to the client's model of its streams), and the filler
// that keeps the log rotating; plus the helpers they share with the test.
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { http, sleep } from "./lib.mjs";

export const BUCKET = "kpts";
export const ACTORS = 3;
export const SERVER_ARGS = ["--wal-segment-bytes", "1048576", "--checkpoint-bytes", "1048576", "--test-hooks",
  "--long-poll-timeout-ms", "1000"];
// Large appends written once: a body of at least 4 KiB goes to its stream
// file (synced) before a record naming it is logged.
export const LARGE_ARGS = [...SERVER_ARGS, "--large-append-bytes", "4096"];
// History tiering on the local cold store: every whole 4 MiB chunk moves.
export const TIER_ARGS = [...SERVER_ARGS, "--cold-store", "--hot-bytes", String(64 << 20)];
// The sweeps on the local cold store: every 250 ms (a quarter of the grace).
export const SWEEP_ARGS = [...SERVER_ARGS, "--cold-store", "--parts-grace-ms", "1000"];

// The run's seed (--seed), which every client's random choices derive from.
let seed = 1;
export function useSeed(n) {
  seed = n;
}

// ---------------------------------------------------------------- helpers

export const tok = (n) => `0000000000000000_${String(n).padStart(16, "0")}`;
export const url = (srv, name) => `${srv.url}/${BUCKET}/${name}`;
export function rng(seed) {
  let a = seed >>> 0;
  return (lo, hi) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return lo + Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * (hi - lo + 1));
  };
}
export function bytes(n, tag) {
  const key = crypto.createHash("sha256").update(String(tag)).digest();
  const c = crypto.createCipheriv("aes-256-ctr", key, Buffer.alloc(16));
  return Buffer.concat([c.update(Buffer.alloc(n)), c.final()]);
}
export function jsonBody(tag, count) {
  const msgs = [];
  for (let i = 0; i < count; i++) msgs.push({ t: tag, i, p: bytes(8, `${tag}/${i}`).toString("hex") });
  return { body: JSON.stringify(msgs), stored: Buffer.from(msgs.map((m) => JSON.stringify(m) + "\n").join("")) };
}
export function b3(type, body) {
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(type)));
  const r = spawnSync("b3sum", ["--no-names"], { input: Buffer.concat([len, Buffer.from(type), body]) });
  if (r.status !== 0) throw new Error(`b3sum failed: ${r.stderr}`);
  return r.stdout.toString().trim();
}

// A stream's state in a model. content is an array of Buffers (appends).
export const live = (json = false, content = [], extra = {}) => ({ status: 200, json, content, closed: false, retained: 0, snap: null, ...extra });
export const clen = (st) => st.content.reduce((a, b) => a + b.length, 0);
export const cloneModel = (m) => new Map([...m].map(([k, v]) => [k, { ...v }]));

// ---------------------------------------------------------------- workloads
//
// A workload is { setup(srv, actor) -> model entries (run unarmed, once per
// template), ops(actor) -> generator of ops }. An op is { req: {name, path?,
// method, headers, body}, ok: (res) => bool, apply: (model) => void } or a
// function returning a promise of such (for multi-request steps, see parts).

export async function must(res, want, what) {
  if (!want.includes(res.status)) throw new Error(`${what} answered ${res.status} ${res.text.slice(0, 200)}`);
  return res;
}
export async function mkStream(srv, model, name, { type = "application/octet-stream", body, json = false, headers = {} } = {}) {
  const b = json ? jsonBody(name, 3) : null;
  const data = json ? b.stored : body ?? Buffer.alloc(0);
  await must(await http(url(srv, name), { method: "PUT", headers: { "content-type": type, ...headers }, body: json ? b.body : body }), [201], `create ${name}`);
  model.set(name, live(json, data.length ? [data] : []));
}

export const WORKLOADS = {
  create: {
    async setup(srv, a, model) {
      await mkStream(srv, model, `src${a}`, { body: bytes(3000, `src${a}`) });
    },
    *ops(a) {
      const r = rng(a * 31 + seed);
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
      const r = rng(a * 37 + seed);
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
      const r = rng(a * 41 + seed);
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
      const r = rng(a * 43 + seed);
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
      const r = rng(a * 47 + seed);
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
      const r = rng(a * 53 + seed);
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
    const r = rng(a * 59 + seed);
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
// appends to one binary stream, large (plain and with producer headers;
// 64 KiB and more: written while the body arrives) and small between them
// (blocks shared by both paths); JSON appends whose
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
    const r = rng(a * 67 + seed);
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
      // declared 64 KiB or more: written while its body arrives
      yield append(`lb${a}`, bytes(r(65536, 160000), `${tag}/w`));
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
export function filesUnder(dir) {
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
    const r = rng(a * 61 + seed);
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

export const FILLER = {
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

