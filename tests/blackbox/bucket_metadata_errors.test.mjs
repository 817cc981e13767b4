// Bucket surface: server metadata, error bodies and Stream-Seq conflicts.
// Covers extensions.txt §10 Server Metadata (Ursula-Protocol, Ursula-Cluster-Id
// on HEAD answers and 404s, its stability and --cluster-id,
// Ursula-Max-Request-Bytes on successful HEAD, the 32 MiB request limit and
// 413 decided from Content-Length), §11 Error Bodies (not §11.1: the body
// shape and codes, HEAD errors without a body, no echo of the request body)
// and §5.8 Stream-Seq Conflicts (Stream-Last-Seq, STREAM_SEQ_CONFLICT vs
// CONTENT_TYPE_MISMATCH).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { BIN, Server, freePort, tempDir } from "./lib/server.mjs";
import {
  MAX_REQUEST_BYTES, assertError, assertToken, del, get, head, mediaType, otherToken, post, put, raw,
  rawAsResponse, readPages, req, sleep,
} from "./lib/bucket.mjs";

const server = new Server();
before(() => server.start());
after(() => server.stop());

const CLUSTER_ID_RE = /^[A-Za-z0-9._-]{1,64}$/;
let n = 0;
const fresh = (b = "metab") => `${server.url}/${b}/s${++n}`;
async function create(url, body = "abc", type = "text/plain", headers = {}) {
  const r = await put(url, { type, body, headers });
  assert.equal(r.status, 201, `create answered ${r.status} ${r.text}`);
  return r;
}
const tail = async (url) => (await head(url)).headers.get("stream-next-offset");

function assertIdentity(r, what) {
  assert.equal(r.headers.get("ursula-protocol"), "2", `Ursula-Protocol on ${what} (${r.status})`);
  const id = r.headers.get("ursula-cluster-id");
  assert.ok(id, `Ursula-Cluster-Id on ${what} (${r.status})`);
  assert.match(id, CLUSTER_ID_RE, `Ursula-Cluster-Id on ${what}`);
  return id;
}

