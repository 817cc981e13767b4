// Bucket surface: identifiers and routing.
// Covers extensions.txt §1 Buckets (§1.1 Identifier Constraints, §1.2 Bucket
// Lifecycle, §1.6 Stream Operations) and §8 URL Encoding, with the error
// codes of §11 (INVALID_BUCKET_ID, INVALID_STREAM_ID, NOT_FOUND, ...).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import {
  assertError, del, get, head, post, put, raw, rawAsResponse, req,
} from "./lib/bucket.mjs";

const server = new Server();
before(() => server.start());
after(() => server.stop());

const u = (p) => `${server.url}/${p}`;

describe("§1.1 bucket_id ^[a-z0-9_-]{4,64}$", () => {
  const valid = ["abcd", "a_b-", "0123", "my-bucket_01", "----", "_a_b", "z".repeat(64)];
  const invalid = [
    ["abc", "3 characters"],
    ["a".repeat(65), "65 characters"],
    ["ABCD", "uppercase"],
    ["abcD", "one uppercase letter"],
    ["ab.cd", "a dot"],
    ["ab%20cd", "a space"],
    ["ab%2Bcd", "a plus"],
    ["abc%C3%A9", "a non-ASCII letter"],
    ["ab~cd", "a tilde"],
  ];

  test("PUT /{bucket} answers 201 Created for a valid id", async () => {
    for (const b of valid) {
      const r = await put(u(b), { type: null });
      assert.equal(r.status, 201, `PUT /${b} answered ${r.status} ${r.text}`);
    }
  });

  test("PUT /{bucket} answers 400 INVALID_BUCKET_ID for an invalid id", async () => {
    for (const [b, why] of invalid) {
      const r = await put(u(b), { type: null });
      assertError(r, 400, "INVALID_BUCKET_ID", { what: `PUT /${b} (${why})` });
    }
  });

  test("bucket ids starting with __ are reserved: 400 INVALID_BUCKET_ID", async () => {
    for (const b of ["__abcd", "__x_y-z"]) {
      assertError(await put(u(b), { type: null }), 400, "INVALID_BUCKET_ID", { what: `PUT /${b}` });
      assertError(await put(u(`${b}/s`)), 400, "INVALID_BUCKET_ID", { what: `PUT /${b}/s` });
      assertError(await get(u(`${b}/s`)), 400, "INVALID_BUCKET_ID", { what: `GET /${b}/s` });
    }
  });

  test("stream routes validate the bucket id: 400 INVALID_BUCKET_ID on every method", async () => {
    for (const [b, why] of invalid) {
      const url = u(`${b}/s1`);
      const what = `(${why}) /${b}/s1`;
      assertError(await put(url, { body: "x" }), 400, "INVALID_BUCKET_ID", { what: `PUT ${what}` });
      assertError(await post(url, "x"), 400, "INVALID_BUCKET_ID", { what: `POST ${what}` });
      assertError(await get(`${url}?offset=-1`), 400, "INVALID_BUCKET_ID", { what: `GET ${what}` });
      assertError(await del(url), 400, "INVALID_BUCKET_ID", { what: `DELETE ${what}` });
      assertError(await head(url), 400, "INVALID_BUCKET_ID", { isHead: true, what: `HEAD ${what}` });
    }
  });

  test("stream routes accept the boundary lengths 4 and 64", async () => {
    for (const b of ["bnd4", "b".repeat(64)]) {
      const r = await put(u(`${b}/s`), { body: "x" });
      assert.equal(r.status, 201, `PUT /${b}/s answered ${r.status} ${r.text}`);
      assert.equal((await head(u(`${b}/s`))).status, 200);
    }
  });
});

