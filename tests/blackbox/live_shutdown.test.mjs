// Live reads at shutdown (docs/OPERATIONS.md: SIGTERM drains). When the
// server is told to stop, every live read still open is answered at once
// instead of at its timeout: a parked long-poll as if its wait were over
// (204, Stream-Up-To-Date, the tail as Stream-Next-Offset, a cursor), an
// SSE response ends after the events it was sent (no error event); and the
// server then exits 0 without a sanitizer report (its live-read registry is
// empty when it is freed). Readers on several streams and both surfaces.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Server } from "./lib/server.mjs";
import { openSse, put, req, sleep } from "./lib/bucket.mjs";

const OFF = (n) => `0000000000000000_${String(n).padStart(16, "0")}`;

async function liveReaders(server) {
  const r = await req(`${server.url}/__runnel/metrics`);
  const m = /^runnel_live_readers (\d+)$/m.exec(r.text);
  return m ? Number(m[1]) : -1;
}

test("SIGTERM answers parked long-polls and ends SSE responses at once, then exits 0", async () => {
  const server = new Server({ args: ["--long-poll-timeout-ms", "60000", "--shutdown-grace-ms", "10000"] });
  await server.start();
  try {
    const v1 = `${server.url}/v1/stream/shut/a`;
    const bucket = `${server.url}/shut/b`;
    for (const url of [v1, bucket]) assert.equal((await put(url, { body: "abc" })).status, 201);
    const polls = [
      req(`${v1}?offset=${OFF(3)}&live=long-poll`, { timeoutMs: 30000 }),
      req(`${v1}?offset=${OFF(3)}&live=long-poll&cursor=999999999`, { timeoutMs: 30000 }),
      req(`${bucket}?offset=${OFF(3)}&live=long-poll&timeout_ms=60000`, { timeoutMs: 30000 }),
    ];
    const sses = await Promise.all([
      openSse(`${v1}?offset=${OFF(0)}&live=sse`, { timeoutMs: 30000 }),
      openSse(`${bucket}?offset=${OFF(3)}&live=sse`, { timeoutMs: 30000 }),
    ]);
    for (const s of sses) assert.equal(s.status, 200);
    for (let i = 0; i < 500 && (await liveReaders(server)) !== 5; i++) await sleep(10);
    assert.equal(await liveReaders(server), 5, "5 live readers parked");

    const t0 = performance.now();
    const stopped = server.stop("SIGTERM");
    for (const r of await Promise.all(polls)) {
      assert.equal(r.status, 204, `a parked long-poll answers 204 at shutdown: ${r.status} ${r.text}`);
      assert.equal(r.headers.get("stream-up-to-date"), "true");
      assert.equal(r.headers.get("stream-next-offset"), OFF(3));
      assert.match(r.headers.get("stream-cursor") ?? "", /^\d+$/);
    }
    for (const s of sses) {
      assert.ok(await s.waitEnd(10000), "the SSE response ends at shutdown");
      assert.deepEqual(
        s.events.map((e) => e.type),
        s === sses[0] ? ["data", "control"] : ["control"],
        "the events before the end, and no error event",
      );
      assert.equal(s.controls.at(-1).streamNextOffset, OFF(3));
      assert.equal(s.controls.at(-1).upToDate, true);
    }
    assert.ok(performance.now() - t0 < 8000, "answered at shutdown, not at their timeouts");
    const { code, signal } = await stopped;
    assert.equal(signal, null, `exited by itself:\n${server.log}`);
    assert.equal(code, 0, `exit code 0:\n${server.log}`);
    assert.doesNotMatch(server.log, /Sanitizer|runtime error:|Assertion/, "no sanitizer report");
  } finally {
    await server.stop("SIGKILL");
  }
});