describe("§10 Ursula-Protocol and Ursula-Cluster-Id", () => {
  test("every HEAD answer and every 404 carries Ursula-Protocol: 2 and the one cluster id", async () => {
    const url = fresh();
    const c = await create(url);
    const t = c.headers.get("stream-incarnation");
    const s = server.url;
    const answers = [
      ["HEAD 200", await head(url), 200],
      ["HEAD missing stream", await head(`${s}/metab/nope`), 404],
      ["HEAD never-used bucket", await head(`${s}/neverusedb/nope`), 404],
      ["HEAD three segments", await head(`${url}/x`), 404],
      ["HEAD invalid bucket", await head(`${s}/BAD/x`), 400],
      ["HEAD invalid stream id", await head(`${s}/metab/%24x`), 400],
      ["HEAD 412", await head(url, { "stream-incarnation": otherToken(t) }), 412],
      ["HEAD malformed token", await head(url, { "stream-incarnation": "x" }), 400],
      ["HEAD /", await head(`${s}/`), null],
      ["HEAD /{bucket}", await head(`${s}/metab`), null],
      ["GET missing stream", await get(`${s}/metab/nope?offset=-1`), 404],
      ["GET never-used bucket", await get(`${s}/neverusedb/nope?offset=-1`), 404],
      ["GET three segments", await get(`${url}/x`), 404],
      ["POST missing stream", await post(`${s}/metab/nope`, "x"), 404],
      ["DELETE missing stream", await del(`${s}/metab/nope`), 404],
      ["PUT three segments", await put(`${url}/x/y`, { body: "x" }), 404],
      ["long-poll missing stream", await get(`${s}/metab/nope?offset=-1&live=long-poll&timeout_ms=50`), 404],
      ["SSE missing stream", await get(`${s}/metab/nope?offset=-1&live=sse`), 404],
    ];
    const ids = new Set();
    for (const [what, r, status] of answers) {
      if (status !== null) assert.equal(r.status, status, `${what} answered ${r.status}`);
      ids.add(assertIdentity(r, what));
    }
    assert.equal(ids.size, 1, `one cluster id on every answer: ${[...ids]}`);
  });

  test("the generated cluster id is stable across restarts", async () => {
    const url = fresh();
    await create(url);
    const p = url.slice(server.url.length);
    const id = assertIdentity(await head(url), "HEAD");
    for (const signal of ["SIGTERM", "SIGKILL"]) {
      await server.restart(signal);
      assert.equal(assertIdentity(await head(`${server.url}${p}`), `HEAD after ${signal}`), id);
      assert.equal(assertIdentity(await head(`${server.url}/metab/none`), `404 after ${signal}`), id);
    }
  });

  test("two deployments do not share a generated id", async () => {
    const other = new Server();
    await other.start();
    try {
      const a = assertIdentity(await head(`${server.url}/metab/none`), "this server");
      const b = assertIdentity(await head(`${other.url}/metab/none`), "another server");
      assert.notEqual(a, b);
    } finally {
      await other.stop();
    }
  });

  test("--cluster-id sets the id, which stays across a restart", async () => {
    for (const id of ["My.Cluster_01-x", "a", "Z".repeat(64)]) {
      const s = new Server({ args: ["--cluster-id", id] });
      await s.start();
      try {
        assert.equal((await put(`${s.url}/cidb/s`, { body: "x" })).status, 201);
        assert.equal((await head(`${s.url}/cidb/s`)).headers.get("ursula-cluster-id"), id);
        assert.equal((await head(`${s.url}/cidb/none`)).headers.get("ursula-cluster-id"), id);
        await s.restart();
        assert.equal((await head(`${s.url}/cidb/s`)).headers.get("ursula-cluster-id"), id);
      } finally {
        await s.stop();
      }
    }
  });

  test("an invalid --cluster-id is never sent: the server refuses it or sends a valid id", async () => {
    for (const id of ["bad id", "a".repeat(65), "é", "a/b"]) {
      const port = await freePort();
      const proc = spawn(BIN, ["serve", "--listen", `127.0.0.1:${port}`, "--data-dir", tempDir(), "--cluster-id", id], { stdio: "ignore" });
      const exited = new Promise((r) => proc.on("exit", (code) => r({ code })));
      try {
        let answered = null;
        for (let i = 0; i < 50 && answered === null; i++) {
          const e = await Promise.race([exited, sleep(100).then(() => null)]);
          if (e) break;
          try {
            answered = await fetch(`http://127.0.0.1:${port}/cidb/none`, { method: "HEAD", signal: AbortSignal.timeout(1000) });
          } catch { /* not up yet */ }
        }
        if (answered) {
          const sent = answered.headers.get("ursula-cluster-id");
          assert.match(sent ?? "", CLUSTER_ID_RE, `started with --cluster-id ${JSON.stringify(id)}, sends ${JSON.stringify(sent)}`);
        } else {
          const { code } = await Promise.race([exited, sleep(5000).then(() => ({ code: "still running" }))]);
          assert.notEqual(code, 0, `--cluster-id ${JSON.stringify(id)}: the server neither answered nor failed`);
        }
      } finally {
        proc.kill("SIGKILL");
        await exited;
      }
    }
  });
});

describe("§10 request limit", () => {
  test("every successful HEAD carries Ursula-Max-Request-Bytes: 33554432", async () => {
    const urls = [fresh()];
    await create(urls[0]);
    const j = fresh();
    await create(j, '{"a":1}', "application/json");
    urls.push(j);
    const e = fresh();
    await create(e, "");
    urls.push(e);
    const c = fresh();
    await create(c, "x", "text/plain", { "stream-closed": "true" });
    urls.push(c);
    for (const url of urls) {
      const h = await head(url);
      assert.equal(h.status, 200);
      assert.equal(h.headers.get("ursula-max-request-bytes"), String(MAX_REQUEST_BYTES), url);
      assertIdentity(h, "HEAD 200");
    }
  });

  async function tooLarge(method, path, extra = "") {
    const t0 = performance.now();
    const r = await raw(server.port, `${method} ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: ${MAX_REQUEST_BYTES + 1}${extra}`, { timeoutMs: 5000 });
    const res = rawAsResponse(r);
    assertError(res, 413, "REQUEST_TOO_LARGE", { what: `${method} ${path} with Content-Length ${MAX_REQUEST_BYTES + 1}` });
    assert.equal(r.header("ursula-max-request-bytes"), String(MAX_REQUEST_BYTES));
    assert.ok(performance.now() - t0 < 5000);
    return r;
  }

  test("a body over 32 MiB is refused with 413 from its Content-Length, before the body is sent", async () => {
    const url = fresh();
    await create(url);
    const p = url.slice(server.url.length);
    const before = await tail(url);
    await tooLarge("POST", p);
    assert.equal(await tail(url), before, "nothing was appended");
    assert.equal((await get(`${url}?offset=-1`)).text, "abc");
  });

  test("a creating PUT over 32 MiB is refused with 413 and creates nothing", async () => {
    const url = fresh();
    await tooLarge("PUT", url.slice(server.url.length));
    assert.equal((await head(url)).status, 404);
  });

  test("the 413 applies on every route: PUT /{bucket}, a JSON stream, Expect: 100-continue", async () => {
    await tooLarge("PUT", "/metab");
    const j = fresh();
    await create(j, '{"a":1}', "application/json");
    await tooLarge("POST", j.slice(server.url.length));
    await tooLarge("POST", j.slice(server.url.length), "\r\nExpect: 100-continue");
  });

  test("a body of exactly 32 MiB is accepted by an append and by a create", async () => {
    const big = Buffer.alloc(MAX_REQUEST_BYTES, 0x61);
    big[0] = 0x62;
    big[big.length - 1] = 0x63;
    const url = fresh();
    await create(url, "", "application/octet-stream");
    const r = await post(url, big, { type: "application/octet-stream" });
    assert.ok(r.status === 204 || r.status === 200, `a 32 MiB append answered ${r.status} ${r.text}`);
    const pages = await readPages(url);
    const got = Buffer.concat(pages.map((p) => p.body));
    assert.ok(got.equals(big), `read back ${got.length} bytes`);
    const url2 = fresh();
    const c = await put(url2, { type: "application/octet-stream", body: big });
    assert.equal(c.status, 201, `a 32 MiB create answered ${c.status} ${c.text}`);
  });
});

