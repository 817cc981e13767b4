// The S3 cold store (--cold-store=s3, src/tiers/s3store.c) end to end:
// runnel against s3rver behind the SigV4-verifying, fault-injecting proxy
// that tests/s3/run_with_endpoint.sh starts (S3_ENDPOINT, S3_CONTROL,
// S3_BUCKET, S3_TEST_DIR and the AWS_* credentials in the environment).
//
// Covers: snapshot bodies >= 1 MiB as S3 objects (nothing in the local
// cold directory), read whole, ranged and through /bootstrap, across a
// restart; a body past --s3-part-bytes as a multipart upload; parts staged
// as objects and committed by UploadPartCopy (the proxy's fake) without
// re-upload, by upload where S3 cannot copy (small parts, and s3rver's own
// 501 to UploadPartCopy), with a restart between stage and commit; store
// faults with their typed answers (503 SlowDown and a timeout: 503
// COLD_BACKPRESSURE with Retry-After; 500s, refused connections and cut
// answers: 502 COLD_STORE_FAILED; one 500 retried away; DeleteObjects'
// 500 retried), nothing published by a failed publish and recovery once
// the store returns (a wrong secret is refused at start:
// failures.test.mjs); the orphan sweep of a body a crash left unpublished;
// the cold store's metrics.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Server } from "../blackbox/lib/server.mjs";
import { assertError, get, head, req, sleep } from "../blackbox/lib/bucket.mjs";
import { parseMultipart, parseMultipartType } from "../blackbox/lib/multipart.mjs";
import { printConfig, runCli, scrape } from "../blackbox/lib/ops.mjs";
import { tempDir } from "../blackbox/lib/server.mjs";
import {
  MiB, append, commit, createStream, enc, publish, publishOk, pseudoRandom, snapshotDigest, stagePart, stopAndRemove,
} from "../blackbox/lib/snap.mjs";
import { clearFaults, control, counts, fault } from "./control.mjs";
import { objectsUnder } from "./objects.mjs";

const OCTET = "application/octet-stream";
const { S3_ENDPOINT, S3_CONTROL, S3_BUCKET, S3_TEST_DIR } = process.env;
assert.ok(S3_ENDPOINT && S3_CONTROL && S3_BUCKET && S3_TEST_DIR, "run through tests/s3/run_with_endpoint.sh");

const s3Args = (prefix, extra = []) => [
  "--cold-store=s3", "--s3-endpoint", S3_ENDPOINT, "--s3-bucket", S3_BUCKET, "--s3-prefix", prefix,
  "--s3-part-bytes", String(5 * MiB), "--s3-timeout-ms", "2000", ...extra,
];


// Every file below dir, as paths relative to it ([] when dir is missing).
function filesBelow(dir) {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath ?? e.path, e.name)));
}

const localColdFiles = (srv) => filesBelow(path.join(srv.dataDir, "cold"));

// Stops srv with SIGTERM and checks it exited 0 with no sanitizer report
// (the ASan build: nothing leaked, no operation of the store left behind).
async function stopClean(srv) {
  const r = await srv.stop();
  assert.equal(r?.code, 0, `the server exits 0 at SIGTERM: ${JSON.stringify(r)}\n${srv.logTail(40)}`);
  assert.ok(!/Sanitizer|runtime error/.test(srv.log), `no sanitizer report:\n${srv.logTail(60)}`);
}

const server = new Server({ args: s3Args("main/") });
before(async () => {
  await server.start();
});
after(async () => {
  await clearFaults();
  await stopClean(server);
  await stopAndRemove(server);
});

let n = 0;
async function streamWith(srv, bytes) {
  const url = `${srv.url}/coldstore/s${++n}`;
  await createStream(url, { type: OCTET });
  const tail = await append(url, bytes, OCTET);
  return { url, tail };
}

async function readSnapshot(url, offset, headers = {}) {
  return req(`${url}/snapshot/${enc(offset)}`, { headers, timeoutMs: 60000 });
}

async function assertSnapshot(url, offset, body, what) {
  const r = await readSnapshot(url, offset);
  assert.equal(r.status, 200, `${what}: read answered ${r.status} ${r.text}`);
  assert.ok(r.body.equals(body), `${what}: the body reads back byte-exact (${r.body.length} of ${body.length} bytes)`);
}

