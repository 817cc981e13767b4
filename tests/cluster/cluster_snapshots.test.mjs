// Cluster mode, black-box: published snapshots replicate. The body is
// written on the leader; every replica applies the PUBLISH and fetches the
// body from a peer, so a snapshot read and a bootstrap through any node
// answer the same bytes (a replica still fetching redirects to the
// leader). A node that was down during the publish fetches it once back.
// Both stores: a small body (the local snapshot store) and one of 1 MiB or
// more (the cold store).
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { after, before, describe, test } from "node:test";
import { Cluster, follow, req, waitFor } from "./runnel_cluster.mjs";

let c;

before(async () => {
  c = await Cluster.start({ groups: 1 });
});

after(() => {
  c.stopChecked();
});

async function publish(key, body) {
  const made = await follow(`${c.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" }, body: "abc" });
  assert.equal(made.status, 201, made.text);
  const at = made.headers.get("stream-next-offset");
  const r = await follow(`${c.url(1)}/${key}/snapshot/${encodeURIComponent(at)}`, {
    method: "PUT", headers: { "content-type": "application/octet-stream" }, body,
  });
  assert.equal(r.status, 204, r.text);
  return at;
}

// The snapshot as node n serves it locally, once it does (200).
async function servedBy(n, key, at) {
  return waitFor(`node ${n} to serve the snapshot of ${key}`, async () => {
    const r = await req(`${c.url(n)}/${key}/snapshot/${encodeURIComponent(at)}`);
    return r.status === 200 ? r : null;
  }, 30000);
}

describe("published snapshots on every replica", () => {
  for (const [what, size] of [["a small body", 1000], ["a cold body", 1536 * 1024]]) {
    test(`${what} is served by every node, byte for byte`, async () => {
      const key = `snapsh/${size}`;
      const body = crypto.randomBytes(size);
      const at = await publish(key, body);
      for (let n = 1; n <= 3; n++) {
        const r = await servedBy(n, key, at);
        assert.ok(r.body.equals(body), `node ${n} serves the body`);
        assert.equal(r.headers.get("stream-snapshot-offset"), at);
      }
      for (let n = 1; n <= 3; n++) {
        const b = await req(`${c.url(n)}/${key}/bootstrap`);
        assert.equal(b.status, 200, `bootstrap through node ${n}`);
        assert.ok(b.body.includes(body), `node ${n}'s bootstrap holds the snapshot`);
      }
    });
  }

  test("a node down during the publish fetches the body when it is back", async () => {
    const { node: leader } = await c.leaderOf(0);
    const down = leader === 3 ? 2 : 3;
    await c.converged();
    await c.crash(down);
    const key = "snapsh/late";
    const body = crypto.randomBytes(5000);
    const made = await follow(`${c.url(leader)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" }, body: "x" });
    const at = made.headers.get("stream-next-offset");
    const p = await follow(`${c.url(leader)}/${key}/snapshot/${encodeURIComponent(at)}`, {
      method: "PUT", headers: { "content-type": "application/octet-stream" }, body,
    });
    assert.equal(p.status, 204);
    await c.restart(down);
    const r = await servedBy(down, key, at);
    assert.ok(r.body.equals(body));
    assert.match(c.log(down), /snapshot body fetched/);
  });
});
