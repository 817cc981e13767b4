// Snapshots, retention and rewrites across restarts (SIGTERM: a graceful
// stop; SIGKILL: right after the acknowledgements, log replay).
// Covers extensions.txt §2.2 (a published snapshot, its digest, content type
// and body, a parts commit, a superseded snapshot staying superseded, the
// idempotent repeat and the 409 after the restart; retention and its 410s),
// §2.4 (HEAD's Stream-Snapshot-Offset/-Digest, Stream-Retained-Offset,
// Stream-Incarnation, and the rewrite headers), §2.5 (the read: headers,
// ETag, ranges), §3 (bootstrap) and §4 (immutable resources: a marked
// response's body and headers are the same after the restart).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { assertError, get, head, req } from "./lib/bucket.mjs";
import { parseMultipart, parseMultipartType } from "./lib/multipart.mjs";
import {
  MiB, append, commit, createStream, enc, h, offsetAfter, publish, publishOk, pseudoRandom, sha256, snapshotDigest,
  stagePart, tok, stopAndRemove,
} from "./lib/snap.mjs";

const OCTET = "application/octet-stream";
const HEAD_KEYS = [
  "stream-incarnation", "stream-next-offset", "stream-retained-offset", "stream-snapshot-offset", "stream-snapshot-digest",
  "stream-previous-incarnation", "stream-inherited-offset", "stream-closed", "content-type",
];
const MARKED_KEYS = ["content-type", "stream-incarnation", "stream-offset", "stream-next-offset", "stream-closed", "stream-snapshot-offset", "stream-snapshot-digest", "stream-immutable"];

const pick = (r, keys) => Object.fromEntries(keys.map((k) => [k, h(r, k)]));

async function bootstrapParts(url) {
  const r = await get(`${url}/bootstrap`);
  assert.equal(r.status, 200, `bootstrap answered ${r.status} ${r.text}`);
  const { parts } = parseMultipart(r.body, parseMultipartType(h(r, "content-type")).boundary);
  return {
    snapshotOffset: h(r, "stream-snapshot-offset"),
    next: h(r, "stream-next-offset"),
    upToDate: h(r, "stream-up-to-date"),
    parts: parts.map((p) => ({ type: p.headers.get("content-type"), sha: sha256(p.body), length: p.body.length })),
  };
}

