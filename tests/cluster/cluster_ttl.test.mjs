// TTL windows decided cluster-wide (issue 27, item 5): a stream read only
// on a follower stays alive on the leader, which expires streams.
//
// WHAT IT PROVES
//   - A stream with a 2 s Stream-TTL, read on a follower every 500 ms for
//     6 s (three windows), is never expired: the follower's reads renew
//     the leader's window (they reach it with the follower's status poll,
//     once a second). HEAD does not renew, so the leader's HEADs prove
//     nothing else renewed it.
//   - A stream nobody reads expires after its window, and the first one
//     too, once its reads stop, on every replica.
// About 15 s.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Cluster, req, sleep, waitFor } from "./runnel_cluster.mjs";

const OCTET = "application/octet-stream";
let c;
before(async () => {
  c = await Cluster.start({ groups: 1, args: ["--expiry-sweep-ms", "100"] });
});
after(() => c.stopChecked());

async function ttlStream(url) {
  const r = await req(url, { method: "PUT", headers: { "content-type": OCTET, "stream-ttl": "2" }, body: "abc" });
  assert.equal(r.status, 201, r.text);
}

describe("TTL windows decided cluster-wide", () => {
  test("reads on a follower renew the leader's window; an unread stream expires", async () => {
    const leader = (await c.leaderOf(0)).node;
    const follower = leader % 3 + 1;
    const read = `${c.url(leader)}/ttlc/read-elsewhere`, unread = `${c.url(leader)}/ttlc/unread`;
    await ttlStream(read);
    await ttlStream(unread);
    const end = Date.now() + 6000;
    while (Date.now() < end) {
      const r = await req(`${c.url(follower)}/ttlc/read-elsewhere?offset=-1`);
      assert.equal(r.status, 200, `read on follower ${follower}: ${r.status} ${r.text}`);
      assert.equal((await req(read, { method: "HEAD" })).status, 200, "alive on the leader");
      await sleep(500);
    }
    assert.equal((await req(unread, { method: "HEAD" })).status, 404, "the unread stream expired");
    await waitFor("the first stream expired once its reads stopped", async () => {
      for (let n = 1; n <= 3; n++)
        if ((await req(`${c.url(n)}/ttlc/read-elsewhere`, { method: "HEAD" })).status !== 404) return false;
      return true;
    }, 10000, 200);
  });
});
