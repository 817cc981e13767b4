// CORS from a real browser (issue 25, item 5; PROTOCOL.md's browser
// clients, extensions.txt §10's headers): a page served from one loopback
// origin (http://127.0.0.2:A, a tiny server of this file) uses a runnel
// server on another (http://127.0.0.1:B) through fetch() in headless
// Chromium (Debian's chromium, driven by puppeteer-core over the DevTools
// protocol). A browser hands a cross-origin page only the response headers
// the server names in Access-Control-Expose-Headers (and the CORS-safelisted
// ones), and sends a request with a non-safelisted header only after a
// preflight that allows it. Every answer the page gets is compared with the
// same request made from Node (which sees every header): each protocol
// header Node sees (Stream-*, Producer-*, Ursula-*, x-ursula-*, ETag,
// Location, Content-Range, Accept-Ranges, Retry-After) the page must see,
// with the same value for reads. The answers cover the snapshot headers,
// a part's id, the rewrite headers (Stream-Previous-Incarnation,
// Stream-Inherited-Offset), immutable reads, byte ranges, a 503 with
// Retry-After (a failed log sync, test hook) and a cluster node without a
// leader (503 NO_LEADER with x-ursula-raft-group). Two headers no page can
// be shown by a cheap answer are checked by name in the exposed list: the
// staged-parts bounds (8192 parts to reach) and the leader and term of a
// redirect (a browser follows a 307 without showing it to the page).
//
// Needs /usr/bin/chromium (scripts/setup.sh test installs it) and
// tests/browser/node_modules (npm ci, pinned by package-lock.json); without
// either the file fails, saying which. About 5 s.
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import { after, before, describe, test } from "node:test";
import { snapshotDigest } from "../blackbox/lib/snap.mjs";
import { Server, freePort, sleep, tempDir } from "../lib/server.mjs";

const CHROMIUM = process.env.RUNNEL_CHROMIUM ?? "/usr/bin/chromium";
const PAGE_HOST = "127.0.0.2";

// The protocol's headers: what a browser client of Runnel needs to read.
const PROTOCOL_HEADER = /^(stream-|producer-|ursula-|x-ursula-|etag$|location$|content-range$|accept-ranges$|retry-after$)/;

let puppeteer;
let browser;
let page;
let pageServer;
let pageOrigin;
const server = new Server({ args: ["--test-hooks"] });
let lone; // a cluster node whose two peers never start: no leader

before(async () => {
  assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing (scripts/setup.sh test installs Debian's chromium)`);
  try {
    puppeteer = (await import("puppeteer-core")).default;
  } catch (e) {
    assert.fail(`puppeteer-core is not installed (cd tests/browser && npm ci): ${e.message}`);
  }
  await server.start();
  const port = await freePort();
  pageServer = http.createServer((rq, rs) => {
    rs.writeHead(200, { "content-type": "text/html" });
    rs.end("<!doctype html><title>runnel CORS test</title><p>a page on another origin</p>");
  });
  await new Promise((resolve) => pageServer.listen(port, PAGE_HOST, resolve));
  pageOrigin = `http://${PAGE_HOST}:${port}`;
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    userDataDir: tempDir("runnel-chromium-"),
    args: [
      "--no-sandbox", "--headless", "--disable-gpu", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
    ],
  });
  page = await browser.newPage();
  await page.goto(`${pageOrigin}/`);
});

after(async () => {
  await browser?.close();
  pageServer?.close();
  await server.stop();
  await lone?.stop("SIGKILL");
});

// fetch() from the page: {status, headers (what the page can read), body}.
function fromPage(url, init = {}) {
  return page.evaluate(async (u, i) => {
    const r = await fetch(u, i);
    const headers = {};
    r.headers.forEach((v, k) => { headers[k] = v; });
    return { status: r.status, headers, body: await r.text() };
  }, url, init);
}

// The same request from Node: every header.
async function fromNode(url, init = {}) {
  const r = await fetch(url, { ...init, signal: AbortSignal.timeout(10000) });
  const headers = {};
  r.headers.forEach((v, k) => { headers[k] = v; });
  return { status: r.status, headers, body: await r.text() };
}

