// The standalone gateway and its node failing (docs/GATEWAY.md "The
// gateway's own answers", "Writes through the gateway (§11.1)"; extensions
// §11.1): 503 NO_UPSTREAM from a gateway started while no node answers
// (and not ready); 503 UPSTREAM_UNREACHABLE after the node died (or
// NO_UPSTREAM once it is known down: both forwarded nothing), until it is
// back; 504 UPSTREAM_TIMEOUT from a node stopped by SIGSTOP with a short
// --upstream-timeout-ms; 502 UPSTREAM_FAILED when the node is SIGKILLed
// during a large streamed upload, and when it dies holding a small write it
// was sent whole; in both, the write is never resent (the node's access
// log after its restart shows no such request) and applied at most once;
// a client body that stalls after part of it was forwarded gets its
// connection closed, no 4xx, and nothing of it applies; each failure is
// counted in runnel_gateway_upstream_failures_total{code}; and the gateway
// refuses to start with a request limit above the node's (its own
// --max-body-bytes, a tenant's), while a lower one starts and lowers
// Ursula-Max-Request-Bytes (the embedded gate, which GATEWAY.md does not
// name there, either refuses or answers with the node's lower limit).
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { assertFromNode, assertOwn, sample } from "./checks.mjs";
import {
  Conn, Gateway, Server, bearer, content, deadUrl, expectNoStart, rawRequest, requestHead, seed, sleep,
  startDeployment, tempDir, tenant, tenantsDoc, uploadCut, waitLive, writeTenants,
} from "./lib.mjs";

const T = {
  full: tenant({ "*": "rwa" }),
  stall: tenant({ orders: "rw" }, { limits: { min_body_bytes_per_second: 1000000 } }),
};
const MiB = 1 << 20;
const ask = (port, method, p, { body, key = T.full.key } = {}) =>
  rawRequest(port, method, p, { headers: { ...bearer(key), ...(body !== undefined ? { "Content-Type": "text/plain" } : {}) }, body });

// The node's access-log lines for method and path (after its last start
// when `sinceStart`).
function accessLines(node, method, p, { sinceStart = false } = {}) {
  let log = node.log;
  if (sinceStart) log = log.slice(log.lastIndexOf("===== start"));
  return log.split("\n").filter((l) => l.includes(` access: ${method} ${p} `));
}

// The gateway's count of upstream failures answered with code.
// The failures counted for an answer's code (GATEWAY.md: the metric's
// `why` label names the kind of failure behind each code).
const WHY = { UPSTREAM_UNREACHABLE: "unreachable", UPSTREAM_FAILED: "failed", UPSTREAM_TIMEOUT: "timeout" };
async function failures(port, code) {
  const r = await rawRequest(port, "GET", "/__runnel/gateway/metrics", { headers: bearer(T.full.key) });
  assert.equal(r.status, 200, r.text);
  return sample(r.text, "runnel_gateway_upstream_failures_total", { why: WHY[code] });
}

// Restarts a node (SIGKILLed or stopped) on its data and port; resolves
// once the gateway forwards to it again.
async function revive(d) {
  await d.node.stop("SIGKILL");
  await d.node.start();
  for (let i = 0; i < 100; i++) {
    const r = await ask(d.port, "GET", "/orders/o-1?offset=-1");
    if (r.status === 200) return;
    await sleep(100);
  }
  throw new Error("the gateway did not forward to the restarted node within 10 s");
}

