// Operations: logs (issue 9). One line per event on stderr: text by default
// ("<RFC 3339> <level> <event>: <message>"), JSON with --log-format json
// (every line parses, with ts, level, event and msg); --access-log adds a
// line per answered request naming method, path without the query, status,
// bytes and microseconds (in JSON as separate members; SSE responses included, also when the client
// ends them); --log-level filters; request bodies, query strings and
// credentials (Authorization, Cookie, API-key headers, tokens in query
// strings and in webhook URLs) never appear; a path with quotes and
// backslashes still gives a JSON line that parses; an engine error (a
// failed checkpoint) is a log line like any other.
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { tempDir } from "./lib/server.mjs";
import { freePort, sleep, spawnServe, waitReady } from "./lib/ops.mjs";

const LEVELS = ["debug", "info", "warn", "error"];
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const children = [];

after(async () => {
  for (const c of children) await c.stop("SIGKILL");
});

// Starts a server with extra args; resolves when ready.
async function start(extra, { dataDir } = {}) {
  const dir = dataDir ?? tempDir("runnel-logs-");
  const port = await freePort();
  const child = spawnServe(["--listen", `127.0.0.1:${port}`, "--data-dir", dir, ...extra]);
  children.push(child);
  child.url = `http://127.0.0.1:${port}`;
  child.port = port;
  child.dataDir = dir;
  await waitReady(child.url);
  return child;
}

async function call(url, { method = "GET", headers = {}, body } = {}) {
  const res = await fetch(url, { method, headers, body, signal: AbortSignal.timeout(10000) });
  return { status: res.status, text: await res.text() };
}

// Sends raw bytes and resolves to the answer's status.
function raw(port, request) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, "127.0.0.1", () => s.end(request));
    let data = "";
    s.on("data", (d) => (data += d));
    s.on("end", () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0)));
    s.on("error", reject);
    s.setTimeout(5000, () => s.destroy(new Error("raw request timed out")));
  });
}

// The JSON lines of a log, each checked for the line format.
function jsonLines(text) {
  assert.ok(text.endsWith("\n"), "the log ends with a complete line");
  return text
    .slice(0, -1)
    .split("\n")
    .map((line) => {
      let j;
      assert.doesNotThrow(() => (j = JSON.parse(line)), `a log line is not JSON: ${line}`);
      const fields = j.event === "access" ? ACCESS_FIELDS : ["event", "level", "msg", "ts"];
      assert.deepEqual(Object.keys(j).sort(), fields, `fields of ${line}`);
      assert.match(j.ts, RFC3339, `ts of ${line}`);
      assert.ok(LEVELS.includes(j.level), `level of ${line}`);
      assert.match(j.event, /^[a-z_]+$/, `event of ${line}`);
      if (j.event !== "access") assert.equal(typeof j.msg, "string");
      return j;
    });
}

// A JSON access line has one member per item instead of a message.
const ACCESS_FIELDS = ["bytes", "duration_us", "event", "level", "method", "path", "status", "ts"];

// The access lines as {method, path, status, bytes, micros}, each member
// checked for its type.
function accessLines(lines) {
  return lines
    .filter((l) => l.event === "access")
    .map((l) => {
      assert.equal(l.level, "info");
      assert.match(l.method, /^([A-Z]+|-)$/, `method: ${JSON.stringify(l)}`);
      assert.equal(typeof l.path, "string");
      for (const k of ["status", "bytes", "duration_us"]) assert.ok(Number.isSafeInteger(l[k]) && l[k] >= 0, `${k} is a number: ${JSON.stringify(l)}`);
      assert.ok(l.status >= 100 && l.status <= 599);
      return { method: l.method, path: l.path, status: l.status, bytes: l.bytes, micros: l.duration_us };
    });
}

const SECRETS = ["AUTHSECRET1", "COOKIESECRET2", "BODYSECRET3", "QUERYSECRET4", "QUERYSECRET5", "BODYSECRET6", "APIKEYSECRET7", "WEBHOOKSECRET8", "PRODSECRET9"];

