// Catch-up reads of bytes that are not in the page cache (docs/ARCHITECTURE.md,
// "The read path"): the loop thread reads stream files from the page cache
// only (preadv2 with RWF_NOWAIT); a piece that is not all there is read into
// it on a worker (counted in runnel_reads_warmed_total) and the answer goes
// on from there. What a client gets must not change: the stream's exact
// bytes, through HTTP/1.1 and HTTP/2, for an answer sent a piece at a time,
// for a small answer sent whole, and for a JSON stream read as an array.
//
// The pages are dropped with posix_fadvise(POSIX_FADV_DONTNEED) after an
// fsync (python3), and fincore (util-linux) confirms it; on a file system
// that keeps no separate page cache (tmpfs) nothing can be dropped and the
// cases are skipped, saying so. Last, a damaged block read from the disk
// still gets its typed answer (500 STREAM_DATA_DAMAGED), not a cut
// connection. The scrub and the history flush (--hot-bytes) read the page
// cache only too: a range they miss is read in on a worker
// (runnel_scrub_warmed_total, runnel_history_warmed_total); the scrub still
// finds a flipped byte there, and the moved chunks read back byte-exact.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import http2 from "node:http2";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { assertError, get, put } from "./lib/bucket.mjs";
import { scrape } from "./lib/ops.mjs";
import { MiB, append, pseudoRandom, readRange, stopAndRemove } from "./lib/snap.mjs";

/* no scrub here: its reads would warm what these cases evict */
const server = new Server({ args: ["--max-read-bytes", String(16 * MiB), "--scrub-bytes-per-second", "0"] });
before(() => server.start());
after(() => stopAndRemove(server));

const OCTET = "application/octet-stream";
const streamsDir = () => path.join(server.dataDir, "streams");

// Drops the page cache of every data file of the server; returns the
// bytes of them still resident afterwards.
const evict = () => evictFiles(streamsDir()).resident;
function dataFiles() {
  const out = execFileSync("find", [streamsDir(), "-name", "*.dat", "-size", "+0"]).toString();
  return out.trim().split("\n").filter(Boolean);
}
const warmed = async () => (await scrape(server.url)).get("runnel_reads_warmed_total");

// Evicts every data file, then runs read(), which checks its answer; the
// read must have read a piece on a worker (runnel_reads_warmed_total).
// Tried up to 3 times: once in a CI run (sanitizer build, two suites at a
// time) the JSON case read nothing on a worker, with no way left to tell
// whether its pages were back in the cache; a retry says so in the test's
// diagnostics, and the resident bytes after each eviction name the cause
// when every attempt fails. A loop whose reads may block fails all three.
async function readCold(t, read) {
  const left = [];
  for (let attempt = 1; attempt <= 3; attempt++) {
    left.push(evict());
    const before = await warmed();
    await read();
    if ((await warmed()) > before) {
      if (attempt > 1) t.diagnostic(`read on a worker at attempt ${attempt}; data bytes resident after each eviction: ${left.join(", ")}`);
      return;
    }
  }
  assert.fail(`nothing read on a worker in 3 attempts; data bytes resident after each eviction: ${left.join(", ")}`);
}

const big = pseudoRandom(24 * MiB, "cold-big");
const small = pseudoRandom(20000, "cold-small");
const messages = Array.from({ length: 3000 }, (_, i) => ({ i, pad: "x".repeat(900 + (i % 200)) }));
let canEvict = true;

