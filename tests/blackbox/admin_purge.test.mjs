// The bucket purge on a single node (docs/ADMIN.md; extensions.txt §1.2:
// the purge "permanently fences the bucket ID: later stream creates in it
// answer 404"; §11's BUCKET_ERASED): a bucket holding 600 streams, a stream
// whose history moved to the local cold store (--hot-bytes), snapshots in
// the local snapshot store and in the cold store, staged parts, and the
// source of a fork in another bucket, purged while four producers append
// to another bucket. Checked: the purge answers 202 with its progress,
// then reports done; every request for the bucket answers 404
// BUCKET_ERASED on both surfaces; nothing outside it changed (every
// acknowledged append of the writers is there, once, in order; the fork
// keeps its own bytes and answers 410 below its fork point); nothing of it
// is left on disk (no file under the data directory, the cold store's and
// the log's included, holds a byte of its streams' data or is named by one
// of their ids); the fence holds across a restart and in a backup taken
// afterwards and restored; the purge is idempotent. About 20 s.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Server, tempDir } from "./lib/server.mjs";
import { assertError, get, head, post, put, req, sleep } from "./lib/bucket.mjs";
import { appendThroughBackpressure, waitFlushed } from "./lib/history.mjs";
import { restoreAndStart } from "./lib/ops.mjs";
import { MiB, stagePart } from "./lib/snap.mjs";

const MARK = "PURGED-7f3a9c"; // in every byte the purged bucket's streams hold
const work = tempDir("runnel-purge-");
const dest = path.join(work, "backups");
const server = new Server({
  args: ["--cold-store", "--hot-bytes", String(8 * MiB), "--history-cache-bytes", String(32 * MiB),
    "--backup-to", dest],
});
const restored = [];
before(() => server.start());
after(async () => {
  for (const s of [server, ...restored]) {
    const r = await s.stop();
    assert.equal(r?.code, 0, `graceful stop: ${JSON.stringify(r)}`);
    assert.ok(!/Sanitizer|runtime error/.test(s.log), `no sanitizer report:\n${s.logTail(40)}`);
  }
});

// `n` bytes of text, each 64-byte line naming the mark.
function marked(n, tag) {
  const line = `${MARK} ${tag} `.padEnd(63, "x") + "\n";
  return Buffer.from(line.repeat(Math.ceil(n / 64)).slice(0, n));
}

const admin = async (p, method = "GET") => {
  const r = await req(`${server.url}/__runnel/admin/${p}`, { method });
  return { ...r, json: r.text ? JSON.parse(r.text) : null };
};

// Every file under dir (recursively) with its path relative to dir.
function files(dir) {
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath ?? e.path, e.name));
}

// Files under dir that hold the mark or are named by one of ids.
function traces(dir, ids) {
  const found = [];
  for (const f of files(dir)) {
    if (ids.some((id) => new RegExp(`/${id}([./-]|$)`).test(f))) found.push(`${f} (named by a purged stream)`);
    else if (fs.readFileSync(f).includes(MARK)) found.push(`${f} (holds purged bytes)`);
  }
  return found;
}

// Producers appending to the kept bucket until stop(): each write's seq,
// acknowledged ones recorded.
function writers(n) {
  const acked = Array.from({ length: n }, () => []);
  let stopped = false;
  const loops = acked.map(async (list, w) => {
    const url = `${server.url}/keep/w${w}`;
    assert.equal((await put(url)).status, 201);
    for (let seq = 0; !stopped; seq++) {
      const body = `w${w}-${seq};`;
      const r = await post(url, body, { headers: { "producer-id": `p${w}`, "producer-epoch": "0", "producer-seq": String(seq) } });
      assert.ok(r.status === 200 || r.status === 204, `a write to the kept bucket answered ${r.status} ${r.text}`);
      list.push(body);
    }
  });
  return { acked, stop: async () => { stopped = true; await Promise.all(loops); } };
}

const ids = {}; // the special streams' ids (hex), learnt before the purge

