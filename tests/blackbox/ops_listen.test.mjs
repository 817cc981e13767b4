// Operations: the listen address (issue 13, the first hour). `--listen
// HOST:PORT` takes a host name as well as an IP literal: the name is
// resolved and the server listens on the addresses it names (localhost:
// the loopback ones). Listening on an address other hosts can reach, with
// no access control in Runnel, logs a warning at start that names the
// address and says what anyone reaching it can do; loopback addresses log
// none. `--peer-listen` (issue 24) on a single node: operator routes
// answer 404 on --listen and are served (with the token) on the peer
// listener, which answers stream routes 404; health answers on both; an
// embedded gate (--tenants) judges the public listener only.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { tempDir } from "./lib/server.mjs";
import { freePort, rawGet, runCli, sleep, spawnServe, waitReady } from "./lib/ops.mjs";

// The JSON log lines of a child so far.
const logLines = (child) =>
  child.stderr
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));

const exposureWarnings = (child) => logLines(child).filter((l) => l.level === "warn" && /access control/.test(l.msg));

// Waits (bounded) until the child logged that it is ready. Lines arrive in
// order on one pipe, so every start warning has arrived by then.
async function loggedReady(child) {
  const deadline = Date.now() + 10000;
  while (!logLines(child).some((l) => l.event === "ready") && Date.now() < deadline) await sleep(20);
  assert.ok(logLines(child).some((l) => l.event === "ready"), `the server logged ready: ${child.stderr}`);
}

// Starts a server on host, creates a stream through connectHost, stops it.
async function served(host, connectHost = host) {
  const port = await freePort();
  const child = spawnServe(["--listen", `${host}:${port}`, "--data-dir", tempDir(), "--log-format", "json"]);
  try {
    await waitReady(`http://${connectHost}:${port}`);
    const r = await rawGet(`http://${connectHost}:${port}/v1/stream/listen/a`, { method: "PUT" });
    assert.equal(r.status, 201);
    await loggedReady(child);
  } finally {
    await child.stop();
  }
  return child;
}

describe("--listen", () => {
  test("a host name is resolved: --listen localhost:PORT serves on the loopback address", async () => {
    const child = await served("localhost", "127.0.0.1");
    assert.deepEqual(exposureWarnings(child), [], child.stderr);
  });

  test("loopback literals start without a warning", async () => {
    for (const host of ["127.0.0.1", "127.0.0.2"]) {
      const child = await served(host);
      assert.deepEqual(exposureWarnings(child), [], child.stderr);
    }
  });

  // Bound to every interface only until it logs that it is ready; it is
  // stopped at once. Returns its one exposure warning.
  async function exposedWarning(args = []) {
    const port = await freePort();
    const dir = tempDir();
    const child = spawnServe(["--listen", `0.0.0.0:${port}`, "--data-dir", path.join(dir, "data"), "--log-format", "json",
      ...args]);
    try {
      await loggedReady(child);
    } finally {
      await child.stop();
    }
    const warnings = exposureWarnings(child);
    assert.equal(warnings.length, 1, child.stderr);
    assert.equal(warnings[0].event, "start");
    assert.ok(warnings[0].msg.includes(`0.0.0.0:${port}`), `names the address: ${warnings[0].msg}`);
    return warnings[0].msg;
  }

  test("an address other hosts can reach logs a warning at start naming it and what is exposed", async () => {
    const msg = await exposedWarning();
    for (const what of ["read", "append", "delete", "every stream", "operator route", "purge a bucket"])
      assert.ok(msg.includes(what), `says anyone can ${what}: ${msg}`);
  });

  test("with --admin-token-file the warning leaves the operator routes out", async () => {
    const dir = tempDir();
    const token = path.join(dir, "admin.token");
    fs.writeFileSync(token, "an-admin-token-of-enough-bytes", { mode: 0o600 });
    const msg = await exposedWarning(["--admin-token-file", token]);
    assert.ok(msg.includes("every stream"), msg);
    assert.ok(!msg.includes("operator route"), `the operator routes need the token: ${msg}`);
  });
});