describe("JSON logs with the access log", () => {
  let child, lines, access, answered;

  before(async () => {
    child = await start(["--log-format", "json", "--access-log", "--webhook-allow-loopback", "--webhook-timeout-ms", "500"]);
    const u = (p) => `${child.url}/v1/stream/${p}`;
    answered = [];
    const note = (method, p, r) => answered.push({ method, path: p, status: r.status });
    note("PUT", "/v1/stream/logs/a", await call(u("logs/a"), { method: "PUT", headers: { "content-type": "text/plain", authorization: "Bearer AUTHSECRET1", cookie: "session=COOKIESECRET2" } }));
    note("POST", "/v1/stream/logs/a", await call(u("logs/a"), { method: "POST", headers: { "content-type": "text/plain", "x-api-key": "APIKEYSECRET7" }, body: "BODYSECRET3" }));
    note("GET", "/v1/stream/logs/a", await call(`${u("logs/a")}?offset=-1&token=QUERYSECRET4`));
    note("GET", "/v1/stream/logs/missing", await call(`${u("logs/missing")}?token=QUERYSECRET5`));
    note("PUT", "/v1/stream/logs/j", await call(u("logs/j"), { method: "PUT", headers: { "content-type": "application/json" } }));
    note("POST", "/v1/stream/logs/j", await call(u("logs/j"), { method: "POST", headers: { "content-type": "application/json" }, body: '{"password":"BODYSECRET6"' }));
    note("POST", "/v1/stream/logs/a", await call(u("logs/a"), { method: "POST", headers: { "content-type": "text/plain", "producer-id": "PRODSECRET9", "producer-epoch": "0", "producer-seq": "0" }, body: "p" }));
    note("GET", "/__runnel/metrics", await call(`${child.url}/__runnel/metrics?token=QUERYSECRET4`));
    // an SSE response the client ends
    const sse = await new Promise((resolve, reject) => {
      const rq = http.request(`${u("logs/a")}?offset=-1&live=sse&token=QUERYSECRET5`, { agent: false }, (rs) => {
        rs.once("data", () => resolve({ rq, status: rs.statusCode }));
        rs.on("error", () => {});
      });
      rq.on("error", () => {});
      rq.end();
      setTimeout(() => reject(new Error("no SSE data")), 5000);
    });
    sse.rq.destroy();
    note("GET", "/v1/stream/logs/a", sse);
    // a webhook whose URL carries a token, to a closed port: delivery fails
    const closed = await freePort();
    const sub = await call(u("__ds/subscriptions/logsub"), {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ type: "webhook", pattern: "logw/*", webhook: { url: `http://127.0.0.1:${closed}/hook?token=WEBHOOKSECRET8` } }),
    });
    assert.equal(sub.status, 201, sub.text);
    note("PUT", "/v1/stream/__ds/subscriptions/logsub", sub);
    note("PUT", "/v1/stream/logw/x", await call(u("logw/x"), { method: "PUT", headers: { "content-type": "text/plain" }, body: "wake" }));
    const deadline = Date.now() + 5000;
    while (!child.stderr.includes('"webhook_failed"') && Date.now() < deadline) await sleep(20);
    // a path with a quote and a backslash (sent raw: fetch would encode them)
    const odd = await raw(child.port, 'GET /v1/stream/logs/q"\\x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    note("GET", '/v1/stream/logs/q"\\x', { status: odd });
    await sleep(100); // the SSE close reaches the server
    const exit = await child.stop("SIGTERM");
    assert.deepEqual(exit, { code: 0, signal: null });
    lines = jsonLines(child.stderr);
    access = accessLines(lines);
  });

  test("every line is a JSON object with ts (RFC 3339), level, event and msg (access lines: method, path, status, bytes, duration_us)", () => {
    assert.ok(lines.length >= 5);
  });

  test("the lifecycle is logged: start, recovery, ready, shutdown, stopped", () => {
    const events = lines.map((l) => l.event);
    for (const e of ["start", "recovery", "ready", "shutdown", "stopped"]) assert.ok(events.includes(e), `event ${e} in ${events}`);
    assert.ok(events.indexOf("ready") < events.indexOf("shutdown"));
    assert.equal(events.at(-1), "stopped");
  });

  test("a failed webhook delivery is a warn line", () => {
    const w = lines.find((l) => l.event === "webhook_failed");
    assert.ok(w, "webhook_failed logged");
    assert.equal(w.level, "warn");
    assert.match(w.msg, /logsub/);
  });

  test("one access line per answered request: method, path without the query, status, bytes, microseconds", () => {
    const mine = access.filter((a) => !(a.path === "/__runnel/readyz"));
    const want = answered.map((a) => `${a.method} ${a.path} ${a.status}`).sort();
    assert.deepEqual(mine.map((a) => `${a.method} ${a.path} ${a.status}`).sort(), want);
    for (const a of access) {
      assert.ok(!a.path.includes("?"), `no query in ${a.path}`);
      assert.ok(a.micros >= 0 && a.micros < 60e6);
    }
    const read = access.find((a) => a.method === "GET" && a.path === "/v1/stream/logs/a" && a.status === 200 && a.bytes > 0);
    assert.ok(read, "the catch-up read names its body bytes");
  });

  test("an SSE response ended by the client is logged too", () => {
    const sse = access.filter((a) => a.method === "GET" && a.path === "/v1/stream/logs/a" && a.status === 200);
    assert.equal(sse.length, 2, `catch-up and SSE lines: ${JSON.stringify(sse)}`);
  });

  test("the readiness probes of the start are access lines too", () => {
    assert.ok(access.some((a) => a.path === "/__runnel/readyz" && a.status === 200));
  });

  test("no body, query string, credential or producer id appears in the log", () => {
    for (const s of SECRETS) assert.ok(!child.stderr.includes(s), `${s} leaked into the log`);
    assert.ok(!child.stdout.includes("SECRET"), "nothing secret on stdout");
    assert.ok(!/[?&]token=/.test(child.stderr), "no query string");
  });

  test("a path with a quote and a backslash is escaped, so the line parses and keeps the path", () => {
    const odd = access.find((a) => a.path.startsWith("/v1/stream/logs/q"));
    assert.ok(odd, "the odd request was answered and logged");
    assert.equal(odd.path, '/v1/stream/logs/q"\\x');
  });
});

