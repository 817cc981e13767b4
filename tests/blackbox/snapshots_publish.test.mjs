// Snapshots: publishing and the snapshot metadata on HEAD.
// Covers extensions.txt §2.1 (Offset Conventions: JSON message boundaries,
// any committed offset of a binary stream), §2.2 Publish Snapshot (204 with
// Stream-Snapshot-Digest and Stream-Incarnation, the stored and default
// content type, idempotency, 409 naming the latest for a conflicting or
// superseded publish, 409 naming nothing past the tail, 400, 404, 410, 413,
// the Stream-Incarnation precondition, Retention Effect: publishing never
// moves retention, Concurrency: publishing never blocks appends), §2.4 HEAD
// metadata (Stream-Snapshot-Offset/-Digest, Stream-Retained-Offset,
// Stream-Incarnation, no rewrite headers without a rewrite), §3.4 (ordinary
// reads never return snapshot bytes), §10 (Ursula-Max-Request-Bytes /
// Ursula-Max-Snapshot-Bytes on HEAD, 413 naming the request limit) and §11
// error bodies on every refusal.
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import {
  assertError, assertToken, del, get, head, otherToken, post, raw, rawAsResponse, readPages, req, sleep,
} from "./lib/bucket.mjs";
import {
  MiB, append, assertAbsent, createStream, enc, h, offsetAfter, publish, publishOk, pseudoRandom, reqStream, sha256,
  snapshotDigest, tok, stopAndRemove,
} from "./lib/snap.mjs";

const server = new Server();
before(() => server.start());
after(() => stopAndRemove(server));

let n = 0;
const fresh = (bucket = "snappub") => `${server.url}/${bucket}/s${++n}`;
const OCTET = "application/octet-stream";

// A binary stream holding `body`; returns {url, token, tail, first}.
async function binary(body = "hello world, snapshot") {
  const url = fresh();
  const empty = await createStream(url, { type: OCTET });
  const tail = await append(url, Buffer.from(body), OCTET);
  return { url, token: empty.token, tail, first: empty.tail };
}

async function headOk(url) {
  const r = await head(url);
  assert.equal(r.status, 200, `HEAD answered ${r.status}`);
  return r;
}

async function readSnapshot(url, offset, headers = {}) {
  return get(`${url}/snapshot/${enc(offset)}`, headers);
}