describe("no node answering at the start: NO_UPSTREAM", () => {
  let gw;
  before(async () => {
    const dir = tempDir("runnel-gw-noup-");
    const file = path.join(dir, "tenants.json");
    writeTenants(file, tenantsDoc(T));
    gw = new Gateway({ upstreams: [await deadUrl()], tenantsFile: file, logPath: path.join(dir, "gateway.log") });
    await gw.start({ waitReady: false });
    await waitLive(gw);
  });
  after(async () => {
    const r = await gw.stop();
    assert.deepEqual(r, { code: 0, signal: null }, gw.logTail());
  });

  test("not ready", async () => {
    assert.notEqual((await rawRequest(gw.port, "GET", "/__runnel/readyz")).status, 200);
  });
  test("a read and a write answer 503 NO_UPSTREAM with Retry-After", async () => {
    assertOwn(await ask(gw.port, "GET", "/orders/o-1?offset=-1"), 503, "NO_UPSTREAM", { what: "a read" });
    assertOwn(await ask(gw.port, "POST", "/orders/o-1", { body: "x" }), 503, "NO_UPSTREAM", { what: "a write" });
    assertOwn(await ask(gw.port, "HEAD", "/orders/o-1"), 503, "NO_UPSTREAM", { isHead: true, what: "a HEAD" });
  });
  test("a refusal of the gate still comes first (401)", async () => {
    assertOwn(await ask(gw.port, "GET", "/orders/o-1?offset=-1", { key: "rnk_not-a-key" }), 401, "INVALID_CREDENTIAL");
  });
});

describe("the node failing under a running gateway", () => {
  let d;
  before(async () => {
    d = await startDeployment("standalone", { tenants: tenantsDoc(T), nodeArgs: ["--access-log"] });
    await seed(d, T.full.key, [["/orders/o-1", "hello\n"], ["/orders/big", ""], ["/orders/small", ""], ["/orders/stalled", ""]]);
  });
  after(async () => {
    d.node.proc?.kill("SIGCONT");
    await d?.stop();
  });

  test("503 UPSTREAM_UNREACHABLE after the node died, until it is back", async () => {
    await d.node.stop("SIGKILL");
    try {
      assertOwn(await ask(d.port, "GET", "/orders/o-1?offset=-1"), 503, "UPSTREAM_UNREACHABLE", { what: "the first read" });
      // once a node failed, "no node is usable" (NO_UPSTREAM) says as much:
      // both are refusals that forwarded nothing
      const w = await ask(d.port, "POST", "/orders/o-1", { body: "unreachable\n" });
      assertOwn(w, 503, w.text.includes("NO_UPSTREAM") ? "NO_UPSTREAM" : "UPSTREAM_UNREACHABLE", { what: "a write" });
    } finally {
      await revive(d);
    }
    assert.ok(!(await content(d, T.full.key, "/orders/o-1")).includes("unreachable"), "the refused write applied nothing");
  });

  test("502 UPSTREAM_FAILED: the node SIGKILLed during a large streamed upload; never resent", async () => {
    const total = 8 * MiB;
    const answer = await uploadCut(d.port, "/orders/big", T.full.key, total, () => d.node.stop("SIGKILL"));
    assertOwn(answer, 502, "UPSTREAM_FAILED", { what: "the node killed mid-upload" });
    await revive(d);
    await sleep(500);
    assert.deepEqual(accessLines(d.node, "POST", "/orders/big", { sinceStart: true }), [], "the write was not resent to the restarted node");
    const len = (await content(d, T.full.key, "/orders/big")).length;
    assert.ok(len === 0 || len === total, `applied nothing or once: ${len} bytes`);
  });

  test("502 UPSTREAM_FAILED: the node dies holding a small write it was sent; never resent", async () => {
    d.node.proc.kill("SIGSTOP");
    const pending = ask(d.port, "POST", "/orders/small", { body: "held-write\n" });
    await sleep(700); // forwarded whole into the stopped node's socket
    d.node.proc.kill("SIGKILL");
    const r = await pending;
    assertOwn(r, 502, "UPSTREAM_FAILED", { what: "the node killed holding the write" });
    await revive(d);
    await sleep(500);
    assert.deepEqual(accessLines(d.node, "POST", "/orders/small", { sinceStart: true }), [], "the write was not resent to the restarted node");
    const text = await content(d, T.full.key, "/orders/small");
    assert.ok(text === "" || text === "held-write\n", `applied nothing or once: ${JSON.stringify(text)}`);
  });

  test("each failure is counted by its code", async () => {
    assert.ok(await failures(d.port, "UPSTREAM_UNREACHABLE") >= 1, "UPSTREAM_UNREACHABLE counted");
    assert.ok(await failures(d.port, "UPSTREAM_FAILED") >= 2, "both UPSTREAM_FAILED counted");
  });

  test("a body that stalls after part of it was forwarded: connection closed, no 4xx, nothing applied", async () => {
    const c = await Conn.open(d.port, { timeoutMs: 20000 });
    c.write(requestHead("POST", "/orders/stalled", { ...bearer(T.stall.key), "Content-Type": "text/plain", "Content-Length": String(4 * MiB) }));
    c.write(Buffer.alloc(1.5 * MiB, 0x43)); // over --hold-body-bytes: forwarded as it comes; below the floor in 2 s
    let answer = null;
    try {
      answer = await c.answer({ timeoutMs: 20000 });
    } catch (e) {
      assert.match(String(e), /ended without an answer/, "the connection is closed (not left open)");
    }
    c.close();
    if (answer) {
      assert.ok(answer.status < 400 || answer.status >= 500 || answer.status === 408, `no 4xx of the gateway's own after forwarding: ${answer.statusLine} ${answer.text}`);
      assert.notEqual(JSON.parse(answer.text || "{}")?.error?.code, "BODY_TOO_SLOW", "BODY_TOO_SLOW says nothing was forwarded");
      await c.answer({ timeoutMs: 5000 }).catch(() => {}); // then the close
    }
    await sleep(300);
    assert.equal((await content(d, T.full.key, "/orders/stalled")).length, 0, "nothing of the cut request applied");
  });
});