describe("§1.1 stream_id", () => {
  test("combined {bucket_id}/{stream_id} key of exactly 122 bytes is accepted, 123 refused", async () => {
    // 4 + 1 + 117 = 122
    const ok = u(`lenk/${"s".repeat(117)}`);
    const r = await put(ok, { body: "x" });
    assert.equal(r.status, 201, `122-byte key answered ${r.status} ${r.text}`);
    assert.equal((await get(`${ok}?offset=-1`)).text, "x");
    // 4 + 1 + 118 = 123
    const bad = u(`lenk/${"s".repeat(118)}`);
    assertError(await put(bad, { body: "x" }), 400, "INVALID_STREAM_ID", { what: "PUT 123-byte key" });
    assertError(await get(`${bad}?offset=-1`), 400, "INVALID_STREAM_ID", { what: "GET 123-byte key" });
    assertError(await post(bad, "x"), 400, "INVALID_STREAM_ID", { what: "POST 123-byte key" });
    assertError(await head(bad), 400, "INVALID_STREAM_ID", { isHead: true, what: "HEAD 123-byte key" });
  });

  test("the 122-byte limit counts the bucket id too (64-byte bucket)", async () => {
    const b = "l".repeat(64);
    const ok = u(`${b}/${"s".repeat(57)}`); // 64 + 1 + 57 = 122
    assert.equal((await put(ok, { body: "x" })).status, 201);
    const bad = u(`${b}/${"s".repeat(58)}`); // 123
    assertError(await put(bad, { body: "x" }), 400, "INVALID_STREAM_ID", { what: "PUT 123-byte key, 64-byte bucket" });
  });

  test("the limit counts UTF-8 bytes of the decoded id, not characters or encoded text", async () => {
    const e = "%C3%A9"; // é, 2 bytes
    // 4 + 1 + 58*2 + 1 = 122 bytes (but 59 characters, and 5+349 encoded chars)
    const ok = u(`lenu/${e.repeat(58)}a`);
    const r = await put(ok, { body: "x" });
    assert.equal(r.status, 201, `122-byte UTF-8 key answered ${r.status} ${r.text}`);
    assert.equal((await head(ok)).status, 200);
    const bad = u(`lenu/${e.repeat(58)}ab`); // 123 bytes, 60 characters
    assertError(await put(bad, { body: "x" }), 400, "INVALID_STREAM_ID", { what: "PUT 123-byte UTF-8 key" });
  });

  test("a percent-encoded / in the stream id is refused (INVALID_STREAM_ID), not routed as a segment", async () => {
    for (const id of ["a%2Fb", "a%2fb", "%2F", "ab%2F"]) {
      assertError(await put(u(`slsh/${id}`), { body: "x" }), 400, "INVALID_STREAM_ID", { what: `PUT /slsh/${id}` });
      assertError(await get(u(`slsh/${id}?offset=-1`)), 400, "INVALID_STREAM_ID", { what: `GET /slsh/${id}` });
    }
  });

  test("a NUL in the stream id is refused (INVALID_STREAM_ID)", async () => {
    for (const id of ["a%00b", "%00", "ab%00"]) {
      assertError(await put(u(`nulb/${id}`), { body: "x" }), 400, "INVALID_STREAM_ID", { what: `PUT /nulb/${id}` });
      assertError(await head(u(`nulb/${id}`)), 400, "INVALID_STREAM_ID", { isHead: true, what: `HEAD /nulb/${id}` });
    }
  });

  test('a stream id containing ".." is refused (INVALID_STREAM_ID)', async () => {
    for (const id of ["a..b", "..a", "a..", "x...y", "a%2E%2Eb", "a.%2Eb"]) {
      assertError(await put(u(`dots/${id}`), { body: "x" }), 400, "INVALID_STREAM_ID", { what: `PUT /dots/${id}` });
    }
    // Whole-segment ".." and "%2E%2E": fetch would resolve them, so send them raw.
    for (const id of ["..", "%2E%2E", "%2e%2e", ".%2E"]) {
      const r = await raw(server.port, `PUT /dots/${id} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 1\r\nConnection: close`, { body: "x" });
      assertError(rawAsResponse(r), 400, "INVALID_STREAM_ID", { what: `raw PUT /dots/${id}` });
    }
  });

  test("a single dot is allowed inside a stream id", async () => {
    const r = await put(u("dots/a.b"), { body: "x" });
    assert.equal(r.status, 201, `PUT /dots/a.b answered ${r.status} ${r.text}`);
  });

  test('the literal stream id "streams" is reserved (INVALID_STREAM_ID)', async () => {
    assertError(await put(u("rsvd/streams"), { body: "x" }), 400, "INVALID_STREAM_ID", { what: "PUT /rsvd/streams" });
    assertError(await get(u("rsvd/streams?offset=-1")), 400, "INVALID_STREAM_ID", { what: "GET /rsvd/streams" });
    assertError(await head(u("rsvd/streams")), 400, "INVALID_STREAM_ID", { isHead: true, what: "HEAD /rsvd/streams" });
    // Only the literal: a longer id is an ordinary stream.
    assert.equal((await put(u("rsvd/streams2"), { body: "x" })).status, 201);
  });

  test('a stream id starting with "$" is reserved (INVALID_STREAM_ID), also percent-encoded', async () => {
    for (const id of ["$abc", "%24abc", "$", "$transaction"]) {
      assertError(await put(u(`dolr/${id}`), { body: "x" }), 400, "INVALID_STREAM_ID", { what: `PUT /dolr/${id}` });
      assertError(await get(u(`dolr/${id}?offset=-1`)), 400, "INVALID_STREAM_ID", { what: `GET /dolr/${id}` });
    }
    // A $ elsewhere is fine.
    assert.equal((await put(u("dolr/a$b"), { body: "x" })).status, 201);
  });

  test("names reserved for future subresources remain valid stream ids", async () => {
    for (const id of ["append-batch", "attrs", "bootstrap", "incarnation", "retention", "snapshot"]) {
      const r = await put(u(`rsv2/${id}`), { body: id });
      assert.equal(r.status, 201, `PUT /rsv2/${id} answered ${r.status} ${r.text}`);
      const g = await get(u(`rsv2/${id}?offset=-1`));
      assert.equal(g.status, 200);
      assert.equal(g.text, id);
    }
  });
});