describe("§2.2 publish: success", () => {
  test("204 with Stream-Snapshot-Digest (BLAKE3 of type length, type, body) and Stream-Incarnation", async () => {
    const { url, token } = await binary();
    const off = await offsetAfter(url, 5);
    const type = "application/x-runnel-test";
    const r = await publish(url, off, "SNAPSHOT-BODY", { type });
    assert.equal(r.status, 204, `publish answered ${r.status} ${r.text}`);
    assert.equal(r.body.length, 0, "a 204 has no body");
    assert.equal(h(r, "stream-snapshot-digest"), snapshotDigest(type, "SNAPSHOT-BODY"));
    assert.equal(tok(r), token, "the publish carries the stream's Stream-Incarnation");
  });

  test("the digest covers the content type: the same body under two types has two digests", async () => {
    const a = await binary();
    const b = await binary();
    const offA = await offsetAfter(a.url, 3);
    const offB = await offsetAfter(b.url, 3);
    const dA = await publishOk(a.url, offA, "same", { type: "text/plain" });
    const dB = await publishOk(b.url, offB, "same", { type: "text/plain; charset=utf-8" });
    assert.equal(dA, snapshotDigest("text/plain", "same"));
    assert.equal(dB, snapshotDigest("text/plain; charset=utf-8", "same"));
    assert.notEqual(dA, dB);
  });

  test("Content-Type defaults to application/octet-stream", async () => {
    const { url, tail } = await binary();
    const body = Buffer.from([0, 1, 2, 255, 13, 10]);
    const r = await publish(url, tail, body, { type: null });
    assert.equal(r.status, 204, `publish answered ${r.status} ${r.text}`);
    assert.equal(h(r, "stream-snapshot-digest"), snapshotDigest(OCTET, body));
    const g = await readSnapshot(url, tail);
    assert.equal(g.status, 200);
    assert.equal(h(g, "content-type"), OCTET);
    assert.deepEqual(g.body, body);
  });

  test("the stored content type is returned on read exactly as sent", async () => {
    const { url, tail } = await binary();
    const type = "application/vnd.example.doc+cbor; v=2";
    const d = await publishOk(url, tail, "cbor-bytes", { type });
    const g = await readSnapshot(url, tail);
    assert.equal(g.status, 200);
    assert.equal(h(g, "content-type"), type);
    assert.equal(h(g, "stream-snapshot-digest"), d);
    assert.equal(g.text, "cbor-bytes");
  });

  test("the type of the snapshot is independent of the stream's (a JSON stream's snapshot is any blob)", async () => {
    const url = fresh();
    await createStream(url, { type: "application/json", body: '[{"a":1},{"b":2}]' });
    const tail = (await headOk(url)).headers.get("stream-next-offset");
    const blob = Buffer.from([0xde, 0xad, 0xbe, 0xef]);
    const d = await publishOk(url, tail, blob, { type: "application/x-loro" });
    assert.equal(d, snapshotDigest("application/x-loro", blob));
    const g = await readSnapshot(url, tail);
    assert.equal(h(g, "content-type"), "application/x-loro");
    assert.deepEqual(g.body, blob);
  });

  test("any committed offset of a binary stream is valid: the first offset, a middle one, the tail", async () => {
    const { url, first, tail } = await binary("0123456789");
    for (const [what, off] of [["first", first], ["middle", await offsetAfter(url, 7)], ["tail", tail]]) {
      const r = await publish(url, off, `at-${what}`);
      assert.equal(r.status, 204, `publish at the ${what} offset answered ${r.status} ${r.text}`);
      assert.equal(h((await headOk(url)), "stream-snapshot-offset"), off);
    }
  });

  test("an empty snapshot body is a snapshot", async () => {
    const { url, tail } = await binary();
    const d = await publishOk(url, tail, Buffer.alloc(0));
    assert.equal(d, snapshotDigest(OCTET, Buffer.alloc(0)));
    const g = await readSnapshot(url, tail);
    assert.equal(g.status, 200);
    assert.equal(g.body.length, 0);
  });

  test("a JSON stream accepts message boundaries: its first offset, after each message, its tail", async () => {
    const url = fresh();
    const c = await createStream(url, { type: "application/json" });
    await append(url, '[{"a":1},{"bb":22}]', "application/json");
    const afterFirst = await offsetAfter(url, '{"a":1}\n'.length, c.tail);
    const tail = (await headOk(url)).headers.get("stream-next-offset");
    for (const off of [c.tail, afterFirst, tail]) {
      const r = await publish(url, off, "s");
      assert.equal(r.status, 204, `publish at the boundary ${off} answered ${r.status} ${r.text}`);
    }
  });

  test("a large body (cold tier, above 1 MiB) publishes with the same digest rule and reads back exactly", async () => {
    const { url, tail } = await binary();
    const body = pseudoRandom(5 * MiB + 123, "large-publish");
    const d = await publishOk(url, tail, body, { type: "application/x-big" });
    assert.equal(d, snapshotDigest("application/x-big", body));
    const g = await readSnapshot(url, tail);
    assert.equal(g.status, 200);
    assert.equal(g.body.length, body.length);
    assert.equal(sha256(g.body), sha256(body));
  });

  test("a body of exactly 32 MiB (the request limit) is accepted", async () => {
    const { url, tail } = await binary();
    const body = pseudoRandom(32 * MiB, "exact-limit");
    const d = await publishOk(url, tail, body);
    assert.equal(d, snapshotDigest(OCTET, body));
    const g = await readSnapshot(url, tail);
    assert.equal(g.body.length, body.length);
    assert.equal(sha256(g.body), sha256(body));
  });
});