describe("configuration", () => {
  test("--cold-store=s3 with its settings; refused without a bucket or credentials, naming no secret", () => {
    const cfg = printConfig(s3Args("p/", ["--s3-virtual-host"]));
    assert.equal(cfg["cold-store"], "s3");
    assert.equal(cfg["s3-bucket"], S3_BUCKET);
    assert.equal(cfg["s3-virtual-host"], "true");
    assert.ok(!Object.values(cfg).includes(process.env.AWS_SECRET_ACCESS_KEY), "no secret printed");
    const serve = (args, env = {}) => runCli(["serve", "--listen", "127.0.0.1:0", "--data-dir", tempDir("runnel-s3cfg-"), ...args], { env });
    const noBucket = serve(["--cold-store=s3"]);
    assert.equal(noBucket.code, 1);
    assert.match(noBucket.stderr, /--cold-store=s3 needs --s3-bucket/);
    const noCreds = serve(s3Args("p/"), {
      AWS_ACCESS_KEY_ID: "", AWS_SECRET_ACCESS_KEY: "", AWS_SHARED_CREDENTIALS_FILE: "/nonexistent", HOME: "/nonexistent",
    });
    assert.equal(noCreds.code, 1);
    assert.match(noCreds.stderr, /S3 cold store has no credentials/);
    assert.ok(!noCreds.stderr.includes(process.env.AWS_SECRET_ACCESS_KEY));
    assert.match(runCli(["serve", "--cold-store=maybe"]).stderr, /cold-store must be true or false or s3/);
  });
});

describe("snapshot bodies in S3", () => {
  test("a 3 MiB body is an S3 object: read whole, ranged and by bootstrap, before and after a restart", async () => {
    const body = pseudoRandom(3 * MiB + 17, "body");
    const { url, tail } = await streamWith(server, Buffer.from("x"));
    const before = await counts();
    await publishOk(url, tail, body);
    const afterPut = await counts();
    assert.equal((afterPut.PutObject ?? 0) - (before.PutObject ?? 0), 1, "one PutObject");
    const keys = objectsUnder("main/snapshots/");
    assert.ok(keys.length >= 1, `the body is an object under the prefix: ${keys}`);
    assert.deepEqual(localColdFiles(server), [], "nothing in the local cold directory");
    for (const round of ["before the restart", "after the restart"]) {
      await assertSnapshot(url, tail, body, round);
      const r = await readSnapshot(url, tail, { range: "bytes=1000000-2000999" });
      assert.equal(r.status, 206, `${round}: ranged read answered ${r.status}`);
      assert.ok(r.body.equals(body.subarray(1000000, 2001000)), `${round}: the range is byte-exact`);
      const b = await get(`${url}/bootstrap`);
      assert.equal(b.status, 200, `${round}: bootstrap answered ${b.status}`);
      const { boundary } = parseMultipartType(b.headers.get("content-type"));
      const { parts } = parseMultipart(b.body, boundary);
      assert.ok(parts[0].body.equals(body), `${round}: bootstrap's snapshot part is byte-exact`);
      if (round.startsWith("before")) {
        await stopClean(server);
        await server.start();
      }
    }
  });

  test("a body past --s3-part-bytes goes up as a multipart upload", async () => {
    const body = pseudoRandom(11 * MiB + 3, "big");
    const { url, tail } = await streamWith(server, Buffer.from("y"));
    const c0 = await counts();
    await publishOk(url, tail, body);
    const c1 = await counts();
    assert.equal((c1.CreateMultipartUpload ?? 0) - (c0.CreateMultipartUpload ?? 0), 1);
    assert.equal((c1.UploadPart ?? 0) - (c0.UploadPart ?? 0), 3, "three parts of at most 5 MiB");
    assert.equal((c1.CompleteMultipartUpload ?? 0) - (c0.CompleteMultipartUpload ?? 0), 1);
    await assertSnapshot(url, tail, body, "multipart");
  });

  test("HEAD advertises Ursula-Max-Snapshot-Bytes with the S3 cold store", async () => {
    const { url } = await streamWith(server, Buffer.from("z"));
    const r = await head(url);
    assert.equal(r.headers.get("ursula-max-snapshot-bytes"), "1073741824");
  });
});

