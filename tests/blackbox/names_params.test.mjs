// Stream names, protocol headers and query parameters: one rule each
// (docs/HTTP.md "Names, headers and query parameters"), and messages that help
// with the commonest client mistakes (extensions.txt §11: a message names
// only what the request named).
//   - A /v1/stream/ name is its percent-decoded path: 1 to 1024 bytes of
//     UTF-8 without NUL, segments separated by single slashes, none empty,
//     "." or "..". Anything else answers 400 INVALID_STREAM_ID and changes
//     nothing.
//   - A protocol header or query parameter sent twice answers 400
//     INVALID_HEADER / INVALID_QUERY naming it; an empty value is malformed;
//     integers are canonical decimal (no sign, no leading zero). The values
//     the protocols say to ignore stay ignored (Stream-Closed other than
//     true; timeout_ms and max_bytes that do not parse).
//   - The read parameters of ext §9 (timeout_ms, max_bytes, consistency)
//     work on both surfaces.
//   - 409 CONTENT_TYPE_MISMATCH names the stream's type and the request's;
//     404 STREAM_NOT_FOUND names the stream's path.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { assertError, get, head, openSse, post, put, raw, rawAsResponse, req, sleep } from "./lib/bucket.mjs";

const server = new Server();
before(() => server.start());
after(() => server.stop());

let n = 0;
const v1 = (name) => `${server.url}/v1/stream/${name}`;

// A raw request (fetch would merge repeated headers and resolve dot
// segments); the answer shaped for assertError.
async function rawReq(method, target, headers = [], body) {
  const lines = [`${method} ${target} HTTP/1.1`, "Host: x", "Connection: close", ...headers];
  if (body !== undefined) lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  const r = await raw(server.port, lines.join("\r\n"), { body, untilClose: method === "HEAD" });
  return rawAsResponse(r);
}

async function tailOf(url) {
  const r = await head(url);
  assert.equal(r.status, 200, `HEAD ${url} answered ${r.status}`);
  return r.headers.get("stream-next-offset");
}

describe("v1 stream names", () => {
  const bad = [
    ["invalid UTF-8", "names/bad%FFutf8"],
    ["an overlong UTF-8 encoding", "names/%C0%AFx"],
    ["a NUL byte", "names/nul%00x"],
    ["a .. segment", "names/a/../b"],
    ["an encoded .. segment", "names/a/%2E%2E/b"],
    ["a .. name", ".."],
    ["a . segment", "names/./b"],
    ["an empty segment", "names//b"],
    ["an encoded empty segment", "names/a%2F%2Fb"],
    ["a leading slash", "/names/b"],
    ["a trailing slash", "names/b/"],
    ["an encoded trailing slash", "names/b%2F"],
    ["1025 bytes", "n".repeat(1025)],
    ["1025 bytes once decoded from fewer", "%C3%A9".repeat(512) + "x"],
  ];
  for (const [what, name] of bad) {
    test(`${what}: 400 INVALID_STREAM_ID for every method, and nothing is created`, async () => {
      const t = `/v1/stream/${name}`;
      assertError(await rawReq("PUT", t, ["Content-Type: text/plain"], "x"), 400, "INVALID_STREAM_ID", { what: `PUT ${t}` });
      assertError(await rawReq("POST", t, ["Content-Type: text/plain"], "x"), 400, "INVALID_STREAM_ID", { what: `POST ${t}` });
      assertError(await rawReq("GET", `${t}?offset=-1`), 400, "INVALID_STREAM_ID", { what: `GET ${t}` });
      assertError(await rawReq("DELETE", t), 400, "INVALID_STREAM_ID", { what: `DELETE ${t}` });
      assertError(await rawReq("HEAD", t), 400, "INVALID_STREAM_ID", { isHead: true, what: `HEAD ${t}` });
    });
  }

  test("names the rule accepts: segments, UTF-8, 1024 bytes, an encoded slash naming the same stream", async () => {
    for (const name of ["names/ok", "names/a/b/c", "names/caf%C3%A9", "names/sp%20ace", "names/.hidden", "names/a..b", "x".repeat(1024)]) {
      const r = await put(v1(name), { body: "v" });
      assert.equal(r.status, 201, `PUT ${name} answered ${r.status} ${r.text}`);
    }
    assert.equal((await get(`${v1("names%2Fa%2Fb%2Fc")}?offset=-1`)).status, 200, "%2F decodes to a slash");
  });

  test("a bucket stream is the same stream under /v1/stream/", async () => {
    assert.equal((await put(`${server.url}/nameb/s1`, { body: "same" })).status, 201);
    assert.equal((await get(`${v1("nameb/s1")}?offset=-1`)).text, "same");
  });
});

