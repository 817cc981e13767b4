// Operations: the listen address (issue 13, the first hour). `--listen
// HOST:PORT` takes a host name as well as an IP literal: the name is
// resolved and the server listens on the addresses it names (localhost:
// the loopback ones). Listening on an address other hosts can reach, with
// no access control in Runnel, logs a warning at start that names the
// address and says what anyone reaching it can do; loopback addresses log
// none.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { tempDir } from "./lib/server.mjs";
import { freePort, rawGet, sleep, spawnServe, waitReady } from "./lib/ops.mjs";

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

  test("an address other hosts can reach logs a warning at start naming it and what is exposed", async () => {
    // Bound to every interface only until it logs that it is ready; it is
    // stopped at once.
    const port = await freePort();
    const child = spawnServe(["--listen", `0.0.0.0:${port}`, "--data-dir", tempDir(), "--log-format", "json"]);
    try {
      await loggedReady(child);
    } finally {
      await child.stop();
    }
    const warnings = exposureWarnings(child);
    assert.equal(warnings.length, 1, child.stderr);
    const msg = warnings[0].msg;
    assert.equal(warnings[0].event, "start");
    assert.ok(msg.includes(`0.0.0.0:${port}`), `names the address: ${msg}`);
    for (const what of ["read", "append", "delete", "every stream"]) assert.ok(msg.includes(what), `says anyone can ${what}: ${msg}`);
  });
});
