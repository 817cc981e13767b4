// Snapshots: the node's cap on parts commits copying at once.
// Covers extensions.txt §2.2's note ("A node copies at most two commits at
// once and answers another with 503 and Retry-After"), §11 (the code
// SNAPSHOT_COMMITS_BUSY, a 503) and §11.1 (it proves a refusal: nothing
// was copied or published, and the parts stay for the repeat). The copies
// are held with the test hook that makes the local store's copy of a
// commit wait 2 s (failure point copy-stall), so two commits are copying
// when the third arrives. About 5 s.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { assertError, head, req } from "./lib/bucket.mjs";
import { append, commit, createStream, snapshotDigest, stagePart, stopAndRemove } from "./lib/snap.mjs";

const OCTET = "application/octet-stream";
const server = new Server({ args: ["--test-hooks"] });
before(() => server.start());
after(async () => {
  const r = await server.stop();
  assert.equal(r?.code, 0, `graceful stop: ${JSON.stringify(r)}`);
  assert.ok(!/Sanitizer|runtime error/.test(server.log), `no sanitizer report:\n${server.logTail(40)}`);
});

// A stream with one staged part: what its commit needs.
async function staged(name, body) {
  const url = `${server.url}/busy/${name}`;
  await createStream(url, { type: OCTET });
  const tail = await append(url, Buffer.from("abc"), OCTET);
  const id = await stagePart(url, tail, body);
  return { url, tail, ids: [id], digest: snapshotDigest(OCTET, Buffer.from(body)) };
}

test("a third commit while two copy answers 503 SNAPSHOT_COMMITS_BUSY, and its repeat publishes", async () => {
  const s = await Promise.all(["a", "b", "c"].map((n) => staged(n, `body of ${n}`)));
  const armed = await req(`${server.url}/__runnel/test/fail?point=copy-stall&n=2`, { method: "POST" });
  assert.equal(armed.status, 204);
  const first = commit(s[0].url, s[0].tail, s[0].ids, s[0].digest);
  const second = commit(s[1].url, s[1].tail, s[1].ids, s[1].digest);
  await new Promise((r) => setTimeout(r, 300)); // both copies are under way (2 s each)
  const third = await commit(s[2].url, s[2].tail, s[2].ids, s[2].digest);
  assertError(third, 503, "SNAPSHOT_COMMITS_BUSY");
  assert.equal(third.headers.get("retry-after"), "1");
  assert.equal((await head(s[2].url)).headers.get("stream-snapshot-offset"), null, "nothing published");
  for (const r of await Promise.all([first, second]))
    assert.equal(r.status, 204, `a held commit answered ${r.status} ${r.text}`);
  // the refusal copied nothing and used no part up: the repeat publishes
  const again = await commit(s[2].url, s[2].tail, s[2].ids, s[2].digest);
  assert.equal(again.status, 204, `the repeat answered ${again.status} ${again.text}`);
  assert.equal((await head(s[2].url)).headers.get("stream-snapshot-digest"), s[2].digest);
});

test("two commits at once are both copied: the cap is two, not one", async () => {
  const s = await Promise.all(["d", "e"].map((n) => staged(n, `body of ${n}`)));
  const armed = await req(`${server.url}/__runnel/test/fail?point=copy-stall&n=2`, { method: "POST" });
  assert.equal(armed.status, 204);
  const answers = await Promise.all(s.map((x) => commit(x.url, x.tail, x.ids, x.digest)));
  for (const r of answers) assert.equal(r.status, 204, `a commit answered ${r.status} ${r.text}`);
});
