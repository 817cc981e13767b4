// History rewrites (through the server's test hook) and what they do to
// tokens, HEAD and the immutable resources.
// Covers extensions.txt §2.4 History rewrites (a new Stream-Incarnation;
// Stream-Previous-Incarnation + Stream-Inherited-Offset on HEAD, the
// inherited offset at most the tail and the bytes below it unchanged; two
// rewrites without a write between name the token before both, with a write
// between the token between; the old token answers 412 with the new one),
// §4.1 / §4.3 (old-token immutable URLs: 412 with the current token, 416
// before 412 once the stream ends before the offset) and §11 error bodies.
// The hook: POST /__runnel/test/rewrite/{bucket}/{stream}?keep=<offset>
// (--test-hooks) rewinds the stream to `keep` under a new token and
// answers 204 with the new Stream-Incarnation.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { assertError, assertToken, get, head, post, req } from "./lib/bucket.mjs";
import {
  CHUNK, MiB, append, assertAbsent, createStream, enc, h, offsetAfter, publishOk, pseudoRandom, readRange, tok, stopAndRemove,
} from "./lib/snap.mjs";

const server = new Server({ args: ["--test-hooks"] });
before(() => server.start());
after(() => stopAndRemove(server));

let n = 0;
const OCTET = "application/octet-stream";
const BUCKET = "histb";

async function binary(body = "0123456789abcdefghij") {
  const name = `s${++n}`;
  const url = `${server.url}/${BUCKET}/${name}`;
  const c = await createStream(url, { type: OCTET });
  const tail = await append(url, Buffer.from(body), OCTET);
  return { url, name, token: c.token, first: c.tail, tail, body: Buffer.from(body) };
}

async function rewrite(s, keep) {
  const r = await req(`${server.url}/__runnel/test/rewrite/${BUCKET}/${s.name}?keep=${enc(keep)}`, { method: "POST" });
  assert.equal(r.status, 204, `the rewrite hook answered ${r.status} ${r.text}`);
  return assertToken(tok(r), "Stream-Incarnation of the rewrite");
}

async function headOk(url) {
  const r = await head(url);
  assert.equal(r.status, 200);
  return r;
}

// Lexicographic offset order (PROTOCOL.md §8).
const le = (a, b) => a <= b;

describe("§2.4 one rewrite", () => {
  test("a new token; HEAD names the previous token and the inherited offset; bytes below it are unchanged", async () => {
    const s = await binary();
    const keep = await offsetAfter(s.url, 12, s.first);
    const t1 = await rewrite(s, keep);
    assert.notEqual(t1, s.token, "a rewrite changes Stream-Incarnation");
    const hd = await headOk(s.url);
    assert.equal(tok(hd), t1);
    assert.equal(h(hd, "stream-previous-incarnation"), s.token);
    assert.notEqual(h(hd, "stream-previous-incarnation"), tok(hd), "never equal to Stream-Incarnation");
    const inherited = h(hd, "stream-inherited-offset");
    assert.equal(inherited, keep, "the inherited offset is what the rewrite kept");
    assert.ok(le(inherited, h(hd, "stream-next-offset")), "the inherited offset is at most the tail");
    const kept = await readRange(s.url, s.first, inherited);
    assert.equal(kept.body.toString(), s.body.subarray(0, 12).toString(), "the bytes below the inherited offset are the same");
  });

  test("a rewrite that keeps every byte still changes the token", async () => {
    const s = await binary();
    const t1 = await rewrite(s, s.tail);
    assert.notEqual(t1, s.token);
    const hd = await headOk(s.url);
    assert.equal(h(hd, "stream-previous-incarnation"), s.token);
    assert.equal(h(hd, "stream-inherited-offset"), s.tail);
  });

  test("the old token as a precondition answers 412 with the new token on every kind of request", async () => {
    const s = await binary();
    const keep = await offsetAfter(s.url, 10, s.first);
    const t1 = await rewrite(s, keep);
    const H = { "stream-incarnation": s.token };
    const answers = {
      HEAD: await head(s.url, H),
      read: await get(`${s.url}?offset=${enc(s.first)}`, H),
      append: await post(s.url, Buffer.from("x"), { type: OCTET, headers: H }),
      publish: await req(`${s.url}/snapshot/${enc(keep)}`, { method: "PUT", headers: { ...H, "content-type": OCTET }, body: Buffer.from("s") }),
      bootstrap: await get(`${s.url}/bootstrap`, H),
    };
    for (const [what, r] of Object.entries(answers)) {
      if (what === "HEAD") assertError(r, 412, undefined, { what, isHead: true });
      else assertError(r, 412, "INCARNATION_MISMATCH", { what });
      assert.equal(tok(r), t1, `${what}: the 412 names the new token`);
    }
    // The new token works, and appends continue at the kept tail.
    const ok = await post(s.url, Buffer.from("NEW"), { type: OCTET, headers: { "stream-incarnation": t1 } });
    assert.equal(ok.status, 204);
    const all = await readRange(s.url, s.first, h(ok, "stream-next-offset"));
    assert.equal(all.body.toString(), "0123456789NEW");
  });

  test("old-token immutable URLs answer 412 with the new token; new-token URLs serve the kept bytes", async () => {
    const s = await binary();
    const keep = await offsetAfter(s.url, 15, s.first);
    await publishOk(s.url, keep, "snap-at-15");
    const t1 = await rewrite(s, keep);
    const oldChunk = await get(`${s.url}/incarnation/${s.token}/chunk/${enc(s.first)}`);
    assertError(oldChunk, 412, "INCARNATION_MISMATCH", { what: "old-token chunk" });
    assert.equal(tok(oldChunk), t1);
    const newChunk = await get(`${s.url}/incarnation/${t1}/chunk/${enc(s.first)}`);
    assert.equal(newChunk.status, 200);
    assert.equal(newChunk.text, s.body.subarray(0, 15).toString());
    assert.equal(h(newChunk, "stream-incarnation"), t1);
    // The snapshot: the old-token URL answers 412 (or 404 if the rewrite
    // dropped the snapshot), never the bytes.
    const hd = await headOk(s.url);
    const oldSnap = await get(`${s.url}/incarnation/${s.token}/snapshot/${enc(keep)}`);
    if (h(hd, "stream-snapshot-offset") === keep) {
      assertError(oldSnap, 412, "INCARNATION_MISMATCH", { what: "old-token snapshot" });
      const newSnap = await get(`${s.url}/incarnation/${t1}/snapshot/${enc(keep)}`);
      assert.equal(newSnap.status, 200);
      assert.equal(newSnap.text, "snap-at-15");
    } else {
      assertError(oldSnap, 404, "SNAPSHOT_NOT_FOUND", { what: "old-token snapshot the rewrite dropped" });
    }
    assert.equal(tok(oldSnap), t1);
  });

  test("an old-token chunk past the rewound tail answers 416 (before 412) with the new token", async () => {
    const s = await binary();
    const keep = await offsetAfter(s.url, 5, s.first);
    const t1 = await rewrite(s, keep);
    const r = await get(`${s.url}/incarnation/${s.token}/chunk/${enc(s.tail)}`);
    assertError(r, 416, "OFFSET_OUT_OF_RANGE", { what: "old token past the new tail" });
    assert.equal(tok(r), t1);
  });

  test("a chunk marked under the old token is served under the new token with the same bytes below the inherited offset", async () => {
    const url = `${server.url}/${BUCKET}/big${++n}`;
    const c = await createStream(url, { type: OCTET });
    const data = pseudoRandom(6 * MiB, "hist-big");
    await append(url, data, OCTET);
    const o4 = await offsetAfter(url, CHUNK, c.tail);
    const before = await get(`${url}/incarnation/${c.token}/chunk/${enc(c.tail)}`);
    assert.equal(h(before, "stream-immutable"), "true");
    const keep = await offsetAfter(url, 5 * MiB, c.tail);
    const r = await req(`${server.url}/__runnel/test/rewrite/${BUCKET}/big${n}?keep=${enc(keep)}`, { method: "POST" });
    assert.equal(r.status, 204);
    const t1 = tok(r);
    const after = await get(`${url}/incarnation/${t1}/chunk/${enc(c.tail)}`);
    assert.equal(after.status, 200);
    assert.equal(h(after, "stream-next-offset"), o4);
    assert.ok(after.body.equals(before.body));
    assert.equal(h(after, "stream-incarnation"), t1);
    assert.notEqual(h(after, "etag"), null);
  });
});

