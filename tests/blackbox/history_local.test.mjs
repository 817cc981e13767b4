// History tiering (--hot-bytes) over the local-directory cold store
// (--cold-store: <data>/cold): every whole 4 MiB chunk below a stream's
// tail moves to an object of its own and leaves the stream file; reads
// below the hot start come back byte-exact through the read cache by
// catch-up, immutable chunks, bootstrap and a fork's inherited range,
// before and after a SIGKILL restart; an orphan history object (of a
// stream that is gone) is swept while the live stream's objects stay; a
// backup taken under appends copies the cold history and restores
// byte-exact (§2.4 headers); the settings are checked at start.
// The same over S3, with store faults: tests/s3/history.test.mjs.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { Server } from "./lib/server.mjs";
import { get, head, openSse, put, req } from "./lib/bucket.mjs";
import {
  PIECE, checkBootstrap, checkCatchUp, checkChunks, localStreamBytes, offsetToken, streamBytes, waitFlushed,
  writeStream,
} from "./lib/history.mjs";
import { runCli, scrape } from "./lib/ops.mjs";
import { readAll, tempDir } from "./lib/server.mjs";
import { CHUNK, MiB, createStream, stopAndRemove } from "./lib/snap.mjs";

const HOT = 8 * MiB;
const TOTAL = 42 * MiB; // ten whole chunks and a hot tail of 2 MiB
const server = new Server({
  // the shortest grace: the orphan sweep runs every 250 ms
  args: ["--cold-store", "--hot-bytes", String(HOT), "--history-cache-bytes", String(32 * MiB), "--parts-grace-ms", "1000"],
});
before(() => server.start());
after(async () => {
  const r = await server.stop();
  assert.equal(r?.code, 0, `graceful stop: ${JSON.stringify(r)}`);
  assert.ok(!/Sanitizer|runtime error/.test(server.log), `no sanitizer report:\n${server.logTail(40)}`);
  await stopAndRemove(server);
});

