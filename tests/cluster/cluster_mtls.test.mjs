// Cluster mode, black-box: mutual TLS between the nodes and a separate peer
// listener (issue 24). A 3-node cluster started by scripts/cluster.sh with
// --peer-tls (node N's certificate names it as runnel-node:N, from the test
// CA of tests/lib/test_pki.sh) and --peer-listen:
// - it works: writes through any node, a group's leader SIGKILLed and
//   writes acknowledged again through the others, the killed node restarted
//   and caught up (every stream equal on every node);
// - peer and operator routes answer 404 on the public listener; on the
//   peer listener a peer route answers 401 without a client certificate,
//   403 with another CA's, with one naming no node or naming the node
//   asked, and 200 with another node's; an operator route there still
//   needs the admin token; stream routes answer 404 there;
// - a rogue on a Raft port is refused and counted: in plain text (its
//   AppendEntries and RequestVote of term 1000 answered with a refusal
//   naming the mode), over TLS without a certificate, with another CA's,
//   and with node 2's certificate claiming to be node 3 (refused naming
//   cert_id); no term, leader or datum changes;
// - a node with another CA's certificate cannot join, and both its log and
//   the log of the leader adding it say why;
// - SIGHUP reads a node's peer certificate again: new Raft port
//   connections get the renewed one; an unreadable one is refused with a
//   log line and the previous one stays.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import crypto from "node:crypto";
import https from "node:https";
import tls from "node:tls";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { tempDir } from "../blackbox/lib/server.mjs";
import { appendEntries, assertUnchanged, clusterState, hello, refusal, refusedCount, requestVote, rogue } from "./raft_wire.mjs";
import { Cluster, follow, groupOf, req, sleep, waitFor } from "./runnel_cluster.mjs";

const GROUPS = 2;
const HERE = path.dirname(fileURLToPath(import.meta.url));
const pki = tempDir("runnel-mtls-pki-");
const pem = (name) => fs.readFileSync(path.join(pki, name));
let c;

before(async () => {
  execFileSync("bash", [path.join(HERE, "../lib/test_pki.sh"), pki]);
  c = await Cluster.start({ groups: GROUPS, peerTls: pki, peerListen: true });
});

after(() => {
  c?.stopChecked();
});

// One https request to a peer listener, presenting the named certificate
// (tests/lib/test_pki.sh's NAME.pem and NAME.key) or none.
function peerReq(url, { method = "GET", cert = null, headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const r = https.request(url, {
      method, headers, ca: pem("ca.pem"), agent: false,
      ...(cert ? { cert: pem(`${cert}.pem`), key: pem(`${cert}.key`) } : {}),
    }, (res) => {
      const parts = [];
      res.on("data", (d) => parts.push(d));
      res.on("end", () => {
        const text = Buffer.concat(parts).toString("utf8");
        resolve({ status: res.statusCode, text, code: /^\{/.test(text) ? JSON.parse(text).error?.code : undefined });
      });
    });
    r.on("error", reject);
    r.end();
  });
}

const streams = Array.from({ length: 8 }, (_, i) => `mtls/s${i}`);

async function readEverywhere(stream) {
  const out = [];
  for (let n = 1; n <= 3; n++) out.push((await follow(`${c.url(n)}/${stream}?offset=-1`)).text);
  return out;
}

describe("a cluster under mutual TLS", () => {
  test("writes, a leader killed, the node restarted and caught up", async () => {
    assert.equal((await c.report(1)).peer_auth, "certificates");
    for (const s of streams) {
      assert.equal((await follow(`${c.url(1)}/${s}`, { method: "PUT", headers: { "content-type": "text/plain" } })).status, 201);
      assert.equal((await follow(`${c.url(2)}/${s}`, { method: "POST", headers: { "content-type": "text/plain" }, body: "a" })).status, 204);
    }
    const { node: dead } = await c.leaderOf(groupOf(streams[0], GROUPS));
    await c.crash(dead);
    const live = dead === 1 ? 2 : 1;
    const once = { "content-type": "text/plain", "producer-id": "p", "producer-epoch": "0", "producer-seq": "0" };
    for (const s of streams) /* a producer's write: a retry after an unknown outcome applies once */
      await waitFor(`an append to ${s} without node ${dead}`, async () =>
        [200, 204].includes((await follow(`${c.url(live)}/${s}`, { method: "POST", headers: once, body: "b" })).status),
      20000, 250);
    await c.restart(dead);
    await c.converged();
    for (const s of streams) assert.deepEqual(await readEverywhere(s), ["ab", "ab", "ab"], s);
  });
});

