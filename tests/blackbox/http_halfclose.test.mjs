// Half-closed connections (issue 13, item 9), on raw sockets. HTTP lets a
// client shut its sending side once its requests are sent: every complete
// request received before the half-close is applied and answered, in order,
// pipelined ones included, and only then does the server close. A request
// cut by the half-close applies nothing: it is answered 400 and the
// connection closes. A parked live read whose client half-closes ends as
// its time limit would end it (a long-poll answers 204 at once, an SSE
// response ends), since until it writes the server cannot tell a half-close
// from a client that went away.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { get, post, put } from "./lib/bucket.mjs";
import { Conn } from "./lib/wire.mjs";

const server = new Server({ args: ["--long-poll-timeout-ms", "20000", "--sse-max-duration-ms", "20000"] });
before(() => server.start());
after(() => server.stop());

let n = 0;
async function fresh() {
  const path = `/v1/stream/half/s${++n}`;
  assert.equal((await put(`${server.url}${path}`)).status, 201);
  return path;
}

function request(method, path, { body = "", headers = {} } = {}) {
  const b = Buffer.from(body);
  const lines = [`${method} ${path} HTTP/1.1`, "Host: 127.0.0.1"];
  if (method === "POST" || method === "PUT") lines.push("Content-Type: text/plain", `Content-Length: ${b.length}`);
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  return Buffer.concat([Buffer.from(lines.join("\r\n") + "\r\n\r\n"), b]);
}

// Sends bytes, half-closes, and waits (bounded) for the server to close.
async function sendAndHalfClose(bytes, ms = 5000) {
  const c = new Conn(server.port);
  c.send(bytes);
  c.halfClose();
  await c.until(() => false, ms);
  c.close();
  return c;
}

const contents = async (path) => (await get(`${server.url}${path}?offset=-1`)).text;

describe("a half-close after complete requests", () => {
  test("a write followed by a half-close is applied and answered, then the server closes", async () => {
    const path = await fresh();
    const c = await sendAndHalfClose(request("POST", path, { body: "one" }));
    assert.ok(c.closed, "the server closed the connection");
    const rs = c.responses();
    assert.deepEqual(rs.map((r) => r.status), [204], c.text);
    assert.equal(rs[0].header("stream-next-offset"), "0000000000000000_0000000000000003");
    assert.equal(await contents(path), "one");
  });

  test("pipelined requests received before the half-close are all applied and answered in order", async () => {
    const path = await fresh();
    const bytes = Buffer.concat([
      request("POST", path, { body: "a" }),
      request("POST", path, { body: "bc" }),
      request("GET", `${path}?offset=-1`),
      request("HEAD", path),
      request("POST", path, { body: "d" }),
    ]);
    const c = await sendAndHalfClose(bytes);
    assert.ok(c.closed, "the server closed the connection");
    const rs = c.responses();
    assert.deepEqual(rs.map((r) => r.status), [204, 204, 200, 200, 204], c.text);
    assert.equal(rs[2].body, "abc");
    assert.equal(rs[4].header("stream-next-offset"), "0000000000000000_0000000000000004");
    assert.equal(await contents(path), "abcd");
  });

  test("pipelined reads larger than the socket buffers are all answered after a half-close", async () => {
    const path = await fresh();
    const body = "x".repeat(1 << 20);
    assert.equal((await post(`${server.url}${path}`, body)).status, 204);
    const c = new Conn(server.port);
    c.send(Buffer.concat([0, 1, 2].map(() => request("GET", `${path}?offset=-1`))));
    c.halfClose();
    c.sock.pause(); // the answers queue up on the server while the client does not read
    await new Promise((r) => setTimeout(r, 300));
    c.sock.resume();
    await c.until(() => false, 10000);
    c.close();
    assert.ok(c.closed, "the server closed the connection");
    const rs = c.responses();
    assert.deepEqual(rs.map((r) => r.status), [200, 200, 200], `${rs.length} answers, ${c.data.length} bytes`);
    for (const r of rs) assert.equal(r.body.length, 1 << 20);
  });

  test("a request with Connection: close and a half-close is answered once, then the server closes", async () => {
    const path = await fresh();
    const bytes = Buffer.concat([
      request("POST", path, { body: "q", headers: { Connection: "close" } }),
      request("POST", path, { body: "never" }),
    ]);
    const c = await sendAndHalfClose(bytes);
    assert.ok(c.closed);
    assert.deepEqual(c.responses().map((r) => r.status), [204], c.text);
    assert.equal(await contents(path), "q");
  });
});

describe("a half-close in the middle of a request", () => {
  test("a body cut short applies nothing: 400, the connection closes, earlier requests still count", async () => {
    const path = await fresh();
    const whole = request("POST", path, { body: "kept" });
    const cut = request("POST", path, { body: "0123456789" }).subarray(0, -5);
    const c = await sendAndHalfClose(Buffer.concat([whole, cut]));
    assert.ok(c.closed, "the server closed the connection");
    const rs = c.responses();
    assert.deepEqual(rs.map((r) => r.status), [204, 400], c.text);
    assert.equal(rs[1].header("connection"), "close");
    assert.equal(await contents(path), "kept");
  });

  test("a head cut short applies nothing: 400 and the connection closes", async () => {
    const path = await fresh();
    const c = await sendAndHalfClose(Buffer.from(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le`));
    assert.ok(c.closed, "the server closed the connection");
    assert.deepEqual(c.responses().map((r) => r.status), [400], c.text);
    assert.equal(await contents(path), "");
  });

  test("a half-close with nothing sent closes without an answer", async () => {
    const c = await sendAndHalfClose(Buffer.alloc(0));
    assert.ok(c.closed, "the server closed the connection");
    assert.equal(c.data.length, 0, c.text);
  });
});

describe("live reads whose client half-closes", () => {
  test("a parked long-poll answers at once, as at its time limit, then the server closes", async () => {
    const path = await fresh();
    const t0 = Date.now();
    const c = await sendAndHalfClose(request("GET", `${path}?offset=now&live=long-poll`));
    assert.ok(c.closed, "the server closed the connection");
    assert.ok(Date.now() - t0 < 5000, "well before the 20 s long-poll timeout");
    const rs = c.responses();
    assert.deepEqual(rs.map((r) => r.status), [204], c.text);
    assert.equal(rs[0].header("stream-next-offset"), "0000000000000000_0000000000000000");
    assert.equal(rs[0].header("stream-up-to-date"), "true");
  });

  test("a long-poll with data waiting is answered with it", async () => {
    const path = await fresh();
    assert.equal((await post(`${server.url}${path}`, "ready")).status, 204);
    const c = await sendAndHalfClose(request("GET", `${path}?offset=-1&live=long-poll`));
    assert.ok(c.closed);
    const rs = c.responses();
    assert.deepEqual(rs.map((r) => r.status), [200], c.text);
    assert.equal(rs[0].body, "ready");
  });

  test("an SSE read ends with its final event and a complete chunked body, then the server closes", async () => {
    const path = await fresh();
    assert.equal((await post(`${server.url}${path}`, "ev")).status, 204);
    const c = await sendAndHalfClose(request("GET", `${path}?offset=-1&live=sse`));
    assert.ok(c.closed, "the server closed the connection");
    const rs = c.responses();
    assert.deepEqual(rs.map((r) => r.status), [200], c.text);
    assert.match(rs[0].body, /event: data\ndata:ev\n\n/);
    assert.match(rs[0].body, /event: control\n/);
  });
});
