// A request that does not arrive within --request-timeout-ms (extensions
// §11, §11.1): the server answers 408 with the typed error body
// BODY_TOO_SLOW and its identity headers, and nothing of the request
// applies. BODY_TOO_SLOW is a code that proves the refusal (§11.1): no
// route saw the write, so the client may conclude it did not apply (why
// this code on a bare node: docs/PROTOCOL_SUPPORT.md). Over HTTP/1.1 the
// connection closes, saying so once; over HTTP/2 the stream ends and the
// connection stays. Before, the 408 had no body (a client had to treat it
// as unknown) and its head said "Connection: close" twice.
import assert from "node:assert/strict";
import http2 from "node:http2";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { get, put } from "./lib/bucket.mjs";
import { Conn } from "./lib/wire.mjs";

const TIMEOUT_MS = 500;
const server = new Server({ args: ["--request-timeout-ms", String(TIMEOUT_MS), "--min-body-rate", "0"] });
before(() => server.start());
after(() => server.stop());

let n = 0;
async function fresh() {
  const path = `/v1/stream/slow/s${++n}`;
  assert.equal((await put(`${server.url}${path}`)).status, 201);
  return path;
}

const contents = async (path) => (await get(`${server.url}${path}?offset=-1`)).text;

function assertTypedTimeout(status, headers, body, what) {
  assert.equal(status, 408, `${what}: status`);
  assert.equal(headers["content-type"], "application/json", `${what}: Content-Type`);
  assert.equal(headers["ursula-protocol"], "2", `${what}: Ursula-Protocol`);
  assert.ok(headers["ursula-cluster-id"], `${what}: Ursula-Cluster-Id`);
  const parsed = JSON.parse(body);
  assert.equal(parsed.error.code, "BODY_TOO_SLOW", `${what}: ${body}`);
  assert.equal(typeof parsed.error.message, "string", `${what}: ${body}`);
}

describe("HTTP/1.1", () => {
  // One head per response: the raw lines, for counting repeated fields.
  async function slowRequest(bytes) {
    const c = new Conn(server.port);
    c.send(bytes);
    await c.until(() => c.closed, TIMEOUT_MS + 5000);
    c.close();
    assert.ok(c.closed, "the server closed the connection");
    const rs = c.responses();
    assert.equal(rs.length, 1, c.text);
    const head = c.text.slice(0, c.text.indexOf("\r\n\r\n"));
    return { r: rs[0], head };
  }

  test("a body cut short: 408 BODY_TOO_SLOW, Connection: close once, nothing applied", async () => {
    const path = await fresh();
    const { r, head } = await slowRequest(
      `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nabc`,
    );
    assert.match(head, /^HTTP\/1\.1 408 Request Timeout\r\n/);
    const single = Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, v[0]]));
    assertTypedTimeout(r.status, single, r.body, "slow body");
    assert.deepEqual(r.headers.connection, ["close"], `one Connection: close: ${head}`);
    assert.equal(await contents(path), "", "nothing applied");
  });

  test("a head cut short: 408 BODY_TOO_SLOW as well", async () => {
    const { r, head } = await slowRequest(`POST /v1/stream/slow/head HTTP/1.1\r\nHost: x\r\nContent-Ty`);
    const single = Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, v[0]]));
    assertTypedTimeout(r.status, single, r.body, "slow head");
    assert.deepEqual(r.headers.connection, ["close"], `one Connection: close: ${head}`);
  });
});

describe("HTTP/2", () => {
  test("a body cut short: :status 408 BODY_TOO_SLOW, nothing applied, the connection kept", async () => {
    const path = await fresh();
    const client = http2.connect(server.url);
    client.on("error", () => {});
    try {
      const req = client.request({ ":method": "POST", ":path": path, "content-type": "text/plain", "content-length": "10" }, { endStream: false });
      req.on("error", () => {});
      req.write("abc");
      const headers = await new Promise((resolve) => req.on("response", resolve));
      const chunks = [];
      await new Promise((resolve) => {
        req.on("data", (d) => chunks.push(d));
        req.on("end", resolve);
        req.on("close", resolve);
      });
      assertTypedTimeout(headers[":status"], headers, Buffer.concat(chunks).toString(), "HTTP/2 slow body");
      const again = client.request({ ":method": "GET", ":path": `${path}?offset=-1` });
      const [h2] = await Promise.all([new Promise((resolve) => again.on("response", resolve)), new Promise((resolve) => again.on("end", resolve).resume())]);
      assert.equal(h2[":status"], 200, "the same connection serves the next request");
    } finally {
      client.close();
    }
    assert.equal(await contents(path), "", "nothing applied");
  });
});
