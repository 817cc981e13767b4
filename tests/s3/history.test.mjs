// History tiering (--hot-bytes, src/tiers/history.c, src/engine/tiering.c)
// over the S3 cold store: runnel against s3rver behind the SigV4-verifying,
// fault-injecting proxy that tests/s3/run_with_endpoint.sh starts.
//
// The round trip: a stream of HISTORY_TOTAL_MIB (default 1024: the issue's
// 1 GiB) with a hot budget of HISTORY_HOT_MIB (default 64) is written
// (appends wait out 503 COLD_BACKPRESSURE), its whole chunks become one S3
// object each and leave the stream file, and it reads back byte-exact from
// the start through catch-up, immutable chunks and bootstrap, before and
// after a SIGKILL restart. The sanitizer build runs it smaller
// (tests/suites.cmake).
//
// Store faults: with the store unreachable, answering 500s, or slow,
// appends go on while the hot budget lasts and then get 503
// COLD_BACKPRESSURE with Retry-After; a cold read whose chunk is not cached
// gets 502 COLD_STORE_FAILED; once the store is back the flush catches up
// and every acknowledged byte reads back.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "../blackbox/lib/server.mjs";
import { assertError, req, sleep } from "../blackbox/lib/bucket.mjs";
import {
  PIECE, appendThroughBackpressure, checkBootstrap, checkCatchUp, checkChunks, localStreamBytes, offsetToken,
  streamBytes, waitFlushed, writeStream,
} from "../blackbox/lib/history.mjs";
import { scrape } from "../blackbox/lib/ops.mjs";
import { CHUNK, MiB, createStream, pseudoRandom, stopAndRemove } from "../blackbox/lib/snap.mjs";
import fs from "node:fs";
import path from "node:path";
import { clearFaults, control, fault } from "./control.mjs";

const { S3_ENDPOINT, S3_CONTROL, S3_BUCKET, S3_TEST_DIR } = process.env;
assert.ok(S3_ENDPOINT && S3_CONTROL && S3_BUCKET && S3_TEST_DIR, "run through tests/s3/run_with_endpoint.sh");
const TOTAL = Number(process.env.HISTORY_TOTAL_MIB ?? 1024) * MiB;
const HOT = Number(process.env.HISTORY_HOT_MIB ?? 64) * MiB;
const CACHE = 32 * MiB;


// History objects s3rver holds under the prefix (its files are
// "<key>._S3rver_object").
function historyObjects(prefix) {
  const dir = path.join(S3_TEST_DIR, "data", S3_BUCKET, prefix, "history");
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { recursive: true }).filter((f) => f.endsWith("._S3rver_object"));
}

const server = new Server({
  args: [
    "--cold-store=s3", "--s3-endpoint", S3_ENDPOINT, "--s3-bucket", S3_BUCKET, "--s3-prefix", "hist/",
    "--s3-timeout-ms", "2000", "--hot-bytes", String(HOT), "--history-cache-bytes", String(CACHE),
  ],
});
before(() => server.start());
after(async () => {
  await clearFaults();
  const r = await server.stop();
  assert.equal(r?.code, 0, `graceful stop: ${JSON.stringify(r)}`);
  assert.ok(!/Sanitizer|runtime error/.test(server.log), `no sanitizer report:\n${server.logTail(40)}`);
  await stopAndRemove(server);
});

describe(`a ${TOTAL / MiB} MiB stream with ${HOT / MiB} MiB hot`, () => {
  const url = () => `${server.url}/hist/big`;
  const pieces = Math.ceil(TOTAL / PIECE);
  const tail = pieces * PIECE;
  const moved = Math.floor(tail / CHUNK) * CHUNK;
  let token;

  test("written through the hot budget; whole chunks become S3 objects and leave the disk", async () => {
    token = (await createStream(url())).token;
    const t0 = Date.now();
    const refusals = await writeStream(url(), "big", 0, pieces);
    const m = await waitFlushed(server.url, moved, 600000);
    const secs = (Date.now() - t0) / 1000;
    console.log(`# wrote ${tail / MiB} MiB in ${secs.toFixed(1)} s (flushed included), ${refusals} COLD_BACKPRESSURE refusals`);
    assert.equal(m.get("runnel_history_cold_bytes"), moved, "every whole chunk is cold");
    assert.equal(historyObjects("hist").length, moved / CHUNK, "one S3 object per chunk");
    const local = localStreamBytes(server.dataDir);
    assert.ok(local <= tail - moved + 2 * CHUNK, `the stream file holds the hot tail only (${local} bytes on disk)`);
  });

  for (const round of ["before a restart", "after a SIGKILL restart"]) {
    test(`${round}: reads back byte-exact from the start (catch-up, chunks, bootstrap)`, async () => {
      if (round.startsWith("after")) {
        await server.stop("SIGKILL");
        await server.start();
      }
      const t0 = Date.now();
      await checkCatchUp(url(), "big", 0, tail);
      const secs = (Date.now() - t0) / 1000;
      console.log(`# catch-up from the cold store ${round}: ${(tail / MiB / secs).toFixed(1)} MiB/s`);
      await checkChunks(url(), token, "big", tail, { every: Math.max(1, Math.floor(tail / CHUNK / 32)) });
      await checkBootstrap(url(), "big", 0, tail);
      const m = await scrape(server.url);
      assert.ok(m.get("runnel_history_fetches_total") > 0, "chunks came from S3");
      assert.ok(m.get("runnel_history_cached_bytes") <= CACHE, "the read cache stays within its bound");
    });
  }

  test("a catch-up reader's next read is fetched ahead: after a restart only its first read misses", async () => {
    await server.stop();
    await server.start(); // an empty read cache
    // Every fetch started has landed (three reads fit the cache).
    const settled = async () => {
      for (let i = 0; i < 600; i++) {
        const m = await scrape(server.url);
        if (m.get("runnel_history_cached_bytes") === Math.min(m.get("runnel_history_fetches_total") * CHUNK, CACHE)) return m;
        await sleep(50);
      }
      assert.fail("the read cache's fetches did not land within 30 s");
    };
    let off = 0, misses;
    for (let read = 0; read < 3; read++) {
      const r = await req(`${url()}?offset=${encodeURIComponent(offsetToken(off))}`, { timeoutMs: 120000 });
      assert.equal(r.status, 200, `catch-up at ${off} answered ${r.status}`);
      const next = Number(r.headers.get("stream-next-offset").split("_")[1]);
      assert.ok(r.body.equals(streamBytes("big", off, next)), `catch-up bytes [${off}, ${next}) are byte-exact`);
      off = next;
      const m = await settled();
      if (read === 0) misses = m.get("runnel_history_cache_misses_total");
      else assert.equal(m.get("runnel_history_cache_misses_total"), misses, `read ${read} (up to ${off}) found its chunks cached`);
    }
    assert.ok(off <= moved, "the reads stayed in the cold history");
  });
});