describe("text logs and levels", () => {
  test("by default: text lines `<RFC 3339> <level> <event>: <message>`, no access lines", async () => {
    const child = await start([]);
    await call(`${child.url}/v1/stream/t/a`, { method: "PUT", headers: { "content-type": "text/plain" } });
    assert.deepEqual(await child.stop(), { code: 0, signal: null });
    const lines = child.stderr.trim().split("\n");
    assert.ok(lines.length >= 4);
    for (const line of lines) {
      const m = /^(\S+) (debug|info|warn|error) ([a-z_]+): (.*)$/.exec(line);
      assert.ok(m, `text line form: ${line}`);
      assert.match(m[1], RFC3339);
      assert.notEqual(m[3], "access");
    }
    assert.ok(lines.some((l) => / info ready: serving on http:\/\/127\.0\.0\.1:/.test(l)));
  });

  test("--log-level warn: no info lines, even with the access log; warn lines stay", async () => {
    const child = await start(["--log-level", "warn", "--access-log", "--log-format", "json", "--webhook-allow-loopback", "--webhook-timeout-ms", "500"]);
    const closed = await freePort();
    const sub = await call(`${child.url}/v1/stream/__ds/subscriptions/lvl`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ type: "webhook", pattern: "lvl/*", webhook: { url: `http://127.0.0.1:${closed}/hook` } }),
    });
    assert.equal(sub.status, 201);
    await call(`${child.url}/v1/stream/lvl/a`, { method: "PUT", headers: { "content-type": "text/plain" }, body: "x" });
    const deadline = Date.now() + 5000;
    while (!child.stderr.includes("webhook_failed") && Date.now() < deadline) await sleep(20);
    assert.deepEqual(await child.stop(), { code: 0, signal: null });
    const lines = jsonLines(child.stderr);
    assert.ok(lines.length >= 1);
    for (const l of lines) assert.ok(l.level === "warn" || l.level === "error", `only warn and error: ${JSON.stringify(l)}`);
    assert.ok(lines.some((l) => l.event === "webhook_failed"));
  });

  test("--log-level error with the access log: a clean run logs nothing", async () => {
    const child = await start(["--log-level", "error", "--access-log"]);
    await call(`${child.url}/v1/stream/e/a`, { method: "PUT", headers: { "content-type": "text/plain" } });
    assert.deepEqual(await child.stop(), { code: 0, signal: null });
    assert.equal(child.stderr, "");
  });

  test("--log-level debug is accepted and keeps info lines", async () => {
    const child = await start(["--log-level", "debug"]);
    assert.deepEqual(await child.stop(), { code: 0, signal: null });
    assert.match(child.stderr, / info ready: /);
  });

  test("--log-level debug logs each routing decision, the recovery steps and every log batch (records, bytes, sync time)", async () => {
    const dir = tempDir("runnel-logs-");
    const first = await start(["--log-level", "debug", "--log-format", "json"], { dataDir: dir });
    const u = `${first.url}/v1/stream/dbg/a`;
    assert.equal((await call(u, { method: "PUT", headers: { "content-type": "text/plain" } })).status, 201);
    assert.equal((await call(u, { method: "POST", headers: { "content-type": "text/plain" }, body: "0123456789" })).status, 204);
    assert.equal((await call(`${first.url}/dbgb/b?offset=-1&token=QUERYSECRET`)).status, 404);
    await first.stop("SIGKILL"); // the next start replays the log
    const a = jsonLines(first.stderr).filter((l) => l.level === "debug");
    const routes = a.filter((l) => l.event === "route").map((l) => l.msg);
    assert.ok(routes.includes("PUT /v1/stream/dbg/a -> v1 stream"), routes.join("\n"));
    assert.ok(routes.includes("POST /v1/stream/dbg/a -> v1 stream"), routes.join("\n"));
    assert.ok(routes.includes("GET /dbgb/b -> bucket stream"), routes.join("\n"));
    assert.ok(routes.includes("GET /__runnel/readyz -> operations (/__runnel/)"), routes.join("\n"));
    assert.ok(!first.stderr.includes("QUERYSECRET"), "no query string in a debug line");
    const batches = a.filter((l) => l.event === "wal_batch").map((l) => l.msg);
    assert.ok(batches.length >= 2, `a line per log batch: ${batches}`);
    for (const b of batches) assert.match(b, /^\d+ records, \d+ bytes, segment \d+, write and sync \d+ us$/);
    assert.ok(batches.some((b) => /^1 records, \d+ bytes/.test(b) && Number(/, (\d+) bytes/.exec(b)[1]) > 10), `the append's batch: ${batches}`);
    assert.ok(a.some((l) => l.event === "recovery" && /^no checkpoint; replaying the whole log$/.test(l.msg)));

    const second = await start(["--log-level", "debug", "--log-format", "json"], { dataDir: dir });
    assert.deepEqual(await second.stop(), { code: 0, signal: null });
    const rec = jsonLines(second.stderr).filter((l) => l.level === "debug" && l.event === "recovery").map((l) => l.msg);
    assert.ok(rec.some((m) => /^log segment 1 replayed: records end at byte \d+ of \d+$/.test(m)), rec.join("\n"));
    assert.ok(rec.some((m) => /^log replayed: 2 records, up to segment 1 byte \d+; 0 torn bytes cut$/.test(m)), rec.join("\n"));
    assert.ok(rec.some((m) => /^1 streams; new log segment 2 opened$/.test(m)), rec.join("\n"));
  });
});