describe("a purge under write load", () => {
  let load;
  test("the bucket to purge, with cold history, snapshots, parts and a fork elsewhere", async () => {
    const u = server.url;
    for (let i = 0; i < 600; i += 1) {
      const r = await put(`${u}/gone/s${String(i).padStart(3, "0")}`, { body: marked(100, `s${i}`) });
      assert.equal(r.status, 201);
    }
    assert.equal((await put(`${u}/gone/big`, { type: "application/octet-stream" })).status, 201);
    for (let k = 0; k < 5; k++) // 10 MiB: two whole chunks move to the cold store
      await appendThroughBackpressure(`${u}/gone/big`, marked(2 * MiB, `big${k}`));
    await waitFlushed(u, 8 * MiB, 120000);
    const snaps = [["snap-small", 1000], ["snap-cold", 2 * MiB]];
    for (const [name, size] of snaps) {
      const c = await put(`${u}/gone/${name}`, { body: marked(10, name) });
      const at = encodeURIComponent(c.headers.get("stream-next-offset"));
      const r = await req(`${u}/gone/${name}/snapshot/${at}`, { method: "PUT", headers: { "content-type": "text/plain" }, body: marked(size, `${name}-body`) });
      assert.equal(r.status, 204, r.text);
    }
    const p = await put(`${u}/gone/parts`, { body: marked(10, "parts") });
    await stagePart(`${u}/gone/parts`, p.headers.get("stream-next-offset"), marked(5000, "part"));
    const src = await put(`${u}/v1/stream/gone/src`, { body: marked(640, "src") });
    assert.equal(src.status, 201);
    const fork = await put(`${u}/v1/stream/keep/fork`, { type: null, headers: { "stream-forked-from": "/v1/stream/gone/src" } });
    assert.equal(fork.status, 201, fork.text);
    assert.equal((await post(`${u}/v1/stream/keep/fork`, "own bytes")).status, 204);
    for (const name of ["big", "snap-small", "snap-cold", "parts", "src", "s000"]) {
      const s = (await admin(`buckets/gone/streams/${name}`)).json;
      ids[name] = s.id;
      if (name === "big") assert.ok(s.bytes_by_tier.cold >= 8 * MiB, `history moved: ${JSON.stringify(s.bytes_by_tier)}`);
      if (name === "snap-cold") assert.equal(s.snapshot.tier, "cold");
      if (name === "snap-small") assert.equal(s.snapshot.tier, "local");
      if (name === "parts") assert.equal(s.staged_parts.parts, 1);
    }
    assert.ok(traces(server.dataDir, Object.values(ids)).length > 0, "the bucket's bytes are on disk before the purge");
  });

  test("the purge answers 202 with its progress, then is done, while writers append elsewhere", async () => {
    load = writers(4);
    await sleep(300);
    const first = await admin("buckets/gone/purge", "POST");
    assert.equal(first.status, 202, first.text);
    assert.equal(first.json.erased, true);
    assert.match(first.json.erased_at, /^\d{4}-/);
    assert.equal(first.json.streams, 0, "no stream of it can be read any more");
    assert.ok(first.json.purge.streams_left >= 600, `progress: ${JSON.stringify(first.json.purge)}`);
    assert.ok(first.json.purge.bytes_left > 10 * MiB);
    assert.equal(first.json.purge.done, false);
    let last;
    for (const end = Date.now() + 30000; ; await sleep(100)) {
      last = (await admin("buckets/gone")).json;
      if (last.purge.done) break;
      assert.ok(Date.now() < end, `purge not done: ${JSON.stringify(last)}`);
    }
    assert.deepEqual(last.purge, { streams_left: 0, bytes_left: 0, groups_fenced: 1, groups: 1, done: true });
    await sleep(300);
    await load.stop();
  });

  test("every request for the bucket answers 404 BUCKET_ERASED, on both surfaces", async () => {
    const u = server.url;
    assertError(await get(`${u}/gone/s000?offset=-1`), 404, "BUCKET_ERASED");
    assertError(await head(`${u}/gone/big`), 404, "BUCKET_ERASED", { isHead: true });
    assertError(await put(`${u}/gone/s000`), 404, "BUCKET_ERASED");
    assertError(await put(`${u}/gone/new`), 404, "BUCKET_ERASED");
    assertError(await post(`${u}/gone/s001`, "x"), 404, "BUCKET_ERASED");
    assertError(await req(`${u}/gone/s002`, { method: "DELETE" }), 404, "BUCKET_ERASED");
    assertError(await get(`${u}/gone/snap-small/bootstrap`), 404, "BUCKET_ERASED");
    assertError(await put(`${u}/gone`), 404, "BUCKET_ERASED");
    assertError(await get(`${u}/v1/stream/gone/src?offset=-1`), 404, "BUCKET_ERASED");
    assertError(await put(`${u}/v1/stream/gone/again`), 404, "BUCKET_ERASED");
    assertError((await admin("buckets/gone/streams/big")), 404, "BUCKET_ERASED");
    assert.deepEqual((await admin("buckets/gone/streams")).json.streams, []);
  });

  test("nothing outside the bucket changed", async () => {
    for (const [w, list] of load.acked.entries()) {
      const r = await get(`${server.url}/keep/w${w}?offset=-1`);
      assert.equal(r.status, 200);
      assert.equal(r.text, list.join(""), `writer ${w}: every acknowledged append once, in order`);
      assert.ok(list.length > 5, `writer ${w} wrote during the purge (${list.length} appends)`);
    }
    const f = await head(`${server.url}/v1/stream/keep/fork`);
    assert.equal(f.status, 200);
    const forkAt = f.headers.get("stream-retained-offset");
    assert.equal(forkAt, "0000000000000000_0000000000000640", "the fork's retained offset rose to its fork point");
    const own = await get(`${server.url}/v1/stream/keep/fork?offset=${encodeURIComponent(forkAt)}`);
    assert.equal(own.text, "own bytes");
    assertError(await get(`${server.url}/v1/stream/keep/fork?offset=0000000000000000_0000000000000000`), 410, "STREAM_GONE");
    const kept = (await admin("buckets/keep")).json;
    assert.equal(kept.erased, false);
    assert.equal(kept.streams, 5);
  });

  test("nothing of the bucket is left on disk, in the cold store or in the log", async () => {
    let left;
    for (const end = Date.now() + 20000; (left = traces(server.dataDir, Object.values(ids))).length; await sleep(200))
      assert.ok(Date.now() < end, `left on disk:\n${left.join("\n")}`);
    const st = fs.statSync(path.join(server.dataDir, "cold", "parts"), { throwIfNoEntry: false });
    if (st) assert.deepEqual(files(path.join(server.dataDir, "cold", "parts")), []);
  });
});