describe("parts staged in S3 and committed", () => {
  async function stageAndCommit(sizes, seed, { restart = false } = {}) {
    const { url, tail } = await streamWith(server, Buffer.from("p"));
    const bodies = sizes.map((s, i) => pseudoRandom(s, `${seed}-${i}`));
    const ids = [];
    for (const b of bodies) ids.push(await stagePart(url, tail, b));
    if (restart) {
      await stopClean(server);
      await server.start();
    }
    const whole = Buffer.concat(bodies);
    const c0 = await counts();
    const r = await commit(url, tail, ids, snapshotDigest(OCTET, whole));
    assert.equal(r.status, 204, `commit answered ${r.status} ${r.text}`);
    const c1 = await counts();
    await assertSnapshot(url, tail, whole, `commit of ${sizes}`);
    const delta = (op) => (c1[op] ?? 0) - (c0[op] ?? 0);
    return { delta };
  }

  test("parts of at least 5 MiB are copied by S3 (UploadPartCopy), none uploaded again; across a restart", async () => {
    const { delta } = await stageAndCommit([5 * MiB, 5 * MiB + 1, 1234], "copy", { restart: true });
    assert.equal(delta("UploadPartCopy"), 3, "each part copied by the store");
    assert.equal(delta("UploadPart"), 0, "no byte uploaded again");
    assert.equal(delta("PutObject"), 0);
  });

  test("small parts (below S3's least part) are uploaded as parts of the new body", async () => {
    const { delta } = await stageAndCommit([700000, 900000, 5], "small");
    assert.equal(delta("UploadPartCopy"), 0);
    assert.equal(delta("UploadPart"), 1, "one part holds them all");
  });

  test("a store without UploadPartCopy (s3rver's own 501) falls back to uploading", async () => {
    await control("POST", "/config", { fake_upload_part_copy: false });
    try {
      const { delta } = await stageAndCommit([5 * MiB, 2 * MiB], "nocopy");
      assert.ok(delta("UploadPart") >= 1, "uploaded instead");
    } finally {
      await control("POST", "/config", { fake_upload_part_copy: true });
    }
  });
});

describe("store faults: typed answers, nothing published, recovery", () => {
  async function publishFails(rule, status, code, what) {
    const body = pseudoRandom(2 * MiB, what);
    const { url, tail } = await streamWith(server, Buffer.from("f"));
    await clearFaults();
    await fault(rule);
    try {
      const r = await publish(url, tail, body);
      assertError(r, status, code, { what });
      if (status === 503) assert.ok(r.headers.get("retry-after"), `${what}: Retry-After`);
      const h = await head(url);
      assert.equal(h.headers.get("stream-snapshot-offset"), null, `${what}: nothing published`);
      assert.equal((await readSnapshot(url, tail)).status, 404, `${what}: no snapshot to read`);
    } finally {
      await clearFaults();
    }
    await publishOk(url, tail, body);
    await assertSnapshot(url, tail, body, `${what}, once the store is back`);
  }

  test("503 SlowDown on every PUT: 503 COLD_BACKPRESSURE with Retry-After", () =>
    publishFails({ kind: "status", status: 503, code: "SlowDown", op: "PutObject", count: 0 }, 503, "COLD_BACKPRESSURE", "slowdown"));

  test("a store slower than the timeout (2 s + 2 s for 2 MiB at 1 MiB/s): 503 COLD_BACKPRESSURE", () =>
    publishFails({ kind: "delay", delay_ms: 6000, op: "PutObject", count: 0 }, 503, "COLD_BACKPRESSURE", "slow"));

  test("500 on every PUT: 502 COLD_STORE_FAILED", () =>
    publishFails({ kind: "status", status: 500, code: "InternalError", op: "PutObject", count: 0 }, 502, "COLD_STORE_FAILED", "500s"));

  test("every PUT's connection closed unanswered: 502 COLD_STORE_FAILED", () =>
    publishFails({ kind: "reset", op: "PutObject", count: 0 }, 502, "COLD_STORE_FAILED", "reset"));

  test("an unreachable store (connections refused): 502 COLD_STORE_FAILED", async () => {
    const body = pseudoRandom(2 * MiB, "refused");
    const { url, tail } = await streamWith(server, Buffer.from("r"));
    await control("POST", "/refuse", { ms: 0 });
    try {
      assertError(await publish(url, tail, body), 502, "COLD_STORE_FAILED", { what: "refused" });
    } finally {
      await clearFaults();
    }
    await publishOk(url, tail, body);
  });

  test("one 500 is retried away: the publish succeeds", async () => {
    const body = pseudoRandom(2 * MiB, "once");
    const { url, tail } = await streamWith(server, Buffer.from("o"));
    await fault({ kind: "status", status: 500, code: "InternalError", op: "PutObject", count: 1 });
    await publishOk(url, tail, body);
    await assertSnapshot(url, tail, body, "after a retried 500");
    assert.equal((await control("GET", "/state")).faults.length, 0, "the fault fired");
  });

  test("reads: cut GETs answer 502 COLD_STORE_FAILED, then read again once the store is back", async () => {
    const body = pseudoRandom(2 * MiB, "readcut");
    const { url, tail } = await streamWith(server, Buffer.from("g"));
    await publishOk(url, tail, body);
    await fault({ kind: "cut", after_bytes: 1000, op: "GetObject", count: 0 });
    try {
      assertError(await readSnapshot(url, tail), 502, "COLD_STORE_FAILED", { what: "cut read" });
    } finally {
      await clearFaults();
    }
    await assertSnapshot(url, tail, body, "after the cut reads");
  });

  test("a discard retries DeleteObjects' 500 and answers 204", async () => {
    const { url, tail } = await streamWith(server, Buffer.from("d"));
    await stagePart(url, tail, pseudoRandom(1000, "d1"));
    await stagePart(url, tail, pseudoRandom(1000, "d2"));
    await fault({ kind: "status", status: 500, code: "InternalError", op: "DeleteObjects", count: 1 });
    const r = await req(`${url}/snapshot/parts`, { method: "DELETE", timeoutMs: 60000 });
    assert.equal(r.status, 204, `discard answered ${r.status} ${r.text}`);
    assert.equal((await control("GET", "/state")).faults.length, 0, "the fault fired");
    await clearFaults();
  });
});