describe("§2.4 two rewrites", () => {
  test("without a write between, keeping the tail: the headers name the token before both", async () => {
    const s = await binary();
    const keep = await offsetAfter(s.url, 12, s.first);
    const t1 = await rewrite(s, keep);
    const t2 = await rewrite(s, keep);
    assert.notEqual(t2, t1);
    assert.notEqual(t2, s.token);
    const hd = await headOk(s.url);
    assert.equal(tok(hd), t2);
    assert.equal(h(hd, "stream-previous-incarnation"), s.token, "the token before both rewrites");
    assert.equal(h(hd, "stream-inherited-offset"), keep);
  });

  test("without a write between, the second keeping less: the token before both, the inherited offset at most the tail", async () => {
    const s = await binary();
    const k1 = await offsetAfter(s.url, 12, s.first);
    const k2 = await offsetAfter(s.url, 5, s.first);
    await rewrite(s, k1);
    const t2 = await rewrite(s, k2);
    const hd = await headOk(s.url);
    assert.equal(tok(hd), t2);
    assert.equal(h(hd, "stream-previous-incarnation"), s.token);
    const tail = h(hd, "stream-next-offset");
    assert.equal(tail, k2);
    const inherited = h(hd, "stream-inherited-offset");
    assert.ok(le(inherited, tail), `Stream-Inherited-Offset ${inherited} is at most the stream's tail ${tail}`);
    assert.equal(inherited, k2, "what survived both rewrites is the second one's kept prefix");
  });

  test("with a write between: the headers name the token between the two", async () => {
    const s = await binary();
    const k1 = await offsetAfter(s.url, 12, s.first);
    const t1 = await rewrite(s, k1);
    const tailAfterWrite = await append(s.url, Buffer.from("WRITE"), OCTET);
    const t2 = await rewrite(s, tailAfterWrite);
    const hd = await headOk(s.url);
    assert.equal(tok(hd), t2);
    assert.equal(h(hd, "stream-previous-incarnation"), t1, "the token between the rewrites");
    assert.equal(h(hd, "stream-inherited-offset"), tailAfterWrite);
    const bytes = await readRange(s.url, s.first, tailAfterWrite);
    assert.equal(bytes.body.toString(), "0123456789abWRITE");
    // A client holding the oldest token finds no match.
    assert.notEqual(h(hd, "stream-previous-incarnation"), s.token);
  });

  test("delete and recreate after a rewrite: no rewrite headers on the new stream", async () => {
    const s = await binary();
    await rewrite(s, s.tail);
    assert.equal((await req(s.url, { method: "DELETE" })).status, 204);
    await createStream(s.url, { type: OCTET, body: Buffer.from("fresh") });
    assertAbsent(await headOk(s.url), ["stream-previous-incarnation", "stream-inherited-offset"], "a recreated stream");
  });
});