for (const signal of ["SIGTERM", "SIGKILL"]) {
  describe(`snapshots survive a ${signal} restart`, () => {
    const server = new Server({ args: ["--test-hooks"] });
    before(() => server.start());
    after(() => stopAndRemove(server));
    const B = `rst${signal.toLowerCase()}`;
    const at = (name) => `${server.url}/${B}/${name}`;

    test("snapshot, digest, type, body, retention, parts commit, supersession and rewrite headers", { timeout: 120000 }, async () => {
      const st = {};
      // A: binary, inline snapshot in the middle, retention below it.
      {
        const url = at("a");
        const c = await createStream(url, { type: OCTET });
        await append(url, Buffer.from("0123456789abcdefghij"), OCTET);
        const o5 = await offsetAfter(url, 5, c.tail);
        const o10 = await offsetAfter(url, 10, c.tail);
        const dOld = await publishOk(url, o5, "superseded", { type: "text/x-old" });
        const d = await publishOk(url, o10, "inline-snapshot", { type: "application/x-a; v=1" });
        assert.notEqual(dOld, d);
        const ret = await req(`${url}/retention/${enc(o5)}`, { method: "PUT" });
        assert.ok(ret.status === 200 || ret.status === 204);
        st.a = { url, first: c.tail, o5, o10, d };
      }
      // B: binary, a cold-tier snapshot at the tail.
      {
        const url = at("b");
        const c = await createStream(url, { type: OCTET, body: Buffer.from("bbb") });
        const body = pseudoRandom(5 * MiB + 3, `restart-b-${signal}`);
        const d = await publishOk(url, c.tail, body, { type: "application/x-b" });
        st.b = { url, off: c.tail, d, body };
      }
      // C: JSON, snapshot and retention at a message boundary.
      {
        const url = at("c");
        const c = await createStream(url, { type: "application/json" });
        await append(url, '[{"m":1},{"m":2},{"m":3}]', "application/json");
        const o2 = await offsetAfter(url, 16, c.tail);
        const d = await publishOk(url, o2, '{"state":[1,2]}', { type: "application/json" });
        const ret = await req(`${url}/retention/${enc(o2)}`, { method: "PUT" });
        assert.ok(ret.status === 200 || ret.status === 204);
        st.c = { url, first: c.tail, o2, d };
      }
      // D: a snapshot committed from parts.
      {
        const url = at("d");
        const c = await createStream(url, { type: OCTET, body: Buffer.from("ddd") });
        const bodies = [0, 1, 2].map((i) => pseudoRandom(2 * MiB + i, `restart-d-${i}-${signal}`));
        const ids = [];
        for (const b of bodies) ids.push(await stagePart(url, c.tail, b));
        const d = snapshotDigest("application/x-d", Buffer.concat(bodies));
        const r = await commit(url, c.tail, ids, d, { type: "application/x-d" });
        assert.equal(r.status, 204, `commit answered ${r.status} ${r.text}`);
        st.d = { url, off: c.tail, d, ids, body: Buffer.concat(bodies) };
      }
      // E: a rewritten stream.
      {
        const url = at("e");
        const c = await createStream(url, { type: OCTET });
        await append(url, Buffer.from("rewrite-me-please"), OCTET);
        const keep = await offsetAfter(url, 7, c.tail);
        const r = await req(`${server.url}/__runnel/test/rewrite/${B}/e?keep=${enc(keep)}`, { method: "POST" });
        assert.equal(r.status, 204);
        st.e = { url, old: c.token, token: tok(r), keep };
      }
      // F: a marked chunk (a 5 MiB stream, closed).
      {
        const url = at("f");
        const c = await createStream(url, { type: OCTET });
        await append(url, pseudoRandom(5 * MiB, `restart-f-${signal}`), OCTET);
        const cl = await req(url, { method: "POST", headers: { "stream-closed": "true" } });
        assert.equal(cl.status, 204);
        st.f = { url, chunks: [`${url}/incarnation/${c.token}/chunk/${enc(c.tail)}`] };
        const c0 = await get(st.f.chunks[0]);
        st.f.chunks.push(`${url}/incarnation/${c.token}/chunk/${enc(h(c0, "stream-next-offset"))}`);
      }

      // Everything observable before the restart.
      const urls = ["a", "b", "c", "d", "e", "f"].map((k) => st[k].url);
      const heads = {};
      for (const u of urls) heads[u] = pick(await head(u), HEAD_KEYS);
      const boots = {};
      for (const u of urls) boots[u] = await bootstrapParts(u);
      const snaps = {};
      for (const [u, off] of [[st.a.url, st.a.o10], [st.b.url, st.b.off], [st.c.url, st.c.o2], [st.d.url, st.d.off]]) {
        const r = await get(`${u}/snapshot/${enc(off)}`);
        assert.equal(r.status, 200);
        snaps[u] = { ...pick(r, ["content-type", "stream-snapshot-offset", "stream-snapshot-digest", "stream-next-offset", "stream-incarnation", "etag"]), sha: sha256(r.body) };
      }
      const marked = [];
      for (const u of st.f.chunks) {
        const r = await get(u);
        assert.equal(h(r, "stream-immutable"), "true");
        marked.push({ ...pick(r, MARKED_KEYS), sha: sha256(r.body) });
      }

      const result = await server.stop(signal);
      assert.equal(result.signal, signal === "SIGKILL" ? "SIGKILL" : result.signal);
      if (signal === "SIGTERM") assert.equal(result.code, 0, "a graceful stop exits 0");
      await server.start();

      for (const u of urls) assert.deepEqual(pick(await head(u), HEAD_KEYS), heads[u], `HEAD of ${u} after the restart`);
      for (const u of urls) assert.deepEqual(await bootstrapParts(u), boots[u], `bootstrap of ${u} after the restart`);
      for (const [u, off] of [[st.a.url, st.a.o10], [st.b.url, st.b.off], [st.c.url, st.c.o2], [st.d.url, st.d.off]]) {
        const r = await get(`${u}/snapshot/${enc(off)}`);
        assert.equal(r.status, 200, `snapshot of ${u} after the restart`);
        assert.deepEqual({ ...pick(r, ["content-type", "stream-snapshot-offset", "stream-snapshot-digest", "stream-next-offset", "stream-incarnation", "etag"]), sha: sha256(r.body) }, snaps[u]);
      }
      for (const [i, u] of st.f.chunks.entries()) {
        const r = await get(u);
        assert.deepEqual({ ...pick(r, MARKED_KEYS), sha: sha256(r.body) }, marked[i], `marked chunk ${i} after the restart`);
      }

      // Specific values, not only "unchanged".
      assert.equal(snaps[st.a.url]["content-type"], "application/x-a; v=1");
      assert.equal(snaps[st.a.url]["stream-snapshot-digest"], snapshotDigest("application/x-a; v=1", "inline-snapshot"));
      assert.equal(snaps[st.b.url].sha, sha256(st.b.body));
      assert.equal(snaps[st.d.url].sha, sha256(st.d.body));
      assert.equal(heads[st.a.url]["stream-retained-offset"], st.a.o5);
      assert.equal(heads[st.e.url]["stream-previous-incarnation"], st.e.old);
      assert.equal(heads[st.e.url]["stream-incarnation"], st.e.token);
      const range = await get(`${st.b.url}/snapshot/${enc(st.b.off)}`, { range: `bytes=${3 * MiB}-${3 * MiB + 99}` });
      assert.equal(range.status, 206);
      assert.ok(range.body.equals(st.b.body.subarray(3 * MiB, 3 * MiB + 100)));

      // Retention still answers 410 below it; the superseded snapshot is gone.
      assertError(await get(`${st.a.url}?offset=${enc(st.a.first)}`), 410, "STREAM_GONE", { what: "A below retention" });
      assertError(await get(`${st.c.url}?offset=${enc(st.c.first)}`), 410, "STREAM_GONE", { what: "C below retention" });
      assertError(await get(`${st.a.url}/snapshot/${enc(st.a.o5)}`), 404, "SNAPSHOT_NOT_FOUND", { what: "superseded" });
      // Idempotency and conflicts still hold.
      const rep = await publish(st.a.url, st.a.o10, "inline-snapshot", { type: "application/x-a; v=1" });
      assert.equal(rep.status, 204);
      assert.equal(h(rep, "stream-snapshot-digest"), st.a.d);
      const conflict = await publish(st.a.url, st.a.o10, "other", { type: "application/x-a; v=1" });
      assertError(conflict, 409, "SNAPSHOT_CONFLICT", { what: "conflict after restart" });
      assert.equal(h(conflict, "stream-snapshot-digest"), st.a.d);
      const crep = await commit(st.d.url, st.d.off, st.d.ids, st.d.d, { type: "application/x-d" });
      assert.equal(crep.status, 204, `commit repeat after the restart: ${crep.status} ${crep.text}`);
      assert.equal(h(crep, "stream-snapshot-digest"), st.d.d);
      // The old token stays refused.
      const old = await get(`${st.e.url}/incarnation/${st.e.old}/chunk/${enc(st.e.keep)}`);
      assertError(old, 412, "INCARNATION_MISMATCH", { what: "old token after the restart" });
      assert.equal(tok(old), st.e.token);
    });

    test("a publish acknowledged just before the stop is there after it", { timeout: 60000 }, async () => {
      const url = at("late");
      const c = await createStream(url, { type: OCTET, body: Buffer.from("late") });
      const d = await publishOk(url, c.tail, "just-before", { type: "text/x-late" });
      await server.restart(signal);
      const hd = await head(url);
      assert.equal(h(hd, "stream-snapshot-offset"), c.tail);
      assert.equal(h(hd, "stream-snapshot-digest"), d);
      const r = await get(`${url}/snapshot/${enc(c.tail)}`);
      assert.equal(r.status, 200);
      assert.equal(r.text, "just-before");
      assert.equal(h(r, "content-type"), "text/x-late");
    });
  });
}