describe("reads of bytes not in the page cache", () => {
  before(async () => {
    assert.equal((await put(`${server.url}/cold/big`, { type: OCTET })).status, 201);
    for (let at = 0; at < big.length; at += 8 * MiB) await append(`${server.url}/cold/big`, big.subarray(at, at + 8 * MiB));
    assert.equal((await put(`${server.url}/cold/small`, { type: OCTET })).status, 201);
    await append(`${server.url}/cold/small`, small);
    assert.equal((await put(`${server.url}/v1/stream/cold-json`, { type: "application/json" })).status, 201);
    for (let k = 0; k < messages.length; k += 500) {
      const r = await fetch(`${server.url}/v1/stream/cold-json`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(messages.slice(k, k + 500)) });
      assert.equal(r.status, 204);
    }
    const left = evict();
    canEvict = left < MiB;
  });

  test("a large answer sent a piece at a time: exact bytes, pieces read on a worker", async (t) => {
    if (!canEvict) return t.skip("the data directory's file system keeps no droppable page cache (tmpfs?)");
    await readCold(t, async () => {
      const { body } = await readRange(`${server.url}/cold/big`, "-1", null, { maxPages: 10 });
      assert.equal(body.length, big.length);
      assert.ok(body.equals(big), "the stream's bytes");
    });
  });

  test("a small answer sent whole: exact bytes, read on a worker", async (t) => {
    if (!canEvict) return t.skip("the data directory's file system keeps no droppable page cache (tmpfs?)");
    await readCold(t, async () => {
      const r = await get(`${server.url}/cold/small?offset=-1`);
      assert.equal(r.status, 200);
      assert.ok(r.body.equals(small), "the stream's bytes");
      assert.equal(r.headers.get("content-length"), String(small.length));
    });
  });

  test("a JSON stream read as an array: the same messages", async (t) => {
    if (!canEvict) return t.skip("the data directory's file system keeps no droppable page cache (tmpfs?)");
    await readCold(t, async () => {
      const r = await fetch(`${server.url}/v1/stream/cold-json?offset=-1`);
      assert.equal(r.status, 200);
      assert.deepEqual(await r.json(), messages);
    });
  });

  test("a damaged block read from the disk: 500 STREAM_DATA_DAMAGED", async (t) => {
    if (!canEvict) return t.skip("the data directory's file system keeps no droppable page cache (tmpfs?)");
    const file = dataFiles().find((f) => fs.statSync(f).size === small.length);
    assert.ok(file, "the small stream's data file");
    const fd = fs.openSync(file, "r+");
    fs.writeSync(fd, Buffer.from([small[100] ^ 0xff]), 0, 1, 100);
    fs.closeSync(fd);
    await readCold(t, async () => {
      assertError(await get(`${server.url}/cold/small?offset=-1`), 500, "STREAM_DATA_DAMAGED", { what: "a whole answer read from the disk" });
    });
  });

  test("over HTTP/2: exact bytes", async (t) => {
    if (!canEvict) return t.skip("the data directory's file system keeps no droppable page cache (tmpfs?)");
    await readCold(t, async () => {
      const session = http2.connect(server.url);
      try {
        const body = await new Promise((resolve, reject) => {
          const s = session.request({ ":path": "/cold/big?offset=-1" });
          const chunks = [];
          s.on("response", (h) => { if (h[":status"] !== 200) reject(new Error(`status ${h[":status"]}`)); });
          s.on("data", (c) => chunks.push(c));
          s.on("end", () => resolve(Buffer.concat(chunks)));
          s.on("error", reject);
        });
        assert.ok(body.length > 4 * MiB, `one answer of several pieces (${body.length} bytes)`);
        assert.ok(body.equals(big.subarray(0, body.length)), "the stream's bytes");
      } finally {
        session.close();
      }
    });
  });
});

// Drops the page cache of every file under dir (data, index, checksums;
// fsync first); returns the bytes of its data files still resident.
function evictFiles(dir) {
  const list = (...match) => execFileSync("find", [dir, "-type", "f", ...match]).toString().trim().split("\n").filter(Boolean);
  const py = `import os, sys
for f in sys.argv[1:]:
    fd = os.open(f, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)`;
  execFileSync("python3", ["-c", py, ...list()]);
  const out = execFileSync("fincore", ["--bytes", "--noheadings", "--output", "RES", ...list("-name", "*.dat", "-size", "+0")]).toString();
  return { resident: out.trim().split(/\s+/).reduce((sum, v) => sum + Number(v), 0) };
}