describe("--peer-listen", () => {
  test("operator routes on the peer listener only, stream routes on --listen only", async () => {
    const [port, peerPort] = [await freePort(), await freePort()];
    const dir = tempDir();
    const token = path.join(dir, "admin.token");
    fs.writeFileSync(token, "an-admin-token-of-enough-bytes", { mode: 0o600 });
    const child = spawnServe(["--listen", `127.0.0.1:${port}`, "--peer-listen", `127.0.0.1:${peerPort}`,
      "--data-dir", path.join(dir, "data"), "--admin-token-file", token, "--metrics-need-token", "--log-format", "json"]);
    const pub = `http://127.0.0.1:${port}`, peer = `http://127.0.0.1:${peerPort}`;
    const auth = { authorization: "Bearer an-admin-token-of-enough-bytes" };
    const code = (r) => JSON.parse(r.text).error.code;
    try {
      await waitReady(pub);
      for (const base of [pub, peer]) assert.equal((await rawGet(`${base}/__runnel/livez`)).status, 200, base);
      for (const p of ["/__runnel/backup?name=x", "/__runnel/metrics"]) {
        const method = p.includes("backup") ? "POST" : "GET";
        const r = await rawGet(pub + p, { method, headers: auth });
        assert.deepEqual([r.status, code(r)], [404, "NOT_FOUND"], `${p} on --listen: ${r.text}`);
        assert.equal((await rawGet(peer + p, { method })).status, 401, `${p} on the peer listener without the token`);
      }
      const backup = await rawGet(`${peer}/__runnel/backup?name=x`, { method: "POST", headers: auth });
      assert.deepEqual([backup.status, code(backup)], [501, "NO_BACKUP_TARGET"]);
      assert.equal((await rawGet(`${peer}/__runnel/metrics`, { headers: auth })).status, 200);
      assert.equal((await rawGet(`${pub}/v1/stream/listen/b`, { method: "PUT" })).status, 201);
      const onPeer = await rawGet(`${peer}/v1/stream/listen/b`);
      assert.deepEqual([onPeer.status, code(onPeer)], [404, "NOT_FOUND"]);
      assert.match(JSON.parse(onPeer.text).error.message, /public listener/);
    } finally {
      await child.stop();
    }
  });

  test("an embedded gate guards --listen, not the peer listener", async () => {
    const [port, peerPort] = [await freePort(), await freePort()];
    const dir = tempDir();
    const token = path.join(dir, "admin.token"), tenants = path.join(dir, "tenants.json");
    fs.writeFileSync(token, "an-admin-token-of-enough-bytes", { mode: 0o600 });
    const key = runCli(["gateway", "key", "new", "--tenant", "acme", "--buckets", "orders:rw", "--tenants", tenants]);
    assert.equal(key.code, 0, key.stderr);
    const child = spawnServe(["--listen", `127.0.0.1:${port}`, "--peer-listen", `127.0.0.1:${peerPort}`,
      "--data-dir", path.join(dir, "data"), "--admin-token-file", token, "--tenants", tenants]);
    const auth = { authorization: "Bearer an-admin-token-of-enough-bytes" };
    try {
      await waitReady(`http://127.0.0.1:${port}`);
      const gated = await rawGet(`http://127.0.0.1:${port}/orders/o-1`, { method: "PUT", headers: auth });
      assert.equal(gated.status, 401, `the gate judges --listen: ${gated.text}`);
      const backup = await rawGet(`http://127.0.0.1:${peerPort}/__runnel/backup?name=x`, { method: "POST", headers: auth });
      assert.deepEqual([backup.status, JSON.parse(backup.text).error.code], [501, "NO_BACKUP_TARGET"], backup.text);
    } finally {
      await child.stop();
    }
  });
});
