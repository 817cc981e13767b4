// Cluster mode over TLS (issue 17, item 3): nodes serving https on their
// --peer URLs reach each other through the outbound client (libcurl),
// trusting --tls-ca: every node learns its peers' applied indexes (polled
// from GET /__runnel/cluster/status over https), a write sent to any node
// is redirected (307 to an https leader URL) and applied, and every node
// reads it back. Requests go through curl, which takes the test CA per
// call. Without --tls-ca the peers' polls fail verification and their
// applied indexes stay unknown (null), which is what the first test would
// see.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { curlTls, makePki } from "../lib/tls.mjs";
import { Cluster, waitFor } from "./runnel_cluster.mjs";

const pki = makePki();
let cluster;

before(async () => {
  cluster = await Cluster.start({ nodes: 3, groups: 2, tls: pki.dir });
});
after(() => {
  assert.ok(cluster.stop(), "every node stopped cleanly");
});

const report = async (n) => JSON.parse((await curlTls(pki, `${cluster.url(n)}/__runnel/cluster`)).body);

test("the nodes are https and know each other's applied indexes (polled over https)", async () => {
  for (let n = 1; n <= 3; n++) assert.match(cluster.url(n), /^https:\/\/127\.0\.0\.1:\d+$/);
  for (let n = 1; n <= 3; n++) {
    await waitFor(`node ${n} to know every replica's applied index`, async () => {
      const r = await report(n);
      return r.groups.every((g) => g.replicas.every((x) => Number.isInteger(x.applied_index)));
    }, 15000);
  }
});

test("a write through any node reaches the leader by an https redirect and reads back everywhere", async () => {
  for (let n = 1; n <= 3; n++) {
    const url = `${cluster.url(n)}/v1/stream/tls/s${n}`;
    const created = await curlTls(pki, url, ["-L", "-X", "PUT", "-H", "content-type: text/plain"]);
    assert.equal(created.status, 201, `create through node ${n}`);
    const appended = await curlTls(pki, url, ["-L", "-X", "POST", "-H", "content-type: text/plain", "--data-binary", `via ${n}`]);
    assert.equal(appended.status, 204, `append through node ${n}`);
  }
  for (let n = 1; n <= 3; n++)
    for (let m = 1; m <= 3; m++)
      await waitFor(`node ${m} to read s${n}`, async () => {
        const r = await curlTls(pki, `${cluster.url(m)}/v1/stream/tls/s${n}?offset=-1`, ["-L"]);
        return r.status === 200 && r.body === `via ${n}`;
      }, 15000);
});

// A follower decides a write's redirect from its head, before the body
// comes. Over HTTP/2 (what curl chooses by ALPN) the body's few bytes are
// then still on their way: the stream must end cleanly under the client's
// upload. curl 7.88 failed about a third of these appends with "(92)
// Stream error in the HTTP/2 framing layer" while the stream was reset.
test("appends through a follower over HTTP/2 and HTTP/1.1 are redirected every time", async () => {
  const name = "tls/redirected";
  const created = await curlTls(pki, `${cluster.url(1)}/v1/stream/${name}`, ["-L", "-X", "PUT", "-H", "content-type: text/plain"]);
  assert.equal(created.status, 201);
  let follower = 0;
  for (let n = 1; n <= 3 && !follower; n++) {
    const probe = await curlTls(pki, `${cluster.url(n)}/v1/stream/${name}`, ["-X", "POST", "-H", "content-type: text/plain", "--data-binary", "p"]);
    if (probe.status === 307) follower = n;
  }
  assert.ok(follower, "no node redirected an append");
  for (const [flag, version] of [["--http2", "HTTP/2"], ["--http1.1", "HTTP/1.1"]])
    for (let i = 0; i < 30; i++) {
      const a = await curlTls(pki, `${cluster.url(follower)}/v1/stream/${name}`,
        [flag, "-X", "POST", "-H", "content-type: text/plain", "--data-binary", `append ${i}`]);
      assert.equal(a.status, 307, `append ${i} over ${version}`);
      assert.equal(a.version, version);
    }
});