describe("protocol headers: once, not empty, canonical integers", () => {
  async function fresh(body = "ab") {
    const url = v1(`hdr/s${++n}`);
    assert.equal((await put(url, { body })).status, 201);
    return { url, path: url.slice(server.url.length) };
  }
  const P = ["Producer-Id: p", "Producer-Epoch: 0", "Producer-Seq: 0"];

  test("a protocol header sent twice answers 400 INVALID_HEADER naming it, and applies nothing", async () => {
    const s = await fresh();
    const tail = await tailOf(s.url);
    const cases = [
      ["Producer-Id", ["Content-Type: text/plain", ...P, "Producer-Id: p"]],
      ["Producer-Id", ["Content-Type: text/plain", ...P, "Producer-Id: q"]],
      ["Producer-Epoch", ["Content-Type: text/plain", ...P, "Producer-Epoch: 0"]],
      ["Producer-Seq", ["Content-Type: text/plain", ...P, "Producer-Seq: 0"]],
      ["Stream-Seq", ["Content-Type: text/plain", "Stream-Seq: a", "Stream-Seq: b"]],
      ["Stream-Closed", ["Content-Type: text/plain", "Stream-Closed: true", "Stream-Closed: true"]],
      ["Content-Type", ["Content-Type: text/plain", "Content-Type: text/plain"]],
    ];
    for (const [name, headers] of cases) {
      const body = assertError(await rawReq("POST", s.path, headers, "zz"), 400, "INVALID_HEADER", { what: `POST with ${name} twice` });
      assert.ok(body.error.message.includes(name), `the message names ${name}: ${body.error.message}`);
    }
    assert.equal(await tailOf(s.url), tail, "nothing applied");
    // On a create too.
    for (const [name, headers] of [
      ["Stream-TTL", ["Content-Type: text/plain", "Stream-TTL: 60", "Stream-TTL: 60"]],
      ["Content-Type", ["Content-Type: text/plain", "Content-Type: application/json"]],
      ["Stream-Forked-From", [`Stream-Forked-From: ${s.path}`, `Stream-Forked-From: ${s.path}`]],
    ]) {
      const t = `/v1/stream/hdr/new${++n}`;
      const body = assertError(await rawReq("PUT", t, headers), 400, "INVALID_HEADER", { what: `PUT with ${name} twice` });
      assert.ok(body.error.message.includes(name), `the message names ${name}: ${body.error.message}`);
      assert.equal((await head(`${server.url}${t}`)).status, 404, "nothing created");
    }
  });

  test("integers are canonical decimal in every header: no leading zero, no sign", async () => {
    const s = await fresh();
    const tail = await tailOf(s.url);
    for (const [h, code] of [
      [["Producer-Id: p", "Producer-Epoch: 01", "Producer-Seq: 0"], "INVALID_PRODUCER"],
      [["Producer-Id: p", "Producer-Epoch: 0", "Producer-Seq: 00"], "INVALID_PRODUCER"],
      [["Producer-Id: p", "Producer-Epoch: +1", "Producer-Seq: 0"], "INVALID_PRODUCER"],
    ]) {
      assertError(await rawReq("POST", s.path, ["Content-Type: text/plain", ...h], "zz"), 400, code, { what: h.join(", ") });
    }
    assert.equal(await tailOf(s.url), tail, "nothing applied");
    for (const h of ["Stream-TTL: 01", "Stream-TTL: -1"]) {
      assertError(await rawReq("PUT", `/v1/stream/hdr/new${++n}`, ["Content-Type: text/plain", h]), 400, "INVALID_HEADER", { what: h });
    }
    const t = `/v1/stream/hdr/new${++n}`;
    assertError(await rawReq("PUT", t, [`Stream-Forked-From: ${s.path}`, `Stream-Fork-Offset: ${tail}`, "Stream-Fork-Sub-Offset: 01"]), 400, "INVALID_HEADER", { what: "Stream-Fork-Sub-Offset: 01" });
    assert.equal((await head(`${server.url}${t}`)).status, 404, "nothing created");
  });

  test("an empty value is malformed: Stream-Seq, Stream-Forked-From, Content-Type", async () => {
    const s = await fresh();
    const tail = await tailOf(s.url);
    const r = assertError(await rawReq("POST", s.path, ["Content-Type: text/plain", "Stream-Seq:"], "zz"), 400, "INVALID_HEADER", { what: "empty Stream-Seq" });
    assert.ok(r.error.message.includes("Stream-Seq"), r.error.message);
    assertError(await rawReq("POST", s.path, ["Content-Type:"], "zz"), 400, "INVALID_HEADER", { what: "empty Content-Type" });
    assert.equal(await tailOf(s.url), tail, "nothing applied");
    // The empty Stream-Seq used to be stored and compared as a value.
    assert.equal((await post(s.url, "cd", { headers: { "stream-seq": "a" } })).status, 204);
    const t = `/v1/stream/hdr/new${++n}`;
    assertError(await rawReq("PUT", t, ["Stream-Forked-From:"]), 400, "INVALID_HEADER", { what: "empty Stream-Forked-From" });
    assertError(await rawReq("PUT", t, ["Content-Type:"]), 400, "INVALID_HEADER", { what: "empty Content-Type on a create" });
    assert.equal((await head(`${server.url}${t}`)).status, 404, "nothing created");
  });

  test("what the base protocol says to ignore stays ignored: Stream-Closed other than true, Content-Type of an empty POST", async () => {
    const s = await fresh();
    for (const v of ["false", "yes", ""]) {
      const r = await rawReq("POST", s.path, ["Content-Type: text/plain", `Stream-Closed: ${v}`], "x");
      assert.equal(r.status, 204, `Stream-Closed: ${JSON.stringify(v)} answered ${r.status} ${r.text}`);
      assert.equal(r.headers.get("stream-closed"), null, "the stream stays open");
    }
    const close = await rawReq("POST", s.path, ["Content-Type: a/b", "Content-Type: c/d", "Stream-Closed: true"], "");
    assert.equal(close.status, 204, `a close-only POST ignores its Content-Type: ${close.status} ${close.text}`);
  });
});