describe("engine errors are log lines", () => {
  test("a failed checkpoint (its temporary file cannot be created) is a JSON error line", async () => {
    const dir = tempDir("runnel-logs-");
    // a directory where the checkpoint's temporary file goes: open() fails
    fs.mkdirSync(path.join(dir, "checkpoint.tmp"));
    const child = await start(["--log-format", "json", "--checkpoint-bytes", String(1 << 20)], { dataDir: dir });
    const u = `${child.url}/v1/stream/ck/a`;
    assert.equal((await call(u, { method: "PUT", headers: { "content-type": "application/octet-stream" } })).status, 201);
    for (let i = 0; i < 3; i++) {
      const r = await call(u, { method: "POST", headers: { "content-type": "application/octet-stream" }, body: Buffer.alloc(600 * 1024, 1) });
      assert.equal(r.status, 204);
    }
    const deadline = Date.now() + 5000;
    const failure = (text) => /checkpoint failed/.test(text);
    while (!failure(child.stderr) && Date.now() < deadline) await sleep(20);
    await child.stop("SIGKILL");
    const lines = jsonLines(child.stderr);
    const failed = lines.find((l) => failure(l.msg));
    assert.ok(failed, `the checkpoint failure is logged:\n${child.stderr}`);
    assert.equal(failed.level, "error");
    assert.match(failed.msg, /Is a directory/);
  });
});
