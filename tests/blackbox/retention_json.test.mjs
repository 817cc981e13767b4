// Retention of a JSON stream at a message boundary (issue 13, item 1).
// Covers extensions.txt §2.1 (the same message boundaries for snapshot and
// retention offsets), §2.2 (a repeat of a publish succeeds with the same
// digest while the snapshot is the latest; a retention boundary at or below
// the retained offset succeeds) and §2.4 (reads at the retained offset are
// served): once retention cleared the bytes below X, X is still known to be
// a message boundary, so a repeat of the publish at X, a retention repeat, a
// v1 read starting at X and a fork at X succeed, also after a restart
// (checkpoint, and log replay after SIGKILL).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { get, put, req } from "./lib/bucket.mjs";
import { append, createStream, enc, h, offsetAfter, publish, publishOk, stopAndRemove } from "./lib/snap.mjs";

const JSON_TYPE = "application/json";
const server = new Server();
before(() => server.start());
after(() => stopAndRemove(server));

let n = 0;
const retain = (url, offset) => req(`${url}/retention/${enc(offset)}`, { method: "PUT" });

// A JSON stream of three messages, a snapshot at X (after the first two) and
// retention advanced to X. Returns the bucket and v1 URLs, X and the digest.
async function retainedAtSnapshot() {
  const key = `rjson/s${++n}`;
  const url = `${server.url}/${key}`;
  await createStream(url, { type: JSON_TYPE, body: '{"m":1}' });
  await append(url, '{"m":2}', JSON_TYPE);
  await append(url, '{"m":3}', JSON_TYPE);
  const x = await offsetAfter(url, '{"m":1}\n{"m":2}\n'.length);
  const digest = await publishOk(url, x, "state-after-two", { type: "text/plain" });
  const r = await retain(url, x);
  assert.equal(r.status, 204, `retention at X answered ${r.status} ${r.text}`);
  assert.equal(h(r, "stream-retained-offset"), x);
  return { key, url, v1: server.stream(key), x, digest };
}

// What must hold at X once retention cleared the bytes below it.
const checks = {
  "the repeat of the publish at X succeeds with the same digest": async ({ url, x, digest }) => {
    const r = await publish(url, x, "state-after-two", { type: "text/plain" });
    assert.equal(r.status, 204, `the repeat of the publish at X answered ${r.status} ${r.text}`);
    assert.equal(h(r, "stream-snapshot-digest"), digest, "the repeat returns the same digest");
  },
  "a retention repeat at X succeeds": async ({ url, x }) => {
    const r = await retain(url, x);
    assert.equal(r.status, 204, `a retention repeat at X answered ${r.status} ${r.text}`);
    assert.equal(h(r, "stream-retained-offset"), x);
  },
  "a v1 read at X answers the messages from X": async ({ v1, x }) => {
    const r = await get(`${v1}?offset=${enc(x)}`);
    assert.equal(r.status, 200, `a v1 read at X answered ${r.status} ${r.text}`);
    assert.deepEqual(JSON.parse(r.text), [{ m: 3 }]);
  },
  "a bucket read at X answers the messages from X": async ({ url, x }) => {
    const r = await get(`${url}?offset=${enc(x)}`);
    assert.equal(r.status, 200, `a bucket read at X answered ${r.status} ${r.text}`);
    assert.equal(r.text, '{"m":3}\n');
  },
  "a fork at X is created and reads from X": async ({ key, x }) => {
    const fork = server.stream(`rjson/fork${++n}`);
    const f = await put(fork, { type: JSON_TYPE, headers: { "stream-forked-from": `/v1/stream/${key}`, "stream-fork-offset": x } });
    assert.equal(f.status, 201, `a fork at X answered ${f.status} ${f.text}`);
    const r = await get(`${fork}?offset=${enc(x)}`);
    assert.equal(r.status, 200, `a read of the fork at X answered ${r.status} ${r.text}`);
    assert.deepEqual(JSON.parse(r.text), [], "the fork holds nothing past X");
  },
};

describe("§2.2 a JSON stream retained at its snapshot offset X", () => {
  for (const [what, check] of Object.entries(checks)) test(what, async () => check(await retainedAtSnapshot()));

  test("an offset inside a message above X is still refused", async () => {
    const { url, v1, x } = await retainedAtSnapshot();
    const inside = await offsetAfter(url, 3, x);
    const r = await publish(url, inside, "bad");
    assert.equal(r.status, 400, `publish inside a message answered ${r.status}`);
    assert.equal(JSON.parse(r.text).error.code, "NOT_JSON_BOUNDARY");
    assert.equal((await get(`${v1}?offset=${enc(inside)}`)).status, 400, "a v1 read inside a message is refused");
  });

  for (const signal of ["SIGTERM", "SIGKILL"]) {
    test(`after a ${signal} restart (${signal === "SIGTERM" ? "checkpoint" : "log replay"}) the same holds`, async (t) => {
      const streams = [];
      for (let i = 0; i < Object.keys(checks).length; i++) streams.push(await retainedAtSnapshot());
      await server.restart(signal);
      for (const [i, [what, check]] of Object.entries(checks).entries()) await t.test(what, () => check(streams[i]));
    });
  }
});