describe("query parameters: once, not empty", () => {
  async function fresh() {
    const url = v1(`qry/s${++n}`);
    assert.equal((await put(url, { body: "ab" })).status, 201);
    return url.slice(server.url.length);
  }

  test("a parameter given twice answers 400 INVALID_QUERY naming it, whatever the values", async () => {
    const p = await fresh();
    const b = `/qryb/s${++n}`;
    assert.equal((await put(`${server.url}${b}`, { body: "ab" })).status, 201);
    for (const [target, name] of [
      [`${p}?offset=-1&offset=-1`, "offset"],
      [`${p}?offset=-1&o%66fset=-1`, "offset"],
      [`${p}?offset=-1&live=long-poll&live=long-poll`, "live"],
      [`${p}?offset=-1&live=long-poll&live=sse`, "live"],
      [`${p}?offset=-1&live=long-poll&cursor=1&cursor=2`, "cursor"],
      [`${b}?offset=-1&timeout_ms=5&timeout_ms=5`, "timeout_ms"],
      [`${b}?offset=-1&max_bytes=1&max_bytes=2`, "max_bytes"],
      [`${b}?offset=-1&consistency=local&consistency=local`, "consistency"],
      // ext §9 applies to every stream: the v1 surface refuses them doubled too
      [`${p}?offset=-1&timeout_ms=5&timeout_ms=5`, "timeout_ms"],
      [`${p}?offset=-1&max_bytes=1&max_bytes=2`, "max_bytes"],
      [`${p}?offset=-1&consistency=local&consistency=local`, "consistency"],
    ]) {
      const body = assertError(await rawReq("GET", target), 400, "INVALID_QUERY", { what: target });
      assert.ok(body.error.message.includes(name), `the message names ${name}: ${body.error.message}`);
    }
  });

  test("an empty offset or live is malformed; unknown parameters and unparseable timeout_ms/max_bytes are ignored", async () => {
    const p = await fresh();
    assertError(await rawReq("GET", `${p}?offset=`), 400, "INVALID_OFFSET");
    assertError(await rawReq("GET", `${p}?offset`), 400, "INVALID_OFFSET");
    assertError(await rawReq("GET", `${p}?offset=-1&live=`), 400, "INVALID_QUERY");
    assert.equal((await get(`${server.url}${p}?offset=-1&foo=1&foo=2`)).text, "ab");
    const b = `${server.url}/qryb/s${++n}`;
    assert.equal((await put(b, { body: "ab" })).status, 201);
    assert.equal((await get(`${b}?offset=-1&max_bytes=&timeout_ms=x`)).text, "ab");
  });
});

