// HTTP strictness (issue 13, item 11), on raw sockets: request heads that
// RFC 9112 / RFC 9110 do not allow are refused by the transport before any
// route sees them, with 400 (or 501 for a transfer coding the server does
// not implement), Connection: close, and the connection closed; a refused
// write applies nothing. Each case is paired with the well-formed request it
// differs from, which is served.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { get, put, sleep } from "./lib/bucket.mjs";
import { Conn } from "./lib/wire.mjs";

const server = new Server();
before(() => server.start());
after(() => server.stop());

let n = 0;
async function fresh() {
  const path = `/v1/stream/strict/s${++n}`;
  assert.equal((await put(`${server.url}${path}`)).status, 201);
  return path;
}

const contents = async (path) => (await get(`${server.url}${path}?offset=-1`)).text;

// Sends the pieces (with a pause between them, so each arrives in its own
// read) and waits for one answer and, when it refuses, the close.
async function exchange(...pieces) {
  const c = new Conn(server.port);
  for (const [i, p] of pieces.entries()) {
    if (i > 0) await sleep(50);
    c.send(Buffer.from(p, "latin1"));
  }
  await c.until(() => c.responses().length >= 1 && (c.responses()[0].status < 300 || c.closed));
  c.close();
  return c;
}

async function assertRefused(status, ...pieces) {
  const c = await exchange(...pieces);
  const rs = c.responses();
  assert.equal(rs.length, 1, `one answer to ${JSON.stringify(pieces.join(""))}: ${c.text}`);
  assert.equal(rs[0].status, status, `${JSON.stringify(pieces.join(""))}: ${c.text}`);
  assert.equal(rs[0].header("connection"), "close", c.text);
  assert.ok(c.closed, "the server closed the connection");
}

async function assertServed(...pieces) {
  const c = await exchange(...pieces);
  const rs = c.responses();
  assert.ok(rs.length >= 1 && rs[0].status < 300, `${JSON.stringify(pieces.join(""))} is served: ${c.text}`);
  return rs[0];
}

const post = (path, headerLines, body) =>
  `POST ${path} HTTP/1.1\r\n${headerLines.map((l) => `${l}\r\n`).join("")}\r\n${body}`;

describe("transfer codings", () => {
  test("Transfer-Encoding: gzip, chunked answers 501 and stores nothing", async () => {
    const path = await fresh();
    const chunked = "3\r\nabc\r\n0\r\n\r\n";
    await assertRefused(501, post(path, ["Host: x", "Content-Type: text/plain", "Transfer-Encoding: gzip, chunked"], chunked));
    await assertRefused(501, post(path, ["Host: x", "Content-Type: text/plain", "Transfer-Encoding: gzip", "Transfer-Encoding: chunked"], chunked));
    await assertRefused(501, post(path, ["Host: x", "Content-Type: text/plain", "Transfer-Encoding: identity, chunked"], chunked));
    assert.equal(await contents(path), "");
    await assertServed(post(path, ["Host: x", "Content-Type: text/plain", "Transfer-Encoding: Chunked"], chunked));
    assert.equal(await contents(path), "abc");
  });

  test("chunked not last or not once, and Transfer-Encoding in HTTP/1.0, answer 400", async () => {
    const path = await fresh();
    await assertRefused(400, post(path, ["Host: x", "Content-Type: text/plain", "Transfer-Encoding: gzip"], "abc"));
    await assertRefused(400, post(path, ["Host: x", "Content-Type: text/plain", "Transfer-Encoding: chunked, gzip"], "3\r\nabc\r\n0\r\n\r\n"));
    await assertRefused(400, post(path, ["Host: x", "Content-Type: text/plain", "Transfer-Encoding: chunked, chunked"], "3\r\nabc\r\n0\r\n\r\n"));
    await assertRefused(400, post(path, ["Host: x", "Content-Type: text/plain", "Transfer-Encoding: chunked", "Transfer-Encoding: chunked"], "3\r\nabc\r\n0\r\n\r\n"));
    await assertRefused(400, post(path, ["Host: x", "Content-Type: text/plain", "Transfer-Encoding: gzip, chunked", "Transfer-Encoding: gzip"], "3\r\nabc\r\n0\r\n\r\n"));
    await assertRefused(400, `POST ${path} HTTP/1.0\r\nHost: x\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n`);
    assert.equal(await contents(path), "");
  });

  test("two Content-Length headers, or Content-Length with Transfer-Encoding, answer 400", async () => {
    const path = await fresh();
    await assertRefused(400, post(path, ["Host: x", "Content-Type: text/plain", "Content-Length: 3", "Content-Length: 3"], "abc"));
    await assertRefused(400, post(path, ["Host: x", "Content-Type: text/plain", "Content-Length: 3", "Transfer-Encoding: chunked"], "3\r\nabc\r\n0\r\n\r\n"));
    assert.equal(await contents(path), "");
  });
});