describe("§2.2 idempotency and conflicts", () => {
  test("repeating a publish with the same type and body succeeds with the same digest", async () => {
    const { url, token } = await binary();
    const off = await offsetAfter(url, 4);
    const d = await publishOk(url, off, "repeat-me", { type: "text/x-a" });
    for (let i = 0; i < 3; i++) {
      const r = await publish(url, off, "repeat-me", { type: "text/x-a" });
      assert.equal(r.status, 204, `repeat ${i} answered ${r.status} ${r.text}`);
      assert.equal(h(r, "stream-snapshot-digest"), d);
      assert.equal(tok(r), token);
    }
    const hd = await headOk(url);
    assert.equal(h(hd, "stream-snapshot-offset"), off);
    assert.equal(h(hd, "stream-snapshot-digest"), d);
  });

  test("different content at the published offset: 409 naming the latest (same offset), nothing changes", async () => {
    const { url } = await binary();
    const off = await offsetAfter(url, 6);
    const d = await publishOk(url, off, "original", { type: "text/x-a" });
    const cases = [
      ["another body", "changed", "text/x-a"],
      ["another content type", "original", "text/x-b"],
      ["an empty body", "", "text/x-a"],
    ];
    for (const [what, body, type] of cases) {
      const r = await publish(url, off, body, { type });
      assertError(r, 409, "SNAPSHOT_CONFLICT", { what });
      assert.equal(h(r, "stream-snapshot-offset"), off, `${what}: the 409 names the latest offset`);
      assert.equal(h(r, "stream-snapshot-digest"), d, `${what}: the 409 names the latest digest`);
    }
    const g = await readSnapshot(url, off);
    assert.equal(g.status, 200);
    assert.equal(g.text, "original");
    assert.equal(h(g, "content-type"), "text/x-a");
    assert.equal(h(await headOk(url), "stream-snapshot-digest"), d);
  });

  test("a publish below the latest snapshot's offset: 409 naming the latest (a later offset)", async () => {
    const { url } = await binary("abcdefghijklmnop");
    const low = await offsetAfter(url, 3);
    const high = await offsetAfter(url, 9);
    const d = await publishOk(url, high, "at-9");
    const r = await publish(url, low, "at-3");
    assertError(r, 409, "SNAPSHOT_CONFLICT", { what: "superseded publish" });
    assert.equal(h(r, "stream-snapshot-offset"), high);
    assert.equal(h(r, "stream-snapshot-digest"), d);
    const hd = await headOk(url);
    assert.equal(h(hd, "stream-snapshot-offset"), high);
    assert.equal(h(hd, "stream-snapshot-digest"), d);
  });

  test("a later offset supersedes: HEAD moves, the old snapshot is gone (404 with Stream-Incarnation), its repeat is 409", async () => {
    const { url, token } = await binary("abcdefghijklmnop");
    const low = await offsetAfter(url, 3);
    const high = await offsetAfter(url, 9);
    const dLow = await publishOk(url, low, "at-3");
    const dHigh = await publishOk(url, high, "at-9");
    assert.notEqual(dLow, dHigh);
    const hd = await headOk(url);
    assert.equal(h(hd, "stream-snapshot-offset"), high);
    assert.equal(h(hd, "stream-snapshot-digest"), dHigh);
    const old = await readSnapshot(url, low);
    assertError(old, 404, "SNAPSHOT_NOT_FOUND", { what: "superseded snapshot read" });
    assert.equal(tok(old), token, "the 404 of a snapshot read of an existing stream carries Stream-Incarnation");
    const again = await publish(url, low, "at-3");
    assertError(again, 409, "SNAPSHOT_CONFLICT", { what: "repeat of a superseded publish" });
    assert.equal(h(again, "stream-snapshot-offset"), high);
    assert.equal(h(again, "stream-snapshot-digest"), dHigh);
  });

  test("an offset past the tail: 409 that names no snapshot, and nothing is published", async () => {
    // An offset this stream has not reached: the tail of a longer stream.
    const longer = await binary("a much longer body than the other stream holds");
    const { url } = await binary("short");
    const r = await publish(url, longer.tail, "future");
    assertError(r, 409, undefined, { what: "publish past the tail" });
    assertAbsent(r, ["stream-snapshot-offset", "stream-snapshot-digest"], "a 409 past the tail");
    assertAbsent(await headOk(url), ["stream-snapshot-offset", "stream-snapshot-digest"], "HEAD after the refusal");
  });

  test("an offset past the tail while a snapshot exists: 409 that names no snapshot either", async () => {
    const longer = await binary("a much longer body than the other stream holds");
    const { url, tail } = await binary("short");
    const d = await publishOk(url, tail, "at-tail");
    const r = await publish(url, longer.tail, "future");
    assertError(r, 409, undefined, { what: "publish past the tail" });
    assertAbsent(r, ["stream-snapshot-offset", "stream-snapshot-digest"], "a 409 past the tail (not a superseded publish)");
    assert.equal(h(await headOk(url), "stream-snapshot-digest"), d);
  });
});