describe("the read parameters of ext §9 on both surfaces", () => {
  for (const surface of ["v1", "bucket"]) {
    const url = () => (surface === "v1" ? v1(`rp/s${++n}`) : `${server.url}/rparams/s${++n}`);

    test(`${surface}: max_bytes bounds a read, which then is not up to date`, async () => {
      const u = url();
      assert.equal((await put(u, { body: "abcdef" })).status, 201);
      const r = await get(`${u}?offset=-1&max_bytes=4`);
      assert.equal(r.text, "abcd");
      assert.equal(r.headers.get("stream-up-to-date"), null);
      const rest = await get(`${u}?offset=${r.headers.get("stream-next-offset")}`);
      assert.equal(rest.text, "ef");
      assert.equal(rest.headers.get("stream-up-to-date"), "true");
    });

    test(`${surface}: timeout_ms bounds a long-poll's wait`, async () => {
      const u = url();
      assert.equal((await put(u, { body: "x" })).status, 201);
      const tail = await tailOf(u);
      const started = Date.now();
      const r = await get(`${u}?offset=${tail}&live=long-poll&timeout_ms=50`);
      assert.equal(r.status, 204);
      // the server's own wait (the tests' default) is far longer than this bound
      assert.ok(Date.now() - started < 20000, "the long-poll ended at its timeout_ms");
    });

    test(`${surface}: consistency is local or leader, and leader is not live`, async () => {
      const u = url();
      assert.equal((await put(u, { body: "x" })).status, 201);
      const path = u.slice(server.url.length);
      assert.equal((await get(`${u}?offset=-1&consistency=leader`)).text, "x");
      assert.equal((await get(`${u}?offset=-1&consistency=local`)).text, "x");
      assertError(await rawReq("GET", `${path}?offset=-1&consistency=strong`), 400, "INVALID_QUERY");
      assertError(await rawReq("GET", `${path}?offset=-1&live=sse&consistency=leader`), 400, "INVALID_QUERY");
    });
  }
});

describe("messages that name what the request named", () => {
  test("409 CONTENT_TYPE_MISMATCH names the stream's type and the request's", async () => {
    const url = v1(`msg/s${++n}`);
    assert.equal((await put(url, { type: "application/json", body: "[1]" })).status, 201);
    const r = assertError(await post(url, "hello", { type: "text/plain; charset=utf-8" }), 409, "CONTENT_TYPE_MISMATCH");
    assert.ok(r.error.message.includes("application/json"), r.error.message);
    assert.ok(r.error.message.includes("text/plain; charset=utf-8"), r.error.message);
    // A fork whose type differs from its source's.
    const f = assertError(
      await put(v1(`msg/f${++n}`), { type: "text/plain", headers: { "stream-forked-from": new URL(url).pathname } }),
      409, "CONTENT_TYPE_MISMATCH");
    assert.ok(f.error.message.includes("application/json") && f.error.message.includes("text/plain"), f.error.message);
  });

  test("404 STREAM_NOT_FOUND names the path on both surfaces, for reads, writes and live reads", async () => {
    for (const [url, path] of [
      [v1("msg/missing"), "/v1/stream/msg/missing"],
      [v1("msg/caf%C3%A9"), "/v1/stream/msg/café"],
      [v1('msg/q"uote'), '/v1/stream/msg/q"uote'],
    ]) {
      for (const r of [await get(`${url}?offset=-1`), await post(url, "x"), await req(url, { method: "DELETE" })]) {
        const body = assertError(r, 404, "STREAM_NOT_FOUND");
        assert.ok(body.error.message.includes(path), `${body.error.message} names ${path}`);
      }
    }
    assert.equal((await put(`${server.url}/msgb/exists`, { body: "x" })).status, 201);
    const b = assertError(await get(`${server.url}/msgb/missing?offset=-1`), 404, "STREAM_NOT_FOUND");
    assert.ok(b.error.message.includes("/msgb/missing"), b.error.message);
    // A missing fork source is named as Stream-Forked-From named it.
    const fk = assertError(
      await put(v1(`msg/fork${++n}`), { headers: { "stream-forked-from": "/v1/stream/msg/nosuch" } }),
      404, "STREAM_NOT_FOUND");
    assert.ok(fk.error.message.includes("/v1/stream/msg/nosuch"), fk.error.message);
    // A control byte in the name is shown percent-encoded, never raw.
    const c = assertError(await get(`${v1("msg/a%0Ab")}?offset=-1`), 404, "STREAM_NOT_FOUND");
    assert.ok(c.error.message.includes("/v1/stream/msg/a%0Ab"), c.error.message);
    // A live read whose stream is deleted under it: the long-poll's 404 and
    // the SSE error event name it too.
    const live = `${server.url}/msgb/live${++n}`;
    assert.equal((await put(live, { body: "x" })).status, 201);
    const tail = (await head(live)).headers.get("stream-next-offset");
    const lp = get(`${live}?offset=${tail}&live=long-poll&timeout_ms=20000`);
    const sse = await openSse(`${live}?offset=-1&live=sse`);
    try {
      assert.ok(await sse.waitFor((ev) => ev.some((e) => e.type === "control")));
      await sleep(200);
      assert.equal((await req(live, { method: "DELETE" })).status, 204);
      const l = assertError(await lp, 404, "STREAM_NOT_FOUND");
      assert.ok(l.error.message.includes(new URL(live).pathname), l.error.message);
      assert.ok(await sse.waitEnd(5000));
      const last = sse.events.at(-1);
      assert.equal(last.type, "error");
      assert.ok(JSON.parse(last.data).error.message.includes(new URL(live).pathname), last.data);
    } finally {
      sse.close();
    }
  });
});