describe("history in the local cold store", () => {
  const url = () => `${server.url}/hist/big`;
  let token;
  const pieces = Math.ceil(TOTAL / PIECE);
  const tail = pieces * PIECE;
  const moved = Math.floor(tail / CHUNK) * CHUNK;

  test("whole chunks move to objects of their own and leave the stream file", async () => {
    token = (await createStream(url())).token;
    await writeStream(url(), "big", 0, pieces);
    const m = await waitFlushed(server.url, moved);
    assert.equal(m.get("runnel_history_cold_bytes"), moved, "every whole chunk is cold");
    assert.equal(m.get("runnel_hot_bytes"), tail - moved, "the rest is hot");
    assert.ok(m.get("runnel_history_flushed_bytes_total") >= moved, "the flush counted them");
    const objects = fs.readdirSync(path.join(server.dataDir, "cold", "history"), { recursive: true })
      .filter((f) => /^[0-9a-f]{16}\/[0-9a-f]{16}$/.test(f));
    assert.equal(objects.length, moved / CHUNK, `one object per chunk: ${objects}`);
    const local = localStreamBytes(server.dataDir);
    assert.ok(local <= tail - moved + 2 * CHUNK, `the stream file gave the moved bytes back (${local} bytes on disk)`);
  });

  test("an orphan history object is swept; the live stream's objects stay (read back after the restart below)", async () => {
    const objects = () => fs.readdirSync(path.join(server.dataDir, "cold", "history"), { recursive: true })
      .filter((f) => /^[0-9a-f]{16}\/[0-9a-f]{16}$/.test(f));
    const live = objects();
    // a chunk of a stream id no stream has: its drop failed, or a crash came first
    const gone = path.join(server.dataDir, "cold", "history", "00ffffffffff0001");
    fs.mkdirSync(gone);
    const orphan = path.join(gone, "0000000000000000");
    fs.writeFileSync(orphan, Buffer.alloc(4096, 7));
    const t0 = Date.now();
    while (fs.existsSync(orphan) && Date.now() - t0 < 15000) await sleep(100);
    assert.ok(!fs.existsSync(orphan), "the orphan object is removed within 15 s");
    assert.ok(!fs.existsSync(gone), "and its directory");
    assert.deepEqual(objects(), live, "every object of the live stream stays");
  });

  for (const round of ["before a restart", "after a SIGKILL restart"]) {
    test(`${round}: catch-up, immutable chunks and bootstrap read back byte-exact`, async () => {
      if (round.startsWith("after")) {
        await server.stop("SIGKILL");
        await server.start();
      }
      const m0 = await scrape(server.url);
      await checkCatchUp(url(), "big", 0, tail);
      await checkChunks(url(), token, "big", tail);
      await checkBootstrap(url(), "big", 0, tail);
      const m1 = await scrape(server.url);
      assert.ok(m1.get("runnel_history_fetches_total") > m0.get("runnel_history_fetches_total") ||
        round.startsWith("before"), "cold chunks were fetched");
      assert.ok(m1.get("runnel_history_cached_bytes") <= 32 * MiB, "the read cache stays within its bound");
    });
  }

  test("an SSE read from the start pauses at each cold chunk and goes on byte-exact", async () => {
    await server.stop("SIGTERM"); /* an empty read cache */
    await server.start();
    const want = 3 * CHUNK;
    // events of 256 KiB: the test's SSE parser rescans a line as it grows
    const r = await openSse(`${url()}?offset=${encodeURIComponent(offsetToken(0))}&live=sse&max_bytes=262144`, {
      timeoutMs: 60000,
    });
    assert.equal(r.status, 200, `SSE answered ${r.status} ${r.text}`);
    const data = () => r.events.filter((e) => e.type === "data");
    const ok = await r.waitFor(() => (data().reduce((n, e) => n + e.data.length, 0) * 3) / 4 >= want, 30000);
    r.close();
    const g = Buffer.concat(data().map((e) => Buffer.from(e.data, "base64")));
    assert.ok(ok, `SSE delivered ${g.length} bytes of ${want}`);
    assert.ok(g.equals(streamBytes("big", 0, g.length)), "the SSE bytes are byte-exact");
  });

  test("a snapshot in the cold range: bootstrap's updates come from the cold store", async () => {
    const at = 5 * CHUNK + 1000;
    const r = await req(`${url()}/snapshot/${encodeURIComponent(offsetToken(at))}`, {
      method: "PUT", headers: { "content-type": "application/x-state" }, body: Buffer.from("state"),
    });
    assert.equal(r.status, 204, `publish answered ${r.status} ${r.text}`);
    await checkBootstrap(url(), "big", at, tail);
  });

  test("a fork reads its inherited range from its source's cold chunks", async () => {
    const at = 3 * CHUNK + 12345;
    const f = await put(`${server.url}/v1/stream/hist/fork`, {
      type: "application/octet-stream",
      headers: { "stream-forked-from": "/v1/stream/hist/big", "stream-fork-offset": offsetToken(at) },
    });
    assert.equal(f.status, 201, `fork answered ${f.status} ${f.text}`);
    let off = 0;
    const parts = [];
    while (off < at) {
      const r = await get(`${server.url}/hist/fork?offset=${encodeURIComponent(offsetToken(off))}`);
      assert.equal(r.status, 200, `fork read answered ${r.status} ${r.text.slice(0, 200)}`);
      parts.push(r.body);
      off = Number(r.headers.get("stream-next-offset").split("_")[1]);
    }
    assert.ok(Buffer.concat(parts).equals(streamBytes("big", 0, at)), "the fork's inherited bytes are byte-exact");
  });

  test("a backup under appends copies the cold history; its restore is byte-exact, rewritten per §2.4", async () => {
    // restarted with --backup-to (an empty read cache: the backup fetches
    // the cold chunks); the appends make chunks of the instant move during it
    const args = server.args;
    const dest = tempDir("runnel-hist-backups-");
    await server.stop();
    server.args = [...args, "--backup-to", dest];
    const restoredDir = path.join(tempDir("runnel-hist-restore-"), "data");
    const restored = new Server({ dataDir: restoredDir });
    try {
      await server.start();
      const writing = writeStream(url(), "big", pieces, pieces + 6);
      const r = await req(`${server.url}/__runnel/backup?name=tiered`, { method: "POST", timeoutMs: 120000 });
      await writing;
      assert.equal(r.status, 200, `backup answered ${r.status} ${r.text}`);
      const fetches = (await scrape(server.url)).get("runnel_history_fetches_total");
      assert.ok(fetches >= moved / CHUNK, `the backup fetched the cold chunks (${fetches} fetches)`);
      const c = runCli(["restore", "--from", dest, "--name", "tiered", "--data-dir", restoredDir], { timeoutMs: 60000 });
      assert.equal(c.code, 0, `restore exited ${c.code}: ${c.stderr}`);
      await restored.start();
      const got = (await readAll(restored.stream("hist/big"))).body;
      assert.ok(got.length >= tail && got.length <= tail + 6 * PIECE && got.length % PIECE === 0,
        `the restored stream holds whole appends of one instant: ${got.length} bytes`);
      assert.ok(got.equals(streamBytes("big", 0, got.length)), "the restored stream is byte-exact");
      const h = await head(restored.stream("hist/big"));
      assert.notEqual(h.headers.get("stream-incarnation"), token, "a new Stream-Incarnation");
      assert.equal(h.headers.get("stream-previous-incarnation"), token, "Stream-Previous-Incarnation");
      assert.equal(h.headers.get("stream-inherited-offset"), h.headers.get("stream-next-offset"), "Stream-Inherited-Offset");
      const fork = (await readAll(restored.stream("hist/fork"))).body;
      assert.ok(fork.equals(streamBytes("big", 0, 3 * CHUNK + 12345)), "the restored fork reads its source's bytes");
      assert.equal((await restored.stop())?.code, 0, "the restored server stops cleanly");
      assert.ok(!/Sanitizer|runtime error/.test(restored.log), `no sanitizer report:\n${restored.logTail(40)}`);
    } finally {
      await restored.stop();
      await server.stop();
      server.args = args;
      await server.start();
    }
  });
});

describe("settings", () => {
  test("--hot-bytes needs a cold store; the read cache holds the largest read", () => {
    const serve = (args) => runCli(["serve", "--listen", "127.0.0.1:0", "--data-dir", tempDir("runnel-hist-"), ...args]);
    const a = serve(["--cold-store=false", "--hot-bytes", "8388608"]);
    assert.equal(a.code, 2, `exit code: ${JSON.stringify(a)}`);
    assert.match(a.stderr, /--hot-bytes .*needs --cold-store/);
    const b = serve(["--cold-store", "--hot-bytes", "8388608", "--max-read-bytes", "67108864"]);
    assert.equal(b.code, 2);
    assert.match(b.stderr, /--history-cache-bytes must be at least --max-read-bytes plus 16 MiB/);
  });
});