describe("header lines", () => {
  test("a space before the colon answers 400", async () => {
    const path = await fresh();
    await assertRefused(400, post(path, ["Host: x", "Content-Type : text/plain", "Content-Length: 3"], "abc"));
    await assertRefused(400, `GET ${path}?offset=-1 HTTP/1.1\r\nHost : x\r\n\r\n`);
    assert.equal(await contents(path), "");
  });

  test("an empty header name answers 400", async () => {
    const path = await fresh();
    await assertRefused(400, post(path, ["Host: x", "Content-Type: text/plain", ": empty", "Content-Length: 3"], "abc"));
    assert.equal(await contents(path), "");
  });

  test("a folded line (obs-fold) answers 400, wherever it falls in the reads", async () => {
    const path = await fresh();
    const h = ["Host: x", "Content-Type: text/plain"];
    await assertRefused(400, post(path, [...h, "Content-Length:", " 3"], "abc"));
    await assertRefused(400, post(path, [...h, "Content-Length:", "\t3"], "abc"));
    await assertRefused(400, post(path, [...h, "X-Note: one", " two", "Content-Length: 3"], "abc"));
    await assertRefused(400, post(path, [...h, "X-Note: one", "\ttwo", "Content-Length: 3"], "abc"));
    // the fold split from its line by the reads
    await assertRefused(400, `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length:\r\n`, " 3\r\n\r\nabc");
    await assertRefused(400, `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nX-Note: one\r\n`, " two\r\nContent-Length: 3\r\n\r\nabc");
    await assertRefused(400, `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nX-Note: one\r`, "\n two\r\nContent-Length: 3\r\n\r\nabc");
    assert.equal(await contents(path), "");
    // values split by the reads, spaces inside them: served
    await assertServed(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nX-Note: one`, " two\r\nContent-Length: 3\r\n\r\nabc");
    await assertServed(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nX-Note:`, "  one two \r\nContent-Length: 3\r\n\r\ndef");
    assert.equal(await contents(path), "abcdef");
  });

  test("a chunked body's trailer fields are still read and dropped", async () => {
    const path = await fresh();
    await assertServed(post(path, ["Host: x", "Content-Type: text/plain", "Transfer-Encoding: chunked"], "3\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n"));
    assert.equal(await contents(path), "abc");
  });
});

describe("request line and version", () => {
  test("HTTP/2.0 in the request line answers 400", async () => {
    const path = await fresh();
    await assertRefused(400, `GET ${path}?offset=-1 HTTP/2.0\r\nHost: x\r\n\r\n`);
    await assertRefused(400, `POST ${path} HTTP/2.0\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nabc`);
    assert.equal(await contents(path), "");
  });

  test("a request line without a version answers 400", async () => {
    const path = await fresh();
    await assertRefused(400, `GET ${path}?offset=-1\r\nHost: x\r\n\r\n`);
    await assertRefused(400, `GET ${path}?offset=-1\r\n\r\n`);
  });

  test("raw bytes outside ASCII or a tab in the request target answer 400", async () => {
    await assertRefused(400, `GET /v1/stream/strict/\xc3\xa9?offset=-1 HTTP/1.1\r\nHost: x\r\n\r\n`);
    await assertRefused(400, `GET /v1/stream/strict/a\tb?offset=-1 HTTP/1.1\r\nHost: x\r\n\r\n`);
  });

  test("HTTP/1.0 is served, without Host too", async () => {
    const path = await fresh();
    await assertServed(`GET ${path}?offset=-1 HTTP/1.0\r\n\r\n`);
    await assertServed(`GET ${path}?offset=-1 HTTP/1.0\r\nHost: x\r\n\r\n`);
  });
});

describe("Host (RFC 9112 §3.2)", () => {
  test("an HTTP/1.1 request without Host answers 400 and applies nothing", async () => {
    const path = await fresh();
    await assertRefused(400, `GET ${path}?offset=-1 HTTP/1.1\r\n\r\n`);
    await assertRefused(400, `POST ${path} HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nabc`);
    assert.equal(await contents(path), "");
  });

  test("two Host headers, or a Host that is no host[:port], answer 400", async () => {
    const path = await fresh();
    await assertRefused(400, `GET ${path}?offset=-1 HTTP/1.1\r\nHost: x\r\nHost: x\r\n\r\n`);
    await assertRefused(400, `GET ${path}?offset=-1 HTTP/1.0\r\nHost: x\r\nHost: y\r\n\r\n`);
    await assertRefused(400, `GET ${path}?offset=-1 HTTP/1.1\r\nHost: a b\r\n\r\n`);
    await assertRefused(400, `GET ${path}?offset=-1 HTTP/1.1\r\nHost: a/b\r\n\r\n`);
    await assertRefused(400, `GET ${path}?offset=-1 HTTP/1.1\r\nHost: a@b\r\n\r\n`);
  });

  test("host names, IP literals, ports and an empty Host are served", async () => {
    const path = await fresh();
    for (const host of ["127.0.0.1:4437", "localhost", "[::1]:80", "runnel.example.com", "xn--bcher-kva.example", ""]) {
      await assertServed(`GET ${path}?offset=-1 HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
    }
  });
});