describe("the peer listener", () => {
  test("peer and operator routes: 404 on the public listener, checked on the peer listener", async () => {
    const refusedBefore = await refusedCount(c.url(1), "http");
    const publicOnes = [["GET", "/__runnel/cluster/status"], ["GET", "/__runnel/cluster/read-index?group=0"],
      ["POST", "/__runnel/backup?name=x"], ["DELETE", "/__runnel/cluster/members/3"]];
    for (const [method, target] of publicOnes) {
      const r = await req(c.url(1) + target, { method, headers: c.admin });
      assert.equal(r.status, 404, `${method} ${target}: ${r.text}`);
      assert.equal(JSON.parse(r.text).error.code, "NOT_FOUND");
    }
    for (const p of ["/__runnel/cluster", "/__runnel/livez", "/__runnel/readyz", "/__runnel/metrics"])
      assert.equal((await req(c.url(1) + p)).status, 200, p);
    const applied = `${c.peerUrl(1)}/__runnel/cluster/status`; /* what peers poll */
    const none = await peerReq(applied);
    assert.deepEqual([none.status, none.code], [401, "INVALID_CREDENTIAL"]);
    for (const cert of ["rogue-4", "peer-none", "peer-1"]) { /* another CA's; no node; node 1's own, at node 1 */
      const r = await peerReq(applied, { cert });
      assert.deepEqual([r.status, r.code], [403, "FORBIDDEN"], `${cert}: ${r.text}`);
    }
    const ok = await peerReq(applied, { cert: "peer-2" });
    assert.equal(ok.status, 200);
    const st = JSON.parse(ok.text);
    assert.equal(st.node, 1);
    assert.match(st.incarnation, /^incarnation [0-9a-f]{16}$/);
    assert.equal(await refusedCount(c.url(1), "http"), refusedBefore + 4);
    // an operator route on the peer listener still needs the token
    const backup = `${c.peerUrl(1)}/__runnel/backup?name=x`;
    assert.equal((await peerReq(backup, { method: "POST" })).status, 401);
    const withToken = await peerReq(backup, { method: "POST", headers: c.admin });
    assert.deepEqual([withToken.status, withToken.code], [501, "NO_BACKUP_TARGET"]);
    // streams are not served there
    const stream = await peerReq(`${c.peerUrl(1)}/${streams[0]}?offset=-1`, { cert: "peer-2" });
    assert.deepEqual([stream.status, stream.code], [404, "NOT_FOUND"]);
  });
});

describe("a rogue peer on the Raft port", () => {
  test("refused in plain text, without a certificate, with another CA's, or claiming another node", async () => {
    const e = c.env();
    const port = Number(e.RAFT_PORT_1);
    const before = await clusterState(c);
    const refusedBefore = await refusedCount(c.url(1), "raft");
    const msgs = [requestVote(1000, 2), appendEntries(1000)];
    const h = (g, sender, auth) => hello({ group: g, sender, clusterId: c.clusterId, address: `127.0.0.1:${e[`RAFT_PORT_${sender}`]}`, auth });
    const ca = pem("ca.pem");
    for (let g = 0; g < GROUPS; g++) {
      assert.equal(refusal(await rogue(port, h(g, 2, 0), msgs)), "mode", "plain text");
      assert.equal((await rogue(port, h(g, 2, 2), msgs, { tls: { ca } })).length, 0, "no certificate");
      assert.equal((await rogue(port, h(g, 2, 2), msgs, { tls: { ca, cert: pem("rogue-4.pem"), key: pem("rogue-4.key") } })).length, 0,
        "another CA's certificate");
      const claim = await rogue(port, h(g, 3, 2), msgs, { tls: { ca, cert: pem("peer-2.pem"), key: pem("peer-2.key") } });
      assert.equal(refusal(claim), "cert_id", "node 2's certificate claiming node 3");
    }
    assert.ok(await refusedCount(c.url(1), "raft") >= refusedBefore + 4 * GROUPS);
    await sleep(3000);
    await assertUnchanged(c, before, GROUPS);
    assert.match(c.log(1), /raft connection claiming node 3 \(its certificate names node 2\) refused \(cert_id\)/);
    for (const s of streams) assert.deepEqual(await readEverywhere(s), ["ab", "ab", "ab"], s);
  });
});