describe("504 UPSTREAM_TIMEOUT", () => {
  let d;
  before(async () => {
    d = await startDeployment("standalone", { tenants: tenantsDoc(T), gatewayArgs: ["--upstream-timeout-ms", "1000"] });
    await seed(d, T.full.key, [["/orders/o-1", "hello\n"]]);
  });
  after(async () => {
    d.node.proc?.kill("SIGCONT");
    await d?.stop();
  });

  test("a node stopped by SIGSTOP: a read and a write answer 504 within the timeout", async () => {
    d.node.proc.kill("SIGSTOP");
    try {
      const t0 = Date.now();
      assertOwn(await ask(d.port, "GET", "/orders/o-1?offset=-1"), 504, "UPSTREAM_TIMEOUT", { what: "a read" });
      assert.ok(Date.now() - t0 < 10000, "answered within the timeout and some slack");
      assertOwn(await ask(d.port, "POST", "/orders/o-1", { body: "late\n" }), 504, "UPSTREAM_TIMEOUT", { what: "a write" });
    } finally {
      d.node.proc.kill("SIGCONT");
    }
    assertFromNode(await ask(d.port, "GET", "/orders/o-1?offset=-1"), 200, "the node answers again");
  });

  test("each timeout is counted by its code", async () => {
    assert.ok(await failures(d.port, "UPSTREAM_TIMEOUT") >= 2);
  });
});