describe("§1.2 bucket lifecycle", () => {
  test("buckets are implicit: PUT /{bucket}/{stream} needs no PUT /{bucket}", async () => {
    const r = await put(u("implicitb/s1"), { body: "hello" });
    assert.equal(r.status, 201, `answered ${r.status} ${r.text}`);
    const g = await get(u("implicitb/s1?offset=-1"));
    assert.equal(g.status, 200);
    assert.equal(g.text, "hello");
  });

  test("PUT /{bucket} changes no state: repeatable 201, creates no stream", async () => {
    const before = await get(u("stlss/s?offset=-1"));
    assert.equal(before.status, 404);
    assert.equal((await put(u("stlss"), { type: null })).status, 201);
    assert.equal((await put(u("stlss"), { type: null })).status, 201, "a second PUT /{bucket} is 201 again");
    const afterPut = await get(u("stlss/s?offset=-1"));
    assert.equal(afterPut.status, 404);
    // The answer for a stream in that bucket is exactly what it was before.
    assert.equal(afterPut.text, before.text, "PUT /{bucket} changes the 404 in no way");
  });

  test("a bucket nothing was created in answers 404 BUCKET_NOT_FOUND; one with a stream answers STREAM_NOT_FOUND", async () => {
    assertError(await get(u("neverused/s?offset=-1")), 404, "BUCKET_NOT_FOUND", { what: "GET in a never-used bucket" });
    assert.equal((await put(u("usedbkt/s"), { body: "x" })).status, 201);
    assertError(await get(u("usedbkt/other?offset=-1")), 404, "STREAM_NOT_FOUND", { what: "GET missing stream in a used bucket" });
  });

  test("the client surface has no bucket delete: DELETE /{bucket} is refused and deletes nothing", async () => {
    assert.equal((await put(u("nodelb/s"), { body: "keep" })).status, 201);
    const r = await del(u("nodelb"));
    assert.ok(r.status === 404 || r.status === 405, `DELETE /{bucket} answered ${r.status}`);
    assertError(r, r.status, r.status === 404 ? "NOT_FOUND" : "METHOD_NOT_ALLOWED", { what: "DELETE /{bucket}" });
    const g = await get(u("nodelb/s?offset=-1"));
    assert.equal(g.status, 200);
    assert.equal(g.text, "keep");
  });
});

describe("§1.6 stream operations under /{bucket}/{stream}", () => {
  test("create, append, read, close and delete work under the bucket URL", async () => {
    const url = u("opsb/s1");
    const c = await put(url, { body: "ab" });
    assert.equal(c.status, 201);
    assert.ok(c.headers.get("stream-next-offset"));
    const p = await post(url, "cd");
    assert.ok(p.status === 204 || p.status === 200, `append answered ${p.status}`);
    const tail = p.headers.get("stream-next-offset");
    assert.ok(tail && tail > c.headers.get("stream-next-offset"), "append advances the tail");
    const g = await get(`${url}?offset=-1`);
    assert.equal(g.status, 200);
    assert.equal(g.text, "abcd");
    assert.equal(g.headers.get("stream-next-offset"), tail);
    assert.equal(g.headers.get("stream-up-to-date"), "true");
    const h = await head(url);
    assert.equal(h.status, 200);
    assert.equal(h.headers.get("stream-next-offset"), tail);
    const cl = await post(url, undefined, { type: null, headers: { "stream-closed": "true" } });
    assert.equal(cl.status, 204);
    assert.equal(cl.headers.get("stream-closed"), "true");
    assertError(await post(url, "more"), 409, "STREAM_CLOSED", { what: "append to a closed stream" });
    assert.equal((await del(url)).status, 204);
    assertError(await head(url), 404, undefined, { isHead: true, what: "HEAD after delete" });
    assertError(await get(`${url}?offset=-1`), 404, "STREAM_NOT_FOUND", { what: "GET after delete" });
  });

  test("a bucket stream is the same stream at /v1/stream/{bucket}/{stream}", async () => {
    const b = u("v1bk/s");
    const v1 = server.stream("v1bk/s");
    const c = await put(b, { body: "one," });
    assert.equal(c.status, 201);
    const p = await post(v1, "two,");
    assert.ok(p.status === 204 || p.status === 200, `append through /v1 answered ${p.status}`);
    const p2 = await post(b, "three");
    assert.ok(p2.status === 204 || p2.status === 200);
    for (const url of [b, v1]) {
      const g = await get(`${url}?offset=-1`);
      assert.equal(g.status, 200);
      assert.equal(g.text, "one,two,three", `read at ${url}`);
      assert.equal(g.headers.get("stream-next-offset"), p2.headers.get("stream-next-offset"));
    }
    assert.equal((await del(v1)).status, 204);
    assert.equal((await head(b)).status, 404, "deleted through /v1, gone on the bucket surface");
  });

  test("three or more segments under a bucket are 404 NOT_FOUND, for any method", async () => {
    assert.equal((await put(u("segb/s"), { body: "x" })).status, 201);
    for (const p of ["segb/s/foo", "segb/s/foo/bar", "segb/missing/foo", "segb/s/x/y/z", "neverb/s/foo"]) {
      assertError(await get(u(p)), 404, "NOT_FOUND", { what: `GET /${p}` });
      assertError(await put(u(p), { body: "x" }), 404, "NOT_FOUND", { what: `PUT /${p}` });
      assertError(await post(u(p), "x"), 404, "NOT_FOUND", { what: `POST /${p}` });
      assertError(await del(u(p)), 404, "NOT_FOUND", { what: `DELETE /${p}` });
      const h = await head(u(p));
      assertError(h, 404, undefined, { isHead: true, what: `HEAD /${p}` });
    }
    // Nothing was created or deleted by those requests.
    assert.equal((await get(u("segb/s?offset=-1"))).text, "x");
    assert.equal((await head(u("segb/missing"))).status, 404);
  });
});