describe("store faults", () => {
  let n = 0;
  // A stream with two cold chunks not in the read cache (the flush keeps
  // what it wrote there: a restart empties it).
  async function coldStream(seed) {
    const url = `${server.url}/hist/f${++n}`;
    const cold = (await scrape(server.url)).get("runnel_history_cold_bytes");
    await createStream(url);
    await writeStream(url, seed, 0, (2 * CHUNK) / PIECE);
    await waitFlushed(server.url, cold + 2 * CHUNK);
    await server.stop();
    await server.start();
    const h = await req(url, { method: "HEAD" });
    assert.equal(h.status, 200);
    return url;
  }

  // With rule(s) in force (or the store refusing connections), appends of
  // the stream go on until the budget is held, then 503 COLD_BACKPRESSURE;
  // a cold read answers `readStatus`; cleared, everything catches up.
  async function outage(what, start, readStatus, readCode) {
    const seed = `fault-${what}`;
    const url = await coldStream(seed);
    const m0 = await scrape(server.url);
    await start();
    let k = (2 * CHUNK) / PIECE, accepted = 0, refused = null;
    try {
      const r = await req(`${url}?offset=${encodeURIComponent(offsetToken(0))}`, { timeoutMs: 60000 });
      assertError(r, readStatus, readCode, { what: `${what}: a cold read` });
      for (let i = 0; i < (HOT + 8 * CHUNK) / PIECE; i++) {
        const a = await req(url, { method: "POST", headers: { "content-type": "application/octet-stream" },
          body: pseudoRandom(PIECE, `${seed}/${k}`), timeoutMs: 60000 });
        if (a.status === 503) {
          refused = assertError(a, 503, "COLD_BACKPRESSURE", { what: `${what}: an append` });
          assert.ok(a.headers.get("retry-after"), "Retry-After");
          break;
        }
        assert.equal(a.status, 204, `${what}: append answered ${a.status} ${a.text}`);
        accepted++;
        k++;
      }
      assert.ok(refused, `${what}: appends are refused once the hot budget is held`);
      assert.ok(accepted * PIECE >= HOT - CHUNK, `${what}: appends went on while the budget lasted (${accepted})`);
      const m1 = await scrape(server.url);
      assert.ok(m1.get("runnel_history_flush_lag_bytes") >= HOT, `${what}: the flush lag shows the backlog`);
      const before = m0.get("runnel_history_flush_failures_total");
      for (let i = 0; (await scrape(server.url)).get("runnel_history_flush_failures_total") === before; i++) {
        assert.ok(i < 600, `${what}: a failed move is counted within 60 s`);
        await sleep(100);
      }
    } finally {
      await clearFaults();
    }
    // the store is back: the refused append goes through, the backlog drains
    await appendThroughBackpressure(url, pseudoRandom(PIECE, `${seed}/${k}`));
    k++;
    await waitFlushed(server.url, 0, 120000);
    await checkCatchUp(url, seed, 0, k * PIECE);
  }

  test("unreachable (connections refused): 503 COLD_BACKPRESSURE past the budget, 502 on a cold read", () =>
    outage("refused", () => control("POST", "/refuse", { ms: 0 }), 502, "COLD_STORE_FAILED"));

  test("500s on every call: the same", () =>
    outage("500s", () => fault({ kind: "status", status: 500, code: "InternalError", count: 0 }), 502, "COLD_STORE_FAILED"));

  test("slow (every PUT and GET delayed past the timeout): 503 COLD_BACKPRESSURE for both", () =>
    outage("slow", () => fault({ kind: "delay", delay_ms: 9000, count: 0 }), 503, "COLD_BACKPRESSURE"));
});