describe("request limits against the node's", () => {
  const NODE_LIMIT = 1000000;
  const PROTOCOL_LIMIT = 33554432;
  let low; // a node with a lower limit (a test setting: --test-hooks)
  let node; // a node with the protocol's limit
  const file = (doc) => {
    const f = path.join(tempDir("runnel-gw-limits-"), "tenants.json");
    writeTenants(f, doc);
    return f;
  };
  before(async () => {
    low = await new Server({ args: ["--test-hooks", "--max-body-bytes", String(NODE_LIMIT)] }).start();
    node = await new Server().start();
  });
  after(async () => {
    await low.stop();
    await node.stop();
  });

  test("the gateway refuses to start with its limit above the node's, naming it", async () => {
    const gw = new Gateway({ upstreams: [low.url], tenantsFile: file(tenantsDoc(T)) });
    const r = await expectNoStart(gw);
    assert.notEqual(r.code, 0, r.log);
    assert.match(r.log, new RegExp(`\\b${NODE_LIMIT}\\b`), "the log names the node's limit");
  });

  test("the gateway refuses to start with a tenant's limit above the node's", async () => {
    const big = { big: tenant({ orders: "rw" }, { limits: { max_request_bytes: PROTOCOL_LIMIT + 1 } }) };
    const gw = new Gateway({ upstreams: [node.url], tenantsFile: file(tenantsDoc(big)) });
    const r = await expectNoStart(gw);
    assert.notEqual(r.code, 0, r.log);
  });

  // GATEWAY.md names the gateway; inside the node, the node's own limit
  // refuses first, so the embedded gate may start: then that lower limit is
  // the one its answers name.
  test("the embedded gate with a tenant's limit above the node's: refused, or the node's limit applies", async () => {
    const big = { full: T.full, big: tenant({ orders: "rw" }, { limits: { max_request_bytes: NODE_LIMIT + 1 } }) };
    const srv = new Server({ args: ["--test-hooks", "--max-body-bytes", String(NODE_LIMIT), "--tenants", file(tenantsDoc(big))] });
    await srv.start({ waitReady: false });
    const exited = await Promise.race([srv.exited, sleep(3000).then(() => null)]);
    if (exited) {
      assert.notEqual(exited.code, 0, srv.log);
      return;
    }
    try {
      await waitLive(srv);
      assert.equal((await ask(srv.port, "PUT", "/orders/limits", { body: "" })).status, 201);
      const h = await ask(srv.port, "HEAD", "/orders/limits", { key: big.big.key });
      assert.equal(h.header("ursula-max-request-bytes"), String(NODE_LIMIT), "HEAD names the node's lower limit");
      const r = await ask(srv.port, "POST", "/orders/limits", { key: big.big.key, body: "q".repeat(NODE_LIMIT + 1) });
      assert.equal(r.status, 413, r.text);
      assert.equal(r.header("ursula-max-request-bytes"), String(NODE_LIMIT), "the 413 names the node's lower limit");
    } finally {
      await srv.stop();
    }
  });

  test("a tenant's lower limit starts, and a HEAD carries the lowest", async () => {
    const lower = { ...T, low: tenant({ orders: "rw" }, { limits: { max_request_bytes: 500000 } }) };
    const gw = await new Gateway({ upstreams: [node.url], tenantsFile: file(tenantsDoc(lower)) }).start();
    try {
      const put = await ask(gw.port, "PUT", "/orders/limits", { body: "" });
      assert.equal(put.status, 201, put.text);
      const h = await ask(gw.port, "HEAD", "/orders/limits", { key: lower.low.key });
      assertFromNode(h, 200, "HEAD by the tenant with its own limit");
      assert.equal(h.header("ursula-max-request-bytes"), "500000");
      const other = await ask(gw.port, "HEAD", "/orders/limits");
      assert.equal(other.header("ursula-max-request-bytes"), String(PROTOCOL_LIMIT), "the node's limit for the others");
      assertOwn(await ask(gw.port, "POST", "/orders/limits", { key: lower.low.key, body: "q".repeat(500001) }), 413, "REQUEST_TOO_LARGE", { maxBytes: 500000 });
    } finally {
      await gw.stop();
    }
  });

  // §10: an intermediary MAY lower the limit for its clients; GATEWAY.md's
  // 413 is "over the tenant's or the gateway's limit".
  test("the gateway may lower its own limit (--max-body-bytes)", async () => {
    const gw = await new Gateway({ upstreams: [node.url], tenantsFile: file(tenantsDoc(T)), args: ["--max-body-bytes", "2000000"] }).start();
    try {
      assert.equal((await ask(gw.port, "PUT", "/orders/own-limit", { body: "" })).status, 201);
      assert.equal((await ask(gw.port, "HEAD", "/orders/own-limit")).header("ursula-max-request-bytes"), "2000000");
      assertOwn(await ask(gw.port, "POST", "/orders/own-limit", { body: "q".repeat(2000001) }), 413, "REQUEST_TOO_LARGE", { maxBytes: 2000000 });
    } finally {
      await gw.stop();
    }
  });
});