describe("§11 error bodies", () => {
  test("every 4xx carries Content-Type: application/json and {error:{code,message}} with its code", async () => {
    const url = fresh();
    const c = await create(url);
    const t = c.headers.get("stream-incarnation");
    const closed = fresh();
    await create(closed, "x", "text/plain", { "stream-closed": "true" });
    const seq = fresh();
    await create(seq);
    assert.equal((await post(seq, "1", { headers: { "stream-seq": "b" } })).status, 204);
    const j = fresh();
    await create(j, '{"a":1}', "application/json");
    const s = server.url;
    const cases = [
      ["PUT /{bad bucket}", await put(`${s}/BAD!`, { type: null }), 400, "INVALID_BUCKET_ID"],
      ["PUT invalid bucket on a stream route", await put(`${s}/ab/s`, { body: "x" }), 400, "INVALID_BUCKET_ID"],
      ["PUT invalid stream id", await put(`${s}/metab/$x`, { body: "x" }), 400, "INVALID_STREAM_ID"],
      ["GET invalid stream id", await get(`${s}/metab/streams?offset=-1`), 400, "INVALID_STREAM_ID"],
      ["GET bad consistency", await get(`${url}?offset=-1&consistency=eventual`), 400, "INVALID_QUERY"],
      ["GET leader + live", await get(`${url}?offset=-1&live=sse&consistency=leader`), 400, "INVALID_QUERY"],
      ["GET malformed offset", await get(`${url}?offset=not-an-offset`), 400, "INVALID_OFFSET"],
      ["POST empty body", await post(url, ""), 400, "EMPTY_APPEND"],
      ["POST without Content-Type", await post(url, new Uint8Array([0x61]), { type: null }), 400, "MISSING_CONTENT_TYPE"],
      ["GET malformed Stream-Incarnation", await get(`${url}?offset=-1`, { "stream-incarnation": "nope" }), 400, "INVALID_HEADER"],
      ["GET missing stream", await get(`${s}/metab/none?offset=-1`), 404, "STREAM_NOT_FOUND"],
      ["GET three segments", await get(`${url}/extra`), 404, "NOT_FOUND"],
      ["PATCH a stream", await req(url, { method: "PATCH", body: "x", headers: { "content-type": "text/plain" } }), 405, "METHOD_NOT_ALLOWED"],
      ["POST to a closed stream", await post(closed, "x"), 409, "STREAM_CLOSED"],
      ["POST with another content type", await post(url, "{}", { type: "application/json" }), 409, "CONTENT_TYPE_MISMATCH"],
      ["PUT with another configuration", await put(url, { type: "application/json" }), 409, "STREAM_ALREADY_EXISTS_CONFLICT"],
      ["POST with a stale Stream-Seq", await post(seq, "x", { headers: { "stream-seq": "a" } }), 409, "STREAM_SEQ_CONFLICT"],
      ["GET with another incarnation", await get(`${url}?offset=-1`, { "stream-incarnation": otherToken(t) }), 412, "INCARNATION_MISMATCH"],
      ["POST invalid JSON", await post(j, "{nope", { type: "application/json" }), 400, undefined],
    ];
    for (const [what, r, status, code] of cases) {
      const body = assertError(r, status, code, { what });
      for (const secret of [server.dataDir, `127.0.0.1:${server.port}`]) {
        assert.ok(!body.error.message.includes(secret), `${what}: the message names no internals (${secret})`);
      }
    }
    // The closed-stream 409 keeps its typed headers beside the body.
    const cl = cases.find(([w]) => w === "POST to a closed stream")[1];
    assert.equal(cl.headers.get("stream-closed"), "true");
    assert.ok(cl.headers.get("stream-next-offset"));
  });

  test("a HEAD error carries Content-Type: application/json and no body", async () => {
    const url = fresh();
    const c = await create(url);
    const p = url.slice(server.url.length);
    const t = c.headers.get("stream-incarnation");
    for (const [what, path, extra, status] of [
      ["missing stream", "/metab/none", "", 404],
      ["three segments", `${p}/x`, "", 404],
      ["invalid bucket", "/BAD/x", "", 400],
      ["invalid stream id", "/metab/%24x", "", 400],
      ["incarnation mismatch", p, `\r\nStream-Incarnation: ${otherToken(t)}`, 412],
    ]) {
      const r = await raw(server.port, `HEAD ${path} HTTP/1.1\r\nHost: x${extra}\r\nConnection: close`, { untilClose: true });
      assert.equal(r.status, status, `HEAD ${what}`);
      assert.equal(mediaType(r.header("content-type")), "application/json", `HEAD ${what}: Content-Type`);
      assert.equal(r.body.length, 0, `HEAD ${what}: no body bytes, got ${JSON.stringify(r.text)}`);
    }
  });

  test("a request the HTTP layer cannot parse answers 400, with no body or the error shape", async () => {
    for (const line of ["Bad Header Line", "NoColonAtAll"]) {
      const r = await raw(server.port, `GET /metab/none?offset=-1 HTTP/1.1\r\nHost: x\r\n${line}\r\nConnection: close`, { untilClose: true });
      assert.equal(r.status, 400, `header line ${JSON.stringify(line)} answered ${r.status}`);
      if (r.body.length > 0) assertError(rawAsResponse(r), 400, undefined, { what: `header line ${JSON.stringify(line)}` });
    }
  });

  test("an error message never echoes the request body", async () => {
    const marker = "SECRET-MARKER-7f3a9c";
    const text = fresh();
    await create(text);
    const closed = fresh();
    await create(closed, "x", "text/plain", { "stream-closed": "true" });
    const j = fresh();
    await create(j, '{"a":1}', "application/json");
    const seq = fresh();
    await create(seq);
    assert.equal((await post(seq, "1", { headers: { "stream-seq": "5" } })).status, 204);
    const cases = [
      ["invalid JSON", await post(j, `{"${marker}": }`, { type: "application/json" })],
      ["invalid JSON PUT", await put(fresh(), { type: "application/json", body: `[${marker}]` })],
      ["JSON too deep", await post(j, `${"[".repeat(130)}"${marker}"${"]".repeat(130)}`, { type: "application/json" })],
      ["content type mismatch", await post(text, `{"${marker}":1}`, { type: "application/json" })],
      ["closed stream", await post(closed, marker)],
      ["stale Stream-Seq", await post(seq, marker, { headers: { "stream-seq": "1" } })],
      ["missing stream", await post(`${server.url}/metab/none`, marker)],
      ["three segments", await put(`${text}/x`, { body: marker })],
      ["invalid stream id", await put(`${server.url}/metab/$x`, { body: marker })],
    ];
    for (const [what, r] of cases) {
      assertError(r, r.status, undefined, { what });
      assert.ok(r.status >= 400, `${what} answered ${r.status}`);
      assert.ok(!r.text.includes(marker), `${what}: the body echoes the request: ${r.text}`);
    }
  });
});