describe("§2.2 publish: refusals", () => {
  test("a JSON stream refuses an offset inside a message with 400, and publishes nothing", async () => {
    const url = fresh();
    const c = await createStream(url, { type: "application/json" });
    await append(url, '[{"a":1},{"b":2}]', "application/json");
    for (const k of [1, 3, 7, 9]) {
      const inside = await offsetAfter(url, k, c.tail);
      const r = await publish(url, inside, "s");
      assertError(r, 400, "NOT_JSON_BOUNDARY", { what: `publish ${k} bytes into the NDJSON view` });
    }
    assertAbsent(await headOk(url), ["stream-snapshot-offset", "stream-snapshot-digest"], "HEAD");
  });

  test("a malformed offset answers 400", async () => {
    const { url } = await binary();
    for (const bad of ["not-an-offset", "x", "%20", "00000000000000000000000000000000000000000000000000"]) {
      const r = await publish(url, decodeURIComponent(bad), "s");
      assertError(r, 400, ["INVALID_OFFSET", "INVALID_SNAPSHOT"], { what: `offset ${bad}` });
    }
  });

  test("a missing stream answers 404 without Stream-Incarnation", async () => {
    const { url, tail } = await binary();
    for (const missing of [`${url}-missing`, `${server.url}/nosuchbucket/s1`]) {
      const r = await publish(missing, tail, "s");
      assertError(r, 404, ["STREAM_NOT_FOUND", "BUCKET_NOT_FOUND"], { what: `publish to ${missing}` });
      assert.equal(tok(r), null);
    }
  });

  test("an offset below the earliest retained offset answers 410 (a single-request publish)", async () => {
    const { url } = await binary("abcdefghijklmnop");
    const low = await offsetAfter(url, 3);
    const high = await offsetAfter(url, 9);
    const d = await publishOk(url, high, "at-9");
    const adv = await req(`${url}/retention/${enc(high)}`, { method: "PUT" });
    assert.ok(adv.status === 204 || adv.status === 200, `retention answered ${adv.status} ${adv.text}`);
    const r = await publish(url, low, "at-3");
    assertError(r, 410, "STREAM_GONE", { what: "publish below the retained offset" });
    const hd = await headOk(url);
    assert.equal(h(hd, "stream-snapshot-offset"), high);
    assert.equal(h(hd, "stream-snapshot-digest"), d);
  });

  test("Stream-Incarnation precondition: a match publishes, a mismatch answers 412 and publishes nothing, a malformed value 400", async () => {
    const { url, token, tail } = await binary();
    const bad = await publish(url, tail, "s", { headers: { "stream-incarnation": otherToken(token) } });
    assertError(bad, 412, "INCARNATION_MISMATCH", { what: "publish with another token" });
    assert.equal(tok(bad), token, "the 412 carries the current Stream-Incarnation");
    assertAbsent(await headOk(url), ["stream-snapshot-offset"], "HEAD after the 412");
    const malformed = await publish(url, tail, "s", { headers: { "stream-incarnation": "not-a-token" } });
    assertError(malformed, 400, undefined, { what: "malformed Stream-Incarnation" });
    const ok = await publish(url, tail, "s", { headers: { "stream-incarnation": token } });
    assert.equal(ok.status, 204, `publish with the matching token answered ${ok.status} ${ok.text}`);
    assert.equal(tok(ok), token);
  });

  test("a body above 32 MiB answers 413 naming Ursula-Max-Request-Bytes (REQUEST_TOO_LARGE), decided from Content-Length", async () => {
    const { url, tail } = await binary();
    const path = new URL(`${url}/snapshot/${enc(tail)}`).pathname;
    const r = await raw(
      server.port,
      `PUT ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\nContent-Length: 33554433\r\nConnection: close`,
    );
    assertError(rawAsResponse(r), 413, "REQUEST_TOO_LARGE", { what: "33554433-byte publish" });
    assert.equal(r.header("ursula-max-request-bytes"), "33554432");
    assert.equal(r.header("ursula-max-snapshot-bytes"), null, "a request-size 413 names the request limit, not the snapshot limit");
    assertAbsent(await headOk(url), ["stream-snapshot-offset"], "HEAD after the 413");
  });
});

