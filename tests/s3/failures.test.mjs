// How the S3 cold store's failures reach an operator and a client (issue
// 25, items C, D and F): runnel against s3rver behind the SigV4-verifying,
// fault-injecting proxy that tests/s3/run_with_endpoint.sh starts.
//
// WHAT IT PROVES
//   - Wrong credentials are found at start: the server refuses to start,
//     naming the store's own error and not the secret (before: it started
//     ready, and every append past the hot budget got 503
//     COLD_BACKPRESSURE while the log showed 403s). A store that cannot
//     answer at start keeps the server not ready, /__runnel/readyz naming
//     the store's error, until it answers.
//   - A store that refuses the moves of history once running (403
//     AccessDenied): appends past the hot budget answer 502
//     COLD_STORE_FAILED with Retry-After and the store's code in the
//     message, which names no bucket, endpoint or key (before: 503
//     COLD_BACKPRESSURE, "slow or saturated", forever).
//   - A hung store (it takes each request and never answers): a snapshot
//     publish and a cold read answer within the bound of one call, all
//     tries together (--s3-timeout-ms plus the payload at 1 MiB/s), not 4
//     times it (before: 4 tries of the whole bound each).
//   - COLD_STORE_FAILED carries Retry-After on reads as on publishes.
//   - A repeated or conflicting publish answers from the latest snapshot
//     without uploading the body again (before: one PutObject each, the
//     body an orphan).
//   - No region configured: the start is refused, naming where to set one
//     (before: requests were signed for us-east-1 without a word).
// About 60 s.
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { assertError, head, req, sleep } from "../blackbox/lib/bucket.mjs";
import { PIECE, offsetToken, waitFlushed, writeStream } from "../blackbox/lib/history.mjs";
import { runCli } from "../blackbox/lib/ops.mjs";
import { CHUNK, MiB, append, createStream, publish, publishOk, pseudoRandom, stopAndRemove } from "../blackbox/lib/snap.mjs";
import { Server, tempDir } from "../blackbox/lib/server.mjs";
import { clearFaults, control, counts, fault } from "./control.mjs";

const OCTET = "application/octet-stream";
const { S3_ENDPOINT, S3_BUCKET, S3_TEST_DIR, AWS_SECRET_ACCESS_KEY } = process.env;
assert.ok(S3_ENDPOINT && S3_BUCKET && S3_TEST_DIR, "run through tests/s3/run_with_endpoint.sh");
const TIMEOUT_MS = 2000;
const s3Args = (prefix, extra = []) => [
  "--cold-store=s3", "--s3-endpoint", S3_ENDPOINT, "--s3-bucket", S3_BUCKET, "--s3-prefix", prefix,
  "--s3-timeout-ms", String(TIMEOUT_MS), ...extra,
];

const servers = [];
after(async () => {
  await clearFaults();
  await stopAndRemove(...servers);
});
function server(prefix, extra = [], env = {}) {
  const s = new Server({ args: s3Args(prefix, extra), env });
  servers.push(s);
  return s;
}

// Starts srv expecting it to refuse: exits non-zero within 20 s, never ready.
async function refusesToStart(srv, what) {
  await srv.start({ waitReady: false });
  const exit = await Promise.race([srv.exited, sleep(20000).then(() => null)]);
  if (!exit) await srv.stop("SIGKILL");
  assert.ok(exit && exit.code !== 0, `${what}: the server refuses to start (${JSON.stringify(exit)}):\n${srv.logTail(8)}`);
  return srv.log;
}

// The message of an error answer, which must name no internal of the store.
function assertNoInternals(r, what) {
  const msg = JSON.parse(r.text).error.message;
  for (const internal of [S3_BUCKET, S3_ENDPOINT, "127.0.0.1", "history/", "runnel-owner"]) {
    assert.ok(!msg.includes(internal), `${what}: the message names no internal (${internal}): ${msg}`);
  }
  return msg;
}