describe("§8 URL encoding", () => {
  test("a percent-encoded stream id is decoded: space", async () => {
    const r = await put(u("encb/hello%20world"), { body: "sp" });
    assert.equal(r.status, 201, `answered ${r.status} ${r.text}`);
    // The same stream whichever hex case or extra encoding is used.
    for (const p of ["encb/hello%20world", "encb/%68ello%20world", "encb/hello%20%77orld"]) {
      const g = await get(u(`${p}?offset=-1`));
      assert.equal(g.status, 200, `GET /${p} answered ${g.status}`);
      assert.equal(g.text, "sp");
    }
    // Reached through /v1/stream as well.
    assert.equal((await get(server.stream("encb/hello%20world?offset=-1"))).text, "sp");
  });

  test("a percent-encoded UTF-8 stream id is decoded", async () => {
    const r = await put(u("encb/caf%C3%A9"), { body: "utf" });
    assert.equal(r.status, 201, `answered ${r.status} ${r.text}`);
    const inc = r.headers.get("stream-incarnation");
    for (const p of ["encb/caf%c3%a9", "encb/%63af%C3%A9", `encb/${encodeURIComponent("café")}`]) {
      const h = await head(u(p));
      assert.equal(h.status, 200, `HEAD /${p} answered ${h.status}`);
      assert.equal(h.headers.get("stream-incarnation"), inc, `/${p} is the same stream`);
    }
    // A different code point is a different stream.
    assert.equal((await head(u("encb/caf%C3%A8"))).status, 404);
  });

  test("a stream id that decodes to invalid UTF-8 is refused with 400", async () => {
    for (const id of ["%FF", "a%C3", "%C0%AF", "%ED%A0%80"]) {
      assertError(await put(u(`encb/${id}`), { body: "x" }), 400, ["INVALID_STREAM_ID", "INVALID_REQUEST"], { what: `PUT /encb/${id}` });
    }
  });

  test("an undecodable percent-escape in the path is refused with 400", async () => {
    for (const id of ["a%zz", "a%4", "%"]) {
      const r = await raw(server.port, `PUT /encb/${id} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 1\r\nConnection: close`, { body: "x" });
      assertError(rawAsResponse(r), 400, ["INVALID_REQUEST", "INVALID_STREAM_ID"], { what: `PUT /encb/${id}` });
    }
  });

  test("a percent-encoded bucket id is decoded before validation", async () => {
    // %61 is "a": /%61ncb/s is /ancb/s.
    const r = await put(u("%61ncb/s"), { body: "b" });
    assert.equal(r.status, 201, `answered ${r.status} ${r.text}`);
    assert.equal((await get(u("ancb/s?offset=-1"))).text, "b");
  });

  test("offset values are URL-decoded in the query", async () => {
    const url = u("encb/offs");
    const c = await put(url, { body: "abc" });
    const mid = c.headers.get("stream-next-offset");
    assert.equal((await post(url, "def")).status, 204);
    const encoded = [...mid].map((ch) => "%" + ch.charCodeAt(0).toString(16).padStart(2, "0")).join("");
    for (const off of [mid, encodeURIComponent(mid), encoded]) {
      const g = await get(`${url}?offset=${off}`);
      assert.equal(g.status, 200, `offset=${off} answered ${g.status} ${g.text}`);
      assert.equal(g.text, "def", `offset=${off}`);
    }
  });
});