describe("§5.8 Stream-Seq conflicts", () => {
  async function seqPost(url, seq, body = "x", type = "text/plain") {
    return post(url, body, { type, headers: seq === null ? {} : { "stream-seq": seq } });
  }

  test("a Stream-Seq not greater than the last answers 409 STREAM_SEQ_CONFLICT with Stream-Last-Seq as sent", async () => {
    const url = fresh();
    await create(url, "");
    assert.equal((await seqPost(url, "0005", "a")).status, 204);
    const before = await tail(url);
    for (const stale of ["0003", "0005", "0004999", "000"]) {
      const r = await seqPost(url, stale, "zz");
      assertError(r, 409, "STREAM_SEQ_CONFLICT", { what: `Stream-Seq ${JSON.stringify(stale)} after 0005` });
      assert.equal(r.headers.get("stream-last-seq"), "0005");
      assert.equal(r.headers.get("stream-closed"), null);
    }
    assert.equal(await tail(url), before, "refused appends applied nothing");
    assert.equal((await seqPost(url, "0010", "b")).status, 204);
    const r = await seqPost(url, "0009");
    assertError(r, 409, "STREAM_SEQ_CONFLICT", { what: "0009 after 0010" });
    assert.equal(r.headers.get("stream-last-seq"), "0010");
    assert.equal((await get(`${url}?offset=-1`)).text, "ab");
  });

  test("comparison is byte-wise and Stream-Last-Seq is the accepted value exactly as sent", async () => {
    const url = fresh();
    await create(url, "");
    assert.equal((await seqPost(url, "abc")).status, 204);
    let r = await seqPost(url, "ABD"); // "A" < "a" byte-wise
    assertError(r, 409, "STREAM_SEQ_CONFLICT", { what: "ABD after abc" });
    assert.equal(r.headers.get("stream-last-seq"), "abc");
    assert.equal((await seqPost(url, "abd")).status, 204);
    assert.equal((await seqPost(url, "b")).status, 204, "b > abd");
    r = await seqPost(url, "aaaaaaaaaa");
    assert.equal(r.headers.get("stream-last-seq"), "b");
    assert.equal((await seqPost(url, "b.Z-9_x~1")).status, 204);
    r = await seqPost(url, "b.Z-9_x~0");
    assertError(r, 409, "STREAM_SEQ_CONFLICT", { what: "b.Z-9_x~0" });
    assert.equal(r.headers.get("stream-last-seq"), "b.Z-9_x~1");
  });

  test("the same applies to a JSON stream", async () => {
    const url = fresh();
    await create(url, "[]", "application/json");
    assert.equal((await seqPost(url, "7", '{"a":1}', "application/json")).status, 204);
    const r = await seqPost(url, "6", '{"a":2}', "application/json");
    assertError(r, 409, "STREAM_SEQ_CONFLICT", { what: "JSON stream" });
    assert.equal(r.headers.get("stream-last-seq"), "7");
    assert.equal((await get(`${url}?offset=-1`)).text, '{"a":1}\n');
  });

  test("a stream that never accepted a Stream-Seq refuses none", async () => {
    const url = fresh();
    await create(url, "");
    assert.equal((await seqPost(url, null, "a")).status, 204, "an append without Stream-Seq");
    const url2 = fresh();
    await create(url2, "");
    assert.equal((await seqPost(url2, "0", "a")).status, 204, "the first Stream-Seq is accepted whatever it is");
  });

  test("a content-type mismatch 409 carries CONTENT_TYPE_MISMATCH and no Stream-Last-Seq", async () => {
    const url = fresh();
    await create(url, "");
    assert.equal((await seqPost(url, "5")).status, 204);
    for (const [what, seq] of [["without Stream-Seq", null], ["with a greater Stream-Seq", "9"]]) {
      const r = await seqPost(url, seq, "{}", "application/json");
      assertError(r, 409, "CONTENT_TYPE_MISMATCH", { what });
      assert.equal(r.headers.get("stream-last-seq"), null, `${what}: no Stream-Last-Seq`);
    }
    // Base protocol §5.2 precedence (SHOULD): the content type before the sequence.
    const r = await seqPost(url, "1", "{}", "application/json");
    assertError(r, 409, "CONTENT_TYPE_MISMATCH", { what: "stale Stream-Seq and another content type" });
    assert.equal(r.headers.get("stream-last-seq"), null);
  });

  test("other 409s carry no Stream-Last-Seq", async () => {
    const url = fresh();
    await create(url, "");
    assert.equal((await seqPost(url, "5")).status, 204);
    const conf = await put(url, { type: "application/json" });
    assertError(conf, 409, "STREAM_ALREADY_EXISTS_CONFLICT", { what: "PUT with another configuration" });
    assert.equal(conf.headers.get("stream-last-seq"), null);
    assert.equal((await post(url, undefined, { type: null, headers: { "stream-closed": "true" } })).status, 204);
    for (const seq of ["9", "1"]) {
      const r = await seqPost(url, seq);
      assertError(r, 409, "STREAM_CLOSED", { what: `append with Stream-Seq ${seq} to a closed stream` });
      assert.equal(r.headers.get("stream-closed"), "true");
      assert.equal(r.headers.get("stream-last-seq"), null, `closed-stream 409 with seq ${seq}: no Stream-Last-Seq`);
    }
  });
});