describe("§2.2 Retention Effect and Concurrency, §3.4", () => {
  test("publishing never changes Stream-Retained-Offset", async () => {
    const { url, first } = await binary("0123456789abcdef");
    const before = h(await headOk(url), "stream-retained-offset");
    assert.equal(before, first);
    await publishOk(url, await offsetAfter(url, 4), "a");
    await publishOk(url, await offsetAfter(url, 12), "b");
    const hd = await headOk(url);
    assert.equal(h(hd, "stream-retained-offset"), first, "retention did not move");
    const r = await get(`${url}?offset=${enc(first)}`);
    assert.equal(r.status, 200, "bytes below the snapshot stay readable");
    assert.equal(r.text, "0123456789abcdef");
  });

  test("ordinary reads never return snapshot bytes", async () => {
    const { url, first } = await binary("stream-bytes");
    const mid = await offsetAfter(url, 6);
    await publishOk(url, mid, "SNAPSHOT-BYTES");
    const all = await readPages(url);
    assert.equal(Buffer.concat(all.map((p) => p.body)).toString(), "stream-bytes");
    const fromFirst = await get(`${url}?offset=${enc(first)}`);
    assert.equal(fromFirst.text, "stream-bytes");
    const fromSnap = await get(`${url}?offset=${enc(mid)}`);
    assert.equal(fromSnap.text, "-bytes");
    const lp = await get(`${url}?offset=${enc(mid)}&live=long-poll&timeout_ms=50`);
    assert.equal(lp.status, 200);
    assert.equal(lp.text, "-bytes");
  });

  test("a publish whose upload is in progress does not block appends; the snapshot holds only its own body", async () => {
    const { url, tail, token } = await binary("before-snapshot|");
    const body = pseudoRandom(24 * MiB, "concurrent-publish");
    let release;
    const gate = new Promise((r) => (release = r));
    const pub = reqStream(`${url}/snapshot/${enc(tail)}`, {
      headers: { "content-type": "application/x-snap" },
      buffers: [body],
      pauseAfter: 8 * MiB,
      gate,
    });
    let settled = false;
    pub.then(() => (settled = true), () => (settled = true));
    await sleep(300); // the first 8 MiB are on their way
    const t0 = performance.now();
    const appended = [];
    for (let i = 0; i < 20; i++) {
      const chunk = `append-${i}|`;
      appended.push(chunk);
      const r = await Promise.race([
        append(url, chunk, OCTET),
        sleep(5000).then(() => {
          throw new Error(`append ${i} did not complete within 5 s while a publish was uploading`);
        }),
      ]);
      assert.ok(r);
    }
    const ms = performance.now() - t0;
    assert.equal(settled, false, "the publish was still uploading during the appends");
    assert.ok(ms < 5000, `20 appends took ${Math.round(ms)} ms during the upload`);
    release();
    const r = await pub;
    assert.equal(r.status, 204, `the publish answered ${r.status} ${r.text}`);
    assert.equal(h(r, "stream-snapshot-digest"), snapshotDigest("application/x-snap", body));
    assert.equal(tok(r), token);
    const g = await readSnapshot(url, tail);
    assert.equal(g.status, 200);
    assert.equal(g.body.length, body.length, "updates after the snapshot offset are not folded into it");
    assert.equal(sha256(g.body), sha256(body));
    assert.equal(h(g, "stream-up-to-date"), null, "appends follow the snapshot offset");
    const rest = await readPages(url, { offset: tail });
    assert.equal(Buffer.concat(rest.map((p) => p.body)).toString(), appended.join(""));
  });

  test("a publish whose client disconnects mid-upload publishes nothing", async () => {
    const { url, tail } = await binary();
    const before = await headOk(url);
    const path = new URL(`${url}/snapshot/${enc(tail)}`).pathname;
    await new Promise((resolve, reject) => {
      const sock = net.connect(server.port, "127.0.0.1", () => {
        sock.write(`PUT ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: ${OCTET}\r\nContent-Length: ${4 * MiB}\r\n\r\n`);
        sock.write(pseudoRandom(MiB, "cut-publish"), () => setTimeout(() => {
          sock.destroy();
          resolve();
        }, 200));
      });
      sock.on("error", reject);
    });
    await sleep(200);
    const hd = await headOk(url);
    for (const k of ["stream-snapshot-offset", "stream-snapshot-digest", "stream-next-offset", "stream-retained-offset"]) {
      assert.equal(h(hd, k), h(before, k), `HEAD ${k} unchanged`);
    }
    assertError(await readSnapshot(url, tail), 404, "SNAPSHOT_NOT_FOUND", { what: "after the cut upload" });
    await publishOk(url, tail, "complete");
  });

  test("appends run while a large publish is uploading at full speed", async () => {
    const { url, tail } = await binary("x");
    const body = pseudoRandom(30 * MiB, "parallel-publish");
    const pub = publish(url, tail, body);
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => append(url, `p${i}`, OCTET)));
    assert.equal(results.length, 10);
    const r = await pub;
    assert.equal(r.status, 204, `publish answered ${r.status} ${r.text}`);
    const all = Buffer.concat((await readPages(url)).map((p) => p.body)).toString();
    assert.equal(all.length, 1 + 20);
  });
});

