// Snapshots and staged parts under retryable refusals (issue 13, item 6).
// Covers extensions.txt §2.2 (a server SHOULD keep the parts until the
// commit's answer is final for its key, so that a commit refused with a
// retryable 503 can be repeated; a JSON boundary the server cannot verify
// MUST NOT be published or applied: 503; a discard MUST NOT answer 204 when
// it failed to delete the parts), §11 (the removed latest-snapshot path
// answers 405 UNSUPPORTED) and §11.1 (WAL_DISK_PRESSURE and
// JSON_BOUNDARY_UNVERIFIED prove a refusal; OUTCOME_UNKNOWN is retried).
// Failures are injected with the test hooks (--test-hooks):
// /__runnel/test/fail-syncs and /__runnel/test/fail?point=...
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { assertError, get, head, put, req } from "./lib/bucket.mjs";
import {
  append, assertAbsent, commit, createStream, enc, h, offsetAfter, publish, publishOk, snapshotDigest, stagePart, stopAndRemove,
} from "./lib/snap.mjs";

const OCTET = "application/octet-stream";
const JSON_TYPE = "application/json";
const server = new Server({ args: ["--test-hooks"] });
before(() => server.start());
after(() => stopAndRemove(server));

let n = 0;
const hook = async (path) => {
  const r = await req(`${server.url}/__runnel/test/${path}`, { method: "POST" });
  assert.equal(r.status, 204, `test hook ${path} answered ${r.status} ${r.text}`);
};
const failSyncs = (count) => hook(`fail-syncs?n=${count}`);
const failPoint = (point, count, errno = "EIO") => hook(`fail?point=${point}&n=${count}&errno=${errno}`);
const retain = (url, offset) => req(`${url}/retention/${enc(offset)}`, { method: "PUT" });
const discard = (url) => req(`${url}/snapshot/parts`, { method: "DELETE" });

function assert503(r, code, what) {
  assertError(r, 503, code, { what });
  assert.ok(h(r, "retry-after"), `${what}: a 503 carries Retry-After`);
}

async function binaryStream() {
  const url = `${server.url}/refusals/b${++n}`;
  await createStream(url, { type: OCTET });
  const tail = await append(url, Buffer.from("0123456789"), OCTET);
  return { url, tail };
}

// A JSON stream of three messages; `mid` is the boundary after the first,
// which the server can only verify by reading the byte before it.
async function jsonStream() {
  const url = `${server.url}/refusals/j${++n}`;
  await createStream(url, { type: JSON_TYPE, body: '{"m":1}' });
  await append(url, '{"m":2}', JSON_TYPE);
  const tail = await append(url, '{"m":3}', JSON_TYPE);
  return { url, key: new URL(url).pathname.slice(1), mid: await offsetAfter(url, '{"m":1}\n'.length), tail };
}

describe("§2.2 a parts commit refused with a retryable 503 keeps its parts", () => {
  for (const [what, inject, code] of [
    ["a failed log sync (OUTCOME_UNKNOWN)", () => failSyncs(1), "OUTCOME_UNKNOWN"],
    ["a full disk before the log (WAL_DISK_PRESSURE)", () => failPoint("log-reserve", 1, "ENOSPC"), "WAL_DISK_PRESSURE"],
  ]) {
    test(`${what}: the repeat of the commit publishes the snapshot from the same parts`, async () => {
      const { url, tail } = await binaryStream();
      const ids = [await stagePart(url, tail, "first-"), await stagePart(url, tail, "second")];
      const digest = snapshotDigest(OCTET, "first-second");
      await inject();
      assert503(await commit(url, tail, ids, digest), code, "the commit");
      assertAbsent(await head(url), ["stream-snapshot-offset"], "HEAD after the refused commit");
      const again = await commit(url, tail, ids, digest);
      assert.equal(again.status, 204, `the repeat answered ${again.status} ${again.text}`);
      assert.equal(h(again, "stream-snapshot-digest"), digest);
      const r = await get(`${url}/snapshot/${enc(tail)}`);
      assert.equal(r.status, 200);
      assert.equal(r.text, "first-second", "the snapshot is assembled from the kept parts");
    });
  }
});