describe("the orphan sweep and the metrics", () => {
  test("a body a crash left unpublished is removed after the grace period", async () => {
    const args = s3Args("orphans/", ["--parts-grace-ms", "1000", "--test-hooks"]);
    const srv = new Server({ args, env: { RUNNEL_FAULT_KILL_AT: "publish-after-blob" } });
    await srv.start();
    const { url, tail } = await streamWith(srv, Buffer.from("o"));
    await publish(url, tail, pseudoRandom(2 * MiB, "orphan")).catch(() => null);
    await srv.exited;
    assert.equal(objectsUnder("orphans/snapshots/").length, 1, "the crash left the body in S3");
    srv.env = {};
    try {
      await srv.start();
      let left = 1;
      for (let i = 0; i < 100 && left; i++) {
        await sleep(100);
        left = objectsUnder("orphans/snapshots/").length;
      }
      assert.equal(left, 0, "the orphan is gone");
      const published = pseudoRandom(2 * MiB, "kept");
      await publishOk(url, tail, published);
      await sleep(2500); /* several sweeps: a referenced body stays */
      assert.equal(objectsUnder("orphans/snapshots/").length, 1, "the published body stays");
      await assertSnapshot(url, tail, published, "after the sweeps");
      await stopClean(srv);
    } finally {
      await stopAndRemove(srv);
    }
  });

  test("/__runnel/metrics counts the cold store's calls and bytes", async () => {
    const m = await scrape(server.url);
    const v = (name, labels) => m.get(name, labels);
    assert.ok(v("runnel_cold_store_requests_total", { op: "put" }) > 0, "PUTs counted");
    assert.ok(v("runnel_cold_store_requests_total", { op: "get" }) > 0, "GETs counted");
    assert.ok(v("runnel_cold_store_errors_total", { op: "put" }) > 0, "failed PUTs counted");
    assert.ok(v("runnel_cold_store_request_seconds_total", { op: "put" }) > 0, "time counted");
    assert.ok(v("runnel_cold_store_put_bytes_total") >= 3 * MiB, "bytes written counted");
    assert.ok(v("runnel_cold_store_get_bytes_total") >= 3 * MiB, "bytes read counted");
  });
});