describe("§2.4 snapshot metadata on HEAD", () => {
  test("without a snapshot: no Stream-Snapshot-*, Stream-Retained-Offset is the first offset, Stream-Incarnation, no rewrite headers", async () => {
    const url = fresh();
    const c = await createStream(url, { type: OCTET });
    await append(url, "abc", OCTET);
    const hd = await headOk(url);
    assertAbsent(hd, ["stream-snapshot-offset", "stream-snapshot-digest", "stream-previous-incarnation", "stream-inherited-offset"], "HEAD");
    assert.equal(h(hd, "stream-retained-offset"), c.tail, "before any retention advance it is the offset of the stream's first byte");
    assert.equal(assertToken(tok(hd)), c.token);
  });

  test("with a snapshot: offset and digest equal to the publish's; Retained-Offset and Incarnation still sent", async () => {
    const { url, token, first } = await binary();
    const off = await offsetAfter(url, 5);
    const d = await publishOk(url, off, "meta", { type: "text/x-meta" });
    const hd = await headOk(url);
    assert.equal(h(hd, "stream-snapshot-offset"), off);
    assert.equal(h(hd, "stream-snapshot-digest"), d);
    assert.equal(h(hd, "stream-retained-offset"), first);
    assert.equal(tok(hd), token);
    assertAbsent(hd, ["stream-previous-incarnation", "stream-inherited-offset"], "HEAD without a rewrite");
    assert.equal(hd.body.length, 0);
  });

  test("HEAD names the server's limits: Ursula-Max-Request-Bytes and, with a cold store, Ursula-Max-Snapshot-Bytes", async () => {
    const { url } = await binary();
    const hd = await headOk(url);
    assert.equal(h(hd, "ursula-max-request-bytes"), "33554432");
    assert.equal(h(hd, "ursula-max-snapshot-bytes"), "1073741824");
  });

  test("the snapshot metadata of a closed stream and a JSON stream", async () => {
    const url = fresh();
    await createStream(url, { type: "application/json", body: '{"k":1}' });
    const cl = await post(url, undefined, { type: null, headers: { "stream-closed": "true" } });
    assert.equal(cl.status, 204);
    const tail = h(await headOk(url), "stream-next-offset");
    const d = await publishOk(url, tail, "closed-snap");
    const hd = await headOk(url);
    assert.equal(h(hd, "stream-snapshot-offset"), tail);
    assert.equal(h(hd, "stream-snapshot-digest"), d);
    assert.equal(h(hd, "stream-closed"), "true");
  });

  test("a recreated stream has no snapshot and a new token", async () => {
    const { url, token, tail } = await binary();
    await publishOk(url, tail, "s");
    const gone = await del(url);
    assert.equal(gone.status, 204);
    const c = await createStream(url, { type: OCTET, body: Buffer.from("hello world, snapshot") });
    assert.notEqual(c.token, token);
    const hd = await headOk(url);
    assertAbsent(hd, ["stream-snapshot-offset", "stream-snapshot-digest"], "HEAD of the recreated stream");
    const g = await readSnapshot(url, tail);
    assertError(g, 404, "SNAPSHOT_NOT_FOUND", { what: "the old incarnation's snapshot" });
    assert.equal(tok(g), c.token);
  });
});
