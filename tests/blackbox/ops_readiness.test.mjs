// Operations: health and readiness across recovery (issue 9).
// A data directory is prefilled with a large log (1 MiB appends, no
// checkpoint: --checkpoint-bytes is at its maximum) and the server is
// SIGKILLed, so the next start must replay the whole log. The restarted
// server is polled from the moment its port accepts connections:
// /__runnel/readyz answers 503 ("recovering") and then 200 ("ready"), never
// back; /__runnel/livez answers 200 throughout; while readyz answers 503
// every other route answers 503 GROUP_RESTARTING with Retry-After and
// applies nothing, and the metrics say runnel_ready 0; afterwards the data
// is all there. A SIGTERM during recovery exits 0 and the next start
// replays nothing (the final checkpoint). The binary is spawned directly:
// Server.start() would wait for readiness.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { tempDir } from "./lib/server.mjs";
import { freePort, scrape, sleep, spawnServe, waitReady } from "./lib/ops.mjs";

const MIB = 1 << 20;
const N = 256; // MiB of log to replay (about 0.3 to 0.6 s of recovery)
const dataDir = tempDir("runnel-ready-");
let port, base, child, lastPrefilled;

const args = () => ["--listen", `127.0.0.1:${port}`, "--data-dir", dataDir, "--checkpoint-bytes", String(2 ** 40), "--log-format", "json"];
const stream = () => `${base}/v1/stream/ready/big`;

async function fetchOk(url, init = {}) {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(10000) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text };
}

// A request that may meet a closed port: null when the connection is refused.
async function attempt(url, init = {}) {
  try {
    return await fetchOk(url, init);
  } catch (e) {
    if (e?.cause?.code === "ECONNREFUSED" || e?.cause?.code === "ECONNRESET") return null;
    throw e;
  }
}

before(async () => {
  port = await freePort();
  base = `http://127.0.0.1:${port}`;
  child = spawnServe(args());
  await waitReady(base);
  const created = await fetchOk(stream(), { method: "PUT", headers: { "content-type": "application/octet-stream" } });
  assert.equal(created.status, 201);
  let next = 0;
  await Promise.all(
    [0, 1, 2, 3].map(async () => {
      while (next < N) {
        const i = next++;
        const r = await fetchOk(stream(), { method: "POST", headers: { "content-type": "application/octet-stream" }, body: Buffer.alloc(MIB, i & 0xff) });
        assert.equal(r.status, 204, `append ${i}: ${r.status} ${r.text}`);
      }
    }),
  );
  // Four writers race, so which append landed last is the server's order:
  // remember the last byte the server acknowledged before the crash.
  const head = await fetchOk(stream(), { method: "HEAD" });
  const [prefix] = head.headers.get("stream-next-offset").split("_");
  const last = await fetch(`${stream()}?offset=${prefix}_${String(N * MIB - 1).padStart(16, "0")}`, { signal: AbortSignal.timeout(10000) });
  lastPrefilled = Buffer.from(await last.arrayBuffer());
  assert.equal(lastPrefilled.length, 1);
  // SIGKILL: no final checkpoint, so the next start replays the whole log
  await child.stop("SIGKILL");
  assert.ok(!fs.existsSync(path.join(dataDir, "checkpoint")), "no checkpoint was written");
});

after(async () => {
  if (child) await child.stop("SIGKILL");
});

async function tail() {
  const r = await fetchOk(stream(), { method: "HEAD" });
  assert.equal(r.status, 200);
  return Number(r.headers.get("stream-next-offset").split("_")[1]);
}

// One observation round: readyz, livez, HEAD and POST of the stream, the
// ready gauge, readyz again.
async function round() {
  const r1 = await attempt(`${base}/__runnel/readyz`);
  if (!r1) return null;
  const live = await fetchOk(`${base}/__runnel/livez`);
  const head = await fetchOk(stream(), { method: "HEAD" });
  const bucket = await fetchOk(`${base}/readyb/s?offset=-1`);
  const write = await fetchOk(stream(), { method: "POST", headers: { "content-type": "application/octet-stream" }, body: "x" });
  const m = await scrape(base);
  const r2 = await fetchOk(`${base}/__runnel/readyz`);
  return { r1, live, head, bucket, write, ready: m.get("runnel_ready"), streams: m.get("runnel_streams"), r2 };
}