test("wrong credentials: the start is refused, naming the store's error and no secret", async () => {
  const bad = server("badsig/", [], { AWS_SECRET_ACCESS_KEY: "wrong-secret-wrong-secret-wrong" });
  const log = await refusesToStart(bad, "a wrong secret");
  assert.match(log, /refuses this server's requests \(SignatureDoesNotMatch, HTTP 403\)/);
  assert.ok(!log.includes("wrong-secret") && !log.includes(AWS_SECRET_ACCESS_KEY), "no secret in the log");
});

test("a store that does not answer at start: not ready, readyz naming its error, until it answers", async () => {
  await control("POST", "/refuse", { ms: 0 });
  const srv = server("notyet/");
  try {
    await srv.start({ waitReady: false });
    let r;
    for (let i = 0; i < 100; i++) {
      await sleep(100);
      r = await req(`${srv.url}/__runnel/readyz`).catch(() => null);
      if (r && /does not answer as it should/.test(r.text)) break;
    }
    assert.equal(r?.status, 503, "not ready while the store does not answer");
    assert.match(r.text, /not ready: the cold store does not answer as it should \(ConnectFailed\)/);
    assert.ok(srv.alive(), "the server waits for the store, it does not exit");
  } finally {
    await clearFaults();
  }
  for (let i = 0; i < 100 && (await req(`${srv.url}/__runnel/readyz`)).status !== 200; i++) await sleep(100);
  assert.equal((await req(`${srv.url}/__runnel/readyz`)).status, 200, "ready once the store answers");
  await createStream(`${srv.url}/notyet/s`);
  assert.equal((await srv.stop())?.code, 0);
});

test("a store that refuses the moves of history: appends past the budget get 502 COLD_STORE_FAILED with its code", async () => {
  const srv = server("denied/", ["--hot-bytes", String(8 * MiB), "--history-cache-bytes", String(32 * MiB)]);
  await srv.start();
  const url = `${srv.url}/denied/s`;
  await createStream(url);
  await fault({ method: "PUT", key_contains: "denied/history/", kind: "status", status: 403, code: "AccessDenied", count: 0 });
  let refused = null;
  try {
    // until a move failed, a held budget is backpressure; once the store
    // refused one, it is the store's failure (before: backpressure forever)
    for (let k = 0, tries = 0; k < 16 && !refused && tries < 100; tries++) {
      const r = await req(url, { method: "POST", headers: { "content-type": OCTET }, body: pseudoRandom(PIECE, `denied/${k}`) });
      if (r.status === 204) k++;
      else if (r.status === 503 && JSON.parse(r.text).error.code === "COLD_BACKPRESSURE") await sleep(100);
      else refused = r;
    }
    assert.ok(refused, "appends are refused as the store's failure once the budget is held and a move failed");
    assertError(refused, 502, "COLD_STORE_FAILED", { what: "an append the store's refusal holds back" });
    assert.equal(refused.headers.get("retry-after"), "1", "Retry-After");
    const msg = assertNoInternals(refused, "the append's refusal");
    assert.match(msg, /AccessDenied, HTTP 403/, "the message names the store's code");
  } finally {
    await clearFaults();
  }
  await waitFlushed(srv.url, 2 * CHUNK, 60000); // the store takes them again: the backlog drains
  assert.equal((await srv.stop())?.code, 0);
});

test("a hung store: a publish and a cold read answer within one call's bound, all tries together", async () => {
  const srv = server("hung/", ["--hot-bytes", String(8 * MiB), "--history-cache-bytes", String(32 * MiB)]);
  await srv.start();
  const url = `${srv.url}/hung/s`;
  await createStream(url);
  await writeStream(url, "hung", 0, (2 * CHUNK) / PIECE);
  await waitFlushed(srv.url, 2 * CHUNK, 60000);
  await srv.stop();
  await srv.start(); // an empty read cache
  const tail = (await head(url)).headers.get("stream-next-offset");
  await fault({ kind: "delay", delay_ms: 600000, count: 0 }); // takes every request, answers none
  try {
    const body = pseudoRandom(2 * MiB, "hung body");
    let t0 = Date.now();
    const p = await publish(url, tail, body);
    const publishMs = Date.now() - t0;
    assertError(p, 503, "COLD_BACKPRESSURE", { what: "a publish to a hung store" });
    // one PutObject's bound: 2 s + 2 MiB at 1 MiB/s = 4 s (before: 4 tries of it, 16 s and more)
    console.log(`# a publish to the hung store answered after ${publishMs} ms`);
    assert.ok(publishMs < 9000, `the publish answered after ${publishMs} ms, within one call's bound (4 s)`);
    t0 = Date.now();
    const r = await req(`${url}?offset=${encodeURIComponent(offsetToken(0))}`, { timeoutMs: 120000 });
    const readMs = Date.now() - t0;
    assertError(r, 503, "COLD_BACKPRESSURE", { what: "a cold read from a hung store" });
    // one ranged GET's bound: 2 s + 4 MiB at 1 MiB/s = 6 s (before: 24 s and more)
    console.log(`# a cold read from the hung store answered after ${readMs} ms`);
    assert.ok(readMs < 12000, `the cold read answered after ${readMs} ms, within one call's bound (6 s)`);
  } finally {
    await clearFaults();
  }
  assert.equal((await srv.stop())?.code, 0);
});

test("COLD_STORE_FAILED carries Retry-After on a read as on a publish", async () => {
  const srv = server("retry/");
  await srv.start();
  const url = `${srv.url}/retry/s`;
  await createStream(url);
  const tail = await append(url, Buffer.from("x"));
  await fault({ op: "PutObject", kind: "status", status: 500, code: "InternalError", count: 0 });
  try {
    const p = await publish(url, tail, pseudoRandom(2 * MiB, "retry"));
    assertError(p, 502, "COLD_STORE_FAILED", { what: "a failed publish" });
    assert.equal(p.headers.get("retry-after"), "1", "a failed publish: Retry-After");
  } finally {
    await clearFaults();
  }
  await publishOk(url, tail, pseudoRandom(2 * MiB, "retry"));
  await fault({ op: "GetObject", kind: "status", status: 500, code: "InternalError", count: 0 });
  try {
    const r = await req(`${url}/snapshot/${encodeURIComponent(tail)}`, { timeoutMs: 60000 });
    assertError(r, 502, "COLD_STORE_FAILED", { what: "a failed read" });
    assert.equal(r.headers.get("retry-after"), "1", "a failed read: Retry-After, as a publish"); // before: none
  } finally {
    await clearFaults();
  }
  assert.equal((await srv.stop())?.code, 0);
});

test("a repeated or conflicting publish uploads nothing", async () => {
  const srv = server("repeat/");
  await srv.start();
  const url = `${srv.url}/repeat/s`;
  await createStream(url);
  const tail = await append(url, Buffer.from("y"));
  const body = pseudoRandom(2 * MiB, "the snapshot");
  await publishOk(url, tail, body);
  const c0 = await counts();
  const again = await publish(url, tail, body);
  assert.equal(again.status, 204, `a repeat answers 204: ${again.status} ${again.text}`);
  const other = await publish(url, tail, pseudoRandom(2 * MiB, "another snapshot"));
  assertError(other, 409, "SNAPSHOT_CONFLICT", { what: "a conflicting publish" });
  const c1 = await counts();
  const puts = (c1.PutObject ?? 0) - (c0.PutObject ?? 0) + (c1.CreateMultipartUpload ?? 0) - (c0.CreateMultipartUpload ?? 0);
  assert.equal(puts, 0, "neither uploaded its body"); // before: one PutObject each, left an orphan
  assert.equal((await srv.stop())?.code, 0);
});

test("no region: the start is refused, naming where to set one", async () => {
  const r = runCli(["serve", "--listen", "127.0.0.1:0", "--data-dir", tempDir("runnel-s3region-"), ...s3Args("region/")], {
    env: { AWS_REGION: "", AWS_DEFAULT_REGION: "", AWS_CONFIG_FILE: "/nonexistent", HOME: "/nonexistent" },
    timeoutMs: 5000,
  });
  assert.notEqual(r.code, 0, `refused (before: it served, signing for us-east-1): ${r.code} ${r.signal}`);
  assert.match(r.stderr, /needs a region, which its requests are signed for: --s3-region, AWS_REGION/);
});