describe("the fence stays", () => {
  test("across a restart", async () => {
    await server.restart();
    assertError(await put(`${server.url}/gone/s000`), 404, "BUCKET_ERASED");
    assertError(await get(`${server.url}/gone/big?offset=-1`), 404, "BUCKET_ERASED");
    const b = (await admin("buckets")).json.buckets.find((x) => x.bucket === "gone");
    assert.equal(b.erased, true);
    assert.equal(b.purge.done, true);
  });

  test("in a backup taken afterwards, restored", async () => {
    const r = await req(`${server.url}/__runnel/backup?name=after-purge`, { method: "POST", timeoutMs: 120000 });
    assert.equal(r.status, 200, r.text);
    const dir = path.join(work, "restored");
    const s = await restoreAndStart(dest, "after-purge", dir);
    restored.push(s);
    assertError(await put(`${s.url}/gone/s000`), 404, "BUCKET_ERASED");
    assertError(await get(`${s.url}/gone/s000?offset=-1`), 404, "BUCKET_ERASED");
    assertError(await put(`${s.url}/v1/stream/gone/x`), 404, "BUCKET_ERASED");
    assert.equal((await get(`${s.url}/keep/w0?offset=-1`)).status, 200);
    assert.deepEqual(traces(dir, Object.values(ids)), [], "the restored directory holds nothing of the bucket");
    assert.deepEqual(traces(path.join(dest, "after-purge"), Object.values(ids)), [], "nor does the backup");
  });

  test("a repeated purge changes nothing and answers 200", async () => {
    const again = await admin("buckets/gone/purge", "POST");
    assert.equal(again.status, 200, again.text);
    assert.equal(again.json.purge.done, true);
    assertError(await put(`${server.url}/gone/s000`), 404, "BUCKET_ERASED");
  });
});