describe("readiness across recovery", () => {
  let rounds = [];
  let startedAt, acceptedAt, readyAt, log;

  before(async () => {
    startedAt = Date.now();
    child = spawnServe(args());
    const deadline = Date.now() + 20000;
    let readyRounds = 0;
    while (Date.now() < deadline && readyRounds < 3) {
      const r = await round();
      if (!r) {
        await sleep(2);
        continue;
      }
      acceptedAt ??= Date.now();
      rounds.push(r);
      if (r.r2.status === 200) {
        readyAt ??= Date.now();
        readyRounds++;
      }
    }
    log = child.stderr;
  });

  test("readyz answers 503 first (the log is still being replayed), then 200, and never 503 again", (t) => {
    const seq = rounds.flatMap((r) => [r.r1.status, r.r2.status]);
    t.diagnostic(`${seq.filter((s) => s === 503).length} readyz 503s; port accepted ${acceptedAt - startedAt} ms after spawn, ready after ${readyAt - startedAt} ms`);
    assert.ok(seq.length > 0, "the port accepted connections");
    assert.ok(seq.every((s) => s === 503 || s === 200), `readyz statuses ${seq}`);
    const first200 = seq.indexOf(200);
    assert.ok(first200 >= 0, "readyz turned 200");
    assert.ok(seq.slice(first200).every((s) => s === 200), `never back to 503: ${seq}`);
    assert.ok(
      first200 > 0,
      `readyz never answered 503: recovery of ${N} MiB of log finished before the first probe ` +
        `(accepted ${acceptedAt - startedAt} ms after spawn, ready ${readyAt - startedAt} ms)`,
    );
    for (const r of rounds)
      for (const x of [r.r1, r.r2]) assert.equal(x.text, x.status === 200 ? "ready\n" : "recovering\n");
  });

  test("livez answers 200 throughout", () => {
    for (const r of rounds) assert.equal(r.live.status, 200);
  });

  test("while readyz answers 503, every other route answers 503 GROUP_RESTARTING with Retry-After and the ready gauge is 0", () => {
    const recovering = rounds.filter((r) => r.r1.status === 503 && r.r2.status === 503);
    assert.ok(recovering.length > 0, "at least one whole round fell inside recovery");
    for (const r of recovering) {
      assert.equal(r.head.status, 503, "HEAD on v1");
      assert.equal(r.head.headers.get("retry-after"), "1");
      for (const x of [r.write, r.bucket]) {
        assert.equal(x.status, 503);
        assert.equal(x.headers.get("retry-after"), "1");
        assert.match(x.headers.get("content-type"), /^application\/json/);
        assert.equal(JSON.parse(x.text).error.code, "GROUP_RESTARTING");
      }
      assert.equal(r.ready, 0);
      assert.equal(r.streams, 0, "no store gauges before recovery");
    }
  });

  test("once readyz answers 200 the other routes serve and the ready gauge is 1", () => {
    const ready = rounds.filter((r) => r.r1.status === 200);
    assert.ok(ready.length >= 2);
    for (const r of ready) {
      assert.equal(r.head.status, 200);
      assert.equal(r.write.status, 204);
      assert.equal(r.bucket.status, 404);
      assert.equal(r.ready, 1);
      assert.ok(r.streams >= 1);
    }
  });

  test("every replayed byte is there and the writes refused during recovery were not applied", async () => {
    const applied = rounds.filter((r) => r.write.status === 204).length;
    for (const r of rounds) assert.ok(r.write.status === 204 || r.write.status === 503, `write answered ${r.write.status}`);
    const h = await fetchOk(stream(), { method: "HEAD" });
    const [prefix] = h.headers.get("stream-next-offset").split("_");
    assert.equal(await tail(), N * MIB + applied);
    // the last prefilled byte, then one "x" per applied write
    const at = `${prefix}_${String(N * MIB - 1).padStart(16, "0")}`;
    const r = await fetch(`${stream()}?offset=${at}`, { signal: AbortSignal.timeout(10000) });
    assert.equal(r.status, 200);
    assert.deepEqual(Buffer.from(await r.arrayBuffer()), Buffer.concat([lastPrefilled, Buffer.from("x".repeat(applied))]));
  });

  test("the log reports the replay, then readiness (JSON lines)", () => {
    const lines = log.trim().split("\n").map((l) => JSON.parse(l));
    const events = lines.map((l) => l.event);
    const rec = lines.find((l) => l.event === "recovery");
    assert.ok(rec, `a recovery line in ${events}`);
    const m = /(\d+) log records replayed/.exec(rec.msg);
    assert.ok(m && Number(m[1]) >= N + 1, `replayed records: ${rec.msg}`);
    assert.ok(events.indexOf("start") < events.indexOf("recovery"));
    assert.ok(events.indexOf("recovery") < events.indexOf("ready"));
  });

  test("SIGKILL again, then SIGTERM during recovery: exit 0; the next start replays nothing and has all data", async () => {
    const before = await tail();
    await child.stop("SIGKILL");
    child = spawnServe(args());
    // wait until recovery is observably in progress, then SIGTERM
    const deadline = Date.now() + 10000;
    let seen503 = false;
    while (Date.now() < deadline) {
      const r = await attempt(`${base}/__runnel/readyz`);
      if (r?.status === 503) {
        seen503 = true;
        break;
      }
      if (r?.status === 200) break;
      await sleep(1);
    }
    const exit = await child.stop("SIGTERM");
    assert.deepEqual(exit, { code: 0, signal: null }, `exit after SIGTERM ${seen503 ? "during" : "after"} recovery:\n${child.stderr}`);
    assert.ok(fs.existsSync(path.join(dataDir, "checkpoint")), "the clean stop wrote a checkpoint");
    child = spawnServe(args());
    await waitReady(base);
    assert.equal(await tail(), before);
    await sleep(50);
    const rec = child.stderr.split("\n").filter(Boolean).map((l) => JSON.parse(l)).find((l) => l.event === "recovery");
    assert.match(rec.msg, / 0 log records replayed/);
  });
});