describe("§2.2 a JSON boundary that cannot be read is unverified: 503, nothing applied", () => {
  test("a publish answers 503 JSON_BOUNDARY_UNVERIFIED, publishes nothing, and its repeat succeeds", async () => {
    const { url, mid } = await jsonStream();
    await failPoint("boundary-read", 1);
    assert503(await publish(url, mid, "state"), "JSON_BOUNDARY_UNVERIFIED", "publish");
    assertAbsent(await head(url), ["stream-snapshot-offset"], "HEAD after the refused publish");
    await publishOk(url, mid, "state");
  });

  test("a parts commit answers 503 JSON_BOUNDARY_UNVERIFIED and keeps its parts", async () => {
    const { url, mid } = await jsonStream();
    const ids = [await stagePart(url, mid, "state")];
    const digest = snapshotDigest(OCTET, "state");
    await failPoint("boundary-read", 1);
    assert503(await commit(url, mid, ids, digest), "JSON_BOUNDARY_UNVERIFIED", "commit");
    assertAbsent(await head(url), ["stream-snapshot-offset"], "HEAD after the refused commit");
    assert.equal((await commit(url, mid, ids, digest)).status, 204, "the repeat of the commit publishes");
  });

  test("a retention advance answers 503 JSON_BOUNDARY_UNVERIFIED and changes nothing; its repeat applies", async () => {
    const { url, mid, tail } = await jsonStream();
    await publishOk(url, tail, "state");
    const first = h(await head(url), "stream-retained-offset");
    await failPoint("boundary-read", 1);
    assert503(await retain(url, mid), "JSON_BOUNDARY_UNVERIFIED", "retention");
    assert.equal(h(await head(url), "stream-retained-offset"), first, "the retained offset did not move");
    const r = await retain(url, mid);
    assert.equal(r.status, 204, `the repeat answered ${r.status} ${r.text}`);
    assert.equal(h(r, "stream-retained-offset"), mid);
  });

  test("a fork at the boundary answers 503 JSON_BOUNDARY_UNVERIFIED and creates nothing", async () => {
    const { key, mid } = await jsonStream();
    const fork = server.stream(`refusals/fork${++n}`);
    const headers = { "stream-forked-from": `/v1/stream/${key}`, "stream-fork-offset": mid };
    await failPoint("boundary-read", 1);
    assert503(await put(fork, { type: JSON_TYPE, headers }), "JSON_BOUNDARY_UNVERIFIED", "fork");
    assert.equal((await head(fork)).status, 404, "no fork was created");
    assert.equal((await put(fork, { type: JSON_TYPE, headers })).status, 201, "the repeat creates the fork");
  });

  test("a fork whose Stream-Fork-Sub-Offset counts unreadable messages answers 503 JSON_BOUNDARY_UNVERIFIED", async () => {
    const url = `${server.url}/refusals/j${++n}`;
    await createStream(url, { type: JSON_TYPE, body: '[{"m":1},{"m":2},{"m":3}]' }); // one append, three messages
    const first = h(await head(url), "stream-retained-offset");
    const fork = server.stream(`refusals/fork${++n}`);
    const headers = {
      "stream-forked-from": `/v1/stream/${new URL(url).pathname.slice(1)}`,
      "stream-fork-offset": first,
      "stream-fork-sub-offset": "2",
    };
    await failPoint("boundary-read", 1);
    assert503(await put(fork, { type: JSON_TYPE, headers }), "JSON_BOUNDARY_UNVERIFIED", "fork with a sub-offset");
    assert.equal((await head(fork)).status, 404, "no fork was created");
    const r = await put(fork, { type: JSON_TYPE, headers });
    assert.equal(r.status, 201, `the repeat answered ${r.status} ${r.text}`);
    assert.deepEqual(JSON.parse((await get(`${fork}?offset=-1`)).text), [{ m: 1 }, { m: 2 }]);
  });

  test("a v1 read from the boundary answers 503 JSON_BOUNDARY_UNVERIFIED, never 400", async () => {
    const { key, mid } = await jsonStream();
    await failPoint("boundary-read", 1);
    assert503(await get(`${server.stream(key)}?offset=${enc(mid)}`), "JSON_BOUNDARY_UNVERIFIED", "v1 read");
    const r = await get(`${server.stream(key)}?offset=${enc(mid)}`);
    assert.equal(r.status, 200);
    assert.deepEqual(JSON.parse(r.text), [{ m: 2 }, { m: 3 }]);
  });

  test("an offset inside a message is still 400 NOT_JSON_BOUNDARY", async () => {
    const { url, mid } = await jsonStream();
    const inside = await offsetAfter(url, 3, mid);
    assertError(await publish(url, inside, "x"), 400, "NOT_JSON_BOUNDARY", { what: "publish inside a message" });
  });
});

describe("§2.2 a discard whose delete fails", () => {
  test("answers 502 COLD_STORE_FAILED, not 204; the part stays committable; a repeated discard answers 204", async () => {
    const { url, tail } = await binaryStream();
    const ids = [await stagePart(url, tail, "kept")];
    await failPoint("blob-delete", 1);
    const r = await discard(url);
    assertError(r, 502, "COLD_STORE_FAILED", { what: "discard with a failed delete" });
    const again = await discard(url);
    assert.equal(again.status, 204, `the repeated discard answered ${again.status} ${again.text}`);
    assertError(await commit(url, tail, ids, snapshotDigest(OCTET, "kept")), 400, "UNKNOWN_PART", { what: "commit after the discard" });
  });

  test("the part survives a failed discard: a commit of it publishes", async () => {
    const { url, tail } = await binaryStream();
    const ids = [await stagePart(url, tail, "kept")];
    await failPoint("blob-delete", 1);
    assertError(await discard(url), 502, "COLD_STORE_FAILED", { what: "discard with a failed delete" });
    assert.equal((await commit(url, tail, ids, snapshotDigest(OCTET, "kept"))).status, 204);
  });
});

describe("§11 the removed latest-snapshot path", () => {
  test("GET {stream}/snapshot answers 405 UNSUPPORTED; HEAD too, without a body", async () => {
    const { url, tail } = await binaryStream();
    await publishOk(url, tail, "latest");
    assertError(await get(`${url}/snapshot`), 405, "UNSUPPORTED", { what: "GET {stream}/snapshot" });
    assertError(await head(`${url}/snapshot`), 405, undefined, { isHead: true, what: "HEAD {stream}/snapshot" });
  });

  test("a missing stream's latest-snapshot path answers 405 UNSUPPORTED too (the path, not the stream, is refused)", async () => {
    assertError(await get(`${server.url}/refusals/none${++n}/snapshot`), 405, "UNSUPPORTED", { what: "GET of a missing stream" });
  });
});