const protocolHeaders = (hs) => Object.keys(hs).filter((k) => PROTOCOL_HEADER.test(k)).sort();

// Asserts that the page saw every protocol header `want` names and, for
// reads (`node` given, the same request from Node), every one Node saw,
// with Node's values.
function assertSees(what, seen, want, node = null) {
  assert.equal(seen.headers["access-control-allow-origin"], undefined, "the page cannot read the CORS headers themselves");
  for (const name of want) {
    assert.ok(name in seen.headers, `${what}: the page cannot read ${name} (it sees ${protocolHeaders(seen.headers).join(", ")})`);
  }
  if (node) {
    assert.equal(seen.status, node.status, `${what}: the same status from the page and from Node`);
    for (const name of protocolHeaders(node.headers)) {
      assert.equal(seen.headers[name], node.headers[name], `${what}: ${name} as Node sees it`);
    }
  }
}

describe("a page on another origin reads every protocol header", () => {
  let S; // the bucket stream's URL
  let off; // its tail after two appends
  let inc;

  test("the page is on another origin than the server", () => {
    assert.notEqual(new URL(pageOrigin).origin, new URL(server.url).origin);
  });

  test("create and appends (preflighted): Location, Stream-Incarnation, Stream-Next-Offset, Ursula-*", async () => {
    S = `${server.url}/corsb/s1`;
    const c = await fromPage(S, { method: "PUT", headers: { "content-type": "application/json", "stream-ttl": "3600" }, body: '{"a":1}' });
    assert.equal(c.status, 201, c.body);
    assertSees("create", c, ["location", "stream-incarnation", "stream-next-offset", "ursula-protocol", "ursula-cluster-id"]);
    inc = c.headers["stream-incarnation"];
    const a = await fromPage(S, {
      method: "POST",
      headers: { "content-type": "application/json", "producer-id": "p", "producer-epoch": "0", "producer-seq": "0" },
      body: '{"b":2}',
    });
    assert.equal(a.status, 200, a.body);
    assertSees("producer append", a, ["stream-next-offset", "producer-epoch", "producer-seq"]);
    off = a.headers["stream-next-offset"];
  });

  test("HEAD and catch-up GET: Stream-TTL, Ursula-Max-Request-Bytes, Ursula-Max-Snapshot-Bytes", async () => {
    const hd = await fromPage(S, { method: "HEAD" });
    assertSees("HEAD", hd, ["stream-next-offset", "stream-ttl", "ursula-max-request-bytes", "ursula-max-snapshot-bytes"], await fromNode(S, { method: "HEAD" }));
    const rd = await fromPage(`${S}?offset=-1`);
    assertSees("catch-up", rd, ["stream-next-offset", "stream-up-to-date", "etag"], await fromNode(`${S}?offset=-1`));
  });

  test("snapshot publish, HEAD, a ranged read and its immutable URL: Stream-Snapshot-*, Content-Range, Accept-Ranges, Stream-Immutable", async () => {
    const snap = `${S}/snapshot/${encodeURIComponent(off)}`;
    const p = await fromPage(snap, { method: "PUT", headers: { "content-type": "application/x-state" }, body: '{"count":2}' });
    assert.equal(p.status, 204, p.body);
    assertSees("publish", p, ["stream-snapshot-digest"]);
    assertSees("HEAD with a snapshot", await fromPage(S, { method: "HEAD" }), ["stream-snapshot-offset", "stream-snapshot-digest"],
      await fromNode(S, { method: "HEAD" }));
    const range = { headers: { range: "bytes=0-4" } };
    const r = await fromPage(snap, range);
    assert.equal(r.status, 206, r.body);
    assert.equal(r.body, '{"cou');
    assertSees("ranged snapshot read", r, ["content-range", "accept-ranges", "stream-snapshot-offset", "stream-snapshot-digest"], await fromNode(snap, range));
    const imm = `${S}/incarnation/${inc}/snapshot/${encodeURIComponent(off)}`;
    assertSees("immutable snapshot read", await fromPage(imm), ["stream-immutable"], await fromNode(imm));
  });

  test("a staged part and its commit (preflighted Stream-Snapshot-Parts and -Digest): Stream-Snapshot-Part", async () => {
    const r = await fromPage(`${S}/snapshot/${encodeURIComponent(off)}/parts`, {
      method: "POST", headers: { "content-type": "application/octet-stream" }, body: "part",
    });
    assert.equal(r.status, 201, r.body);
    assertSees("part", r, ["stream-snapshot-part", "stream-incarnation"]);
    const digest = snapshotDigest("application/x-state", "part");
    const c = await fromPage(`${S}/snapshot/${encodeURIComponent(off)}`, {
      method: "PUT",
      headers: { "content-type": "application/x-state", "stream-snapshot-parts": "1", "stream-snapshot-digest": digest },
      body: `${r.headers["stream-snapshot-part"]}\n`,
    });
    assert.equal(c.status, 409, `a commit at the published offset names the latest snapshot: ${c.body}`);
    assertSees("commit", c, ["stream-snapshot-offset", "stream-snapshot-digest"]);
  });

  test("after a history rewrite: Stream-Previous-Incarnation, Stream-Inherited-Offset", async () => {
    const rw = await fromNode(`${server.url}/__runnel/test/rewrite/corsb/s1?keep=${encodeURIComponent(off)}`, { method: "POST" });
    assert.equal(rw.status, 204, rw.body);
    assertSees("HEAD after a rewrite", await fromPage(S, { method: "HEAD" }), ["stream-previous-incarnation", "stream-inherited-offset"],
      await fromNode(S, { method: "HEAD" }));
  });

  test("a failed log sync: 503 OUTCOME_UNKNOWN with Retry-After", async () => {
    const f = await fromNode(`${server.url}/__runnel/test/fail-syncs?n=1`, { method: "POST" });
    assert.equal(f.status, 204, f.body);
    const r = await fromPage(S, { method: "POST", headers: { "content-type": "application/json" }, body: '{"c":3}' });
    assert.equal(r.status, 503, r.body);
    assert.equal(JSON.parse(r.body).error.code, "OUTCOME_UNKNOWN");
    assertSees("503", r, ["retry-after", "ursula-protocol"]);
  });

  test("a cluster node without a leader: 503 NO_LEADER with x-ursula-raft-group", async () => {
    // peers 2 and 3 are named (free ports nobody listens on) and never started
    const ports = [];
    for (let i = 0; i < 6; i++) ports.push(await freePort());
    const peers = [1, 2, 3].flatMap((i) => ["--peer", `${i}=127.0.0.1:${ports[2 * i - 2]},http://127.0.0.1:${ports[2 * i - 1]}`]);
    lone = new Server({ args: ["--node-id", "1", "--cluster-id", "cors-test", "--groups", "1", ...peers], port: ports[1] });
    await lone.start({ waitReady: false });
    const url = `${lone.url}/corsb/s2`;
    let r;
    for (let i = 0; i < 100; i++) {
      r = await fromPage(url, { method: "PUT", headers: { "content-type": "text/plain" } }).catch((e) => ({ status: 0, body: String(e) }));
      if (r.status === 503 && r.body.includes("NO_LEADER")) break;
      await sleep(100);
    }
    assert.equal(r.status, 503, `the lone node answered ${r.status} ${r.body}\n${lone.logTail()}`);
    assert.equal(JSON.parse(r.body).error.code, "NO_LEADER");
    assertSees("NO_LEADER", r, ["x-ursula-raft-group", "retry-after", "ursula-cluster-id"]);
  });

  test("the headers no cheap answer shows a page are named in Access-Control-Expose-Headers", async () => {
    const r = await fromNode(S, { method: "HEAD" });
    const exposed = r.headers["access-control-expose-headers"].split(",").map((s) => s.trim().toLowerCase());
    for (const name of ["ursula-max-staged-parts", "ursula-max-staged-bytes", "x-ursula-raft-leader-id", "x-ursula-raft-term"]) {
      assert.ok(exposed.includes(name), `${name} is not exposed`);
    }
  });
});
