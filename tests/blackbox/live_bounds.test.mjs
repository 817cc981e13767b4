// The live-read bounds (--max-live-reads, --max-live-reads-per-stream)
// answer with the server's own code (extensions §11): a long-poll or SSE
// read past either answers 503 LIVE_READ_BACKPRESSURE with Retry-After and
// the stream's Stream-Incarnation, the message saying which bound. The
// per-stream bound answered 429 LIVE_READS_EXHAUSTED before, a code §11
// gives an intermediary (why the server's code: docs/PROTOCOL_SUPPORT.md).
// A long-poll that can answer at once is never refused.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Server, sleep } from "./lib/server.mjs";
import { assertError, get, post, put } from "./lib/bucket.mjs";

const server = new Server({ args: ["--max-live-reads", "3", "--max-live-reads-per-stream", "2", "--long-poll-timeout-ms", "3000"] });
before(() => server.start());
after(() => server.stop());

const url = (name) => `${server.url}/v1/stream/bounds/${name}`;
const longPoll = (name) => get(`${url(name)}?offset=now&live=long-poll`);

test("past the per-stream and the global bound: 503 LIVE_READ_BACKPRESSURE", async () => {
  for (const name of ["a", "b"]) assert.equal((await put(url(name), { body: "x" })).status, 201);
  const parked = [longPoll("a"), longPoll("a")];
  await sleep(300);
  const perStream = await longPoll("a");
  const body = assertError(perStream, 503, "LIVE_READ_BACKPRESSURE", { what: "a third long-poll of one stream" });
  assert.match(body.error.message, /stream/, "the message names the stream's bound");
  assert.ok(perStream.headers.get("retry-after"), "Retry-After");
  assert.ok(perStream.headers.get("stream-incarnation"), "Stream-Incarnation");
  const sse = await get(`${url("a")}?offset=-1&live=sse`);
  assertError(sse, 503, "LIVE_READ_BACKPRESSURE", { what: "an SSE read of the same stream" });
  parked.push(longPoll("b"));
  await sleep(300);
  const global = await longPoll("b");
  assertError(global, 503, "LIVE_READ_BACKPRESSURE", { what: "a fourth live read in all" });
  assert.ok(global.headers.get("retry-after"), "Retry-After");
  const atOnce = await get(`${url("a")}?offset=-1&live=long-poll`);
  assert.equal(atOnce.status, 200, "a long-poll that can answer at once is not refused");
  assert.equal((await post(url("a"), "wake")).status, 204);
  assert.equal((await post(url("b"), "wake")).status, 204);
  const woken = await Promise.all(parked);
  assert.deepEqual(woken.map((r) => `${r.status} ${r.text}`), ["200 wake", "200 wake", "200 wake"]);
});