describe("the history flush over bytes not in the page cache", () => {
  /* written without tiering, then started again with it: the chunks to
   * move are on the disk only */
  const tiering = new Server({ args: ["--cold-store", "--scrub-bytes-per-second", "0"] });
  before(() => tiering.start());
  after(() => stopAndRemove(tiering));

  test("reads each chunk in on a worker; the moved chunks read back byte-exact", async (t) => {
    if (!canEvict) return t.skip("the data directory's file system keeps no droppable page cache (tmpfs?)");
    const data = pseudoRandom(18 * MiB, "cold-history");
    assert.equal((await put(`${tiering.url}/cold/tiered`, { type: OCTET })).status, 201);
    for (let at = 0; at < data.length; at += 6 * MiB) await append(`${tiering.url}/cold/tiered`, data.subarray(at, at + 6 * MiB));
    await tiering.stop();
    const { resident } = evictFiles(path.join(tiering.dataDir, "streams"));
    assert.ok(resident < MiB, `the pages dropped (${resident} B resident)`);
    tiering.args = [...tiering.args, "--hot-bytes", String(4 * MiB)];
    await tiering.start();
    let m;
    for (let i = 0; i < 300; i++) {
      m = await scrape(tiering.url);
      if (m.get("runnel_history_cold_bytes") >= 12 * MiB && m.get("runnel_history_flush_lag_bytes") === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(m.get("runnel_history_cold_bytes") >= 12 * MiB, `chunks moved: ${m.get("runnel_history_cold_bytes")} B`);
    assert.ok(m.get("runnel_history_warmed_total") >= 1, "chunks read in on a worker");
    const { body } = await readRange(`${tiering.url}/cold/tiered`, "-1", null, { maxPages: 20 });
    assert.ok(body.equals(data), "the stream's bytes, its cold chunks included");
  });
});

describe("the scrub over bytes not in the page cache", () => {
  const scrubbing = new Server({ args: ["--scrub-bytes-per-second", "10000000"] });
  before(() => scrubbing.start());
  after(() => stopAndRemove(scrubbing));

  test("reads them in on a worker and finds a flipped byte there", async (t) => {
    if (!canEvict) return t.skip("the data directory's file system keeps no droppable page cache (tmpfs?)");
    const data = pseudoRandom(4 * MiB, "cold-scrub");
    assert.equal((await put(`${scrubbing.url}/cold/scrubbed`, { type: OCTET })).status, 201);
    await append(`${scrubbing.url}/cold/scrubbed`, data);
    const dir = path.join(scrubbing.dataDir, "streams");
    const file = execFileSync("find", [dir, "-name", "*.dat", "-size", "+0"]).toString().trim().split("\n")[0];
    assert.equal(fs.statSync(file).size, data.length, "the stream's data file");
    /* flipped while the server is stopped, so that no scrub reads it from
     * the page cache before it is dropped from there */
    await scrubbing.stop();
    const fd = fs.openSync(file, "r+");
    fs.writeSync(fd, Buffer.from([data[3 * MiB] ^ 0xff]), 0, 1, 3 * MiB);
    fs.closeSync(fd);
    const { resident } = evictFiles(dir);
    assert.ok(resident < MiB, `the file's pages dropped (${resident} B resident)`);
    await scrubbing.start();
    let m;
    for (let i = 0; i < 200; i++) {
      m = await scrape(scrubbing.url);
      if (m.get("runnel_data_blocks_damaged_scrub_total") > 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(m.get("runnel_data_blocks_damaged_scrub_total"), 1, "the scrub found the flipped byte");
    assert.ok(m.get("runnel_scrub_warmed_total") > 0, "ranges read in on a worker");
  });
});