// The serial number of the certificate node n's Raft port presents.
function raftCertSerial(n) {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ port: Number(c.env()[`RAFT_PORT_${n}`]), host: "127.0.0.1", ca: pem("ca.pem"),
      cert: pem("peer-2.pem"), key: pem("peer-2.key"), checkServerIdentity: () => undefined });
    s.on("secureConnect", () => { resolve(s.getPeerCertificate().serialNumber); s.destroy(); });
    s.on("error", reject);
  });
}

describe("renewing a peer certificate", () => {
  test("SIGHUP: new connections get the new one; an unreadable one changes nothing", async () => {
    const serial = (name) => new crypto.X509Certificate(pem(name)).serialNumber;
    assert.equal(await raftCertSerial(3), serial("peer-3.pem"));
    for (const ext of ["pem", "key"]) fs.copyFileSync(path.join(pki, `peer-3-next.${ext}`), path.join(pki, `peer-3.${ext}`));
    c.kill(3, "SIGHUP");
    await waitFor("node 3 to reload", () => /peer certificate, key and CA reloaded/.test(c.log(3)), 10000);
    assert.equal(await raftCertSerial(3), serial("peer-3-next.pem"));
    fs.writeFileSync(path.join(pki, "peer-3.pem"), "not a certificate\n");
    c.kill(3, "SIGHUP");
    await waitFor("node 3 to refuse the reload", () => /peer certificate not reloaded, the previous one stays/.test(c.log(3)), 10000);
    assert.equal(await raftCertSerial(3), serial("peer-3-next.pem"));
    fs.copyFileSync(path.join(pki, "peer-3-next.pem"), path.join(pki, "peer-3.pem"));
    const s = streams[1];
    assert.equal((await follow(`${c.url(3)}/${s}`, { method: "POST", headers: { "content-type": "text/plain" }, body: "c" })).status, 204);
    await c.converged();
    assert.deepEqual(await readEverywhere(s), ["abc", "abc", "abc"]);
  });
});

describe("a node with another CA's certificate", () => {
  test("cannot join, and says why in its log", async () => {
    const four = await c.addNode(4, ["--peer-cert", path.join(pki, "rogue-4.pem"), "--peer-key",
      path.join(pki, "rogue-4.key"), "--peer-ca", path.join(pki, "rogue-ca.pem")]);
    const add = await peerReq(`${c.peerUrl(1)}/__runnel/cluster/members?${four.query}`, { method: "POST", headers: c.admin });
    assert.equal(add.status, 202, add.text);
    await waitFor("node 4 and a leader to log why", () => /ended its raft connection during TLS \(tlsv1 alert unknown ca\)/.test(c.log(4)) &&
      [1, 2, 3].some((n) => /raft connection to node 4 refused \(untrusted_cert\)/.test(c.log(n))), 15000);
    await sleep(3000);
    for (const g of (await c.report(1)).groups)
      assert.ok(!g.replicas.some((r) => r.node === 4 && r.role === "voter"), "node 4 is no voter");
    assert.ok((await req(`${four.url}/__runnel/readyz`)).status !== 200, "node 4 is not ready");
  });
});
