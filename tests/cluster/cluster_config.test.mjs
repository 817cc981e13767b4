// Cluster mode's settings, black-box: each bad combination refused with a
// message naming it (exit 2, nothing started), the config file's repeated
// peer key, the peer certificates a node refuses to start with (exit 1: a
// certificate of another node, of another CA, naming no node), and the
// data directory's marker: a node refuses to start with another cluster id,
// node id or group count than it was created with, and a cluster node's
// directory refuses a single-node start.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { freePort, tempDir } from "../blackbox/lib/server.mjs";
import { BIN, sleep } from "./runnel_cluster.mjs";

function serve(args, env = {}) {
  return spawnSync(BIN, ["serve", ...args], {
    encoding: "utf8",
    timeout: 20000,
    env: { ...process.env, ...env },
  });
}

const peers = ["--peer", "1=127.0.0.1:7001,http://127.0.0.1:8001", "--peer", "2=127.0.0.1:7002,http://127.0.0.1:8002"];
const httpsPeers = ["--peer", "1=127.0.0.1:7001,https://127.0.0.1:8001", "--peer", "2=127.0.0.1:7002,https://127.0.0.1:8002"];
const certs = ["--peer-cert", "/x/c.pem", "--peer-key", "/x/k.pem", "--peer-ca", "/x/ca.pem"];
const cluster = ["--node-id", "1", "--cluster-id", "c"];

describe("refused settings (exit 2, a message naming them)", () => {
  const cases = [
    [["--peer", "1=127.0.0.1:7001,http://127.0.0.1:8001"], /--peer needs --node-id/],
    [["--node-id", "1", ...peers], /--cluster-id is required in cluster mode/],
    [["--node-id", "3", "--cluster-id", "c", ...peers], /--peer must list every node of the cluster, this one \(--node-id 3\) included/],
    [["--node-id", "1", "--cluster-id", "c", "--peer", "1=localhost:7001,http://127.0.0.1:8001"], /--peer 1: RAFTADDR must be a numeric/],
    [["--node-id", "1", "--cluster-id", "c", ...peers, "--peer", "2=127.0.0.1:7003,http://127.0.0.1:8003"], /--peer 2 and --peer 2 have the same id/],
    [["--node-id", "1", "--cluster-id", "c", ...peers, "--peer", "3=127.0.0.1:7002,http://127.0.0.1:8003"], /same Raft address/],
    [["--node-id", "1", "--cluster-id", "c", ...peers, "--peer", "3=127.0.0.1:7003,http://127.0.0.1:8002"], /same URL/],
    [["--node-id", "256"], /node-id must be an integer from 0 to 255/],
    [["--node-id", "1", "--cluster-id", "c", "--peer", "1=127.0.0.1:7001"], /peer must be N=RAFTADDR,URL/],
    [["--node-id", "1", "--cluster-id", "c", "--peer", "0=127.0.0.1:7001,http://x:1"], /N from 1 to 255/],
    [["--node-id", "1", "--cluster-id", "c", "--peer", "1=127.0.0.1:7001,ftp://x"], /URL must be an http/],
    [["--node-id", "1", "--cluster-id", "c", ...peers, "--groups", "0"], /groups must be an integer from 1 to 256/],
    [["--node-id", "1", "--cluster-id", "c", ...peers, "--groups", "257"], /groups must be an integer from 1 to 256/],
    [["--node-id", "1", "--cluster-id", "c", ...peers, "--election-timeout-ms", "10"], /election-timeout-ms must be an integer from 50/],
    [["--node-id", "1", "--cluster-id", "bad id!", ...peers], /--cluster-id must be 1 to 64 characters/],
    // the single-node feature cluster mode refuses, and tiering over a store only one node has
    [["--node-id", "1", "--cluster-id", "c", ...peers, "--accept-loss", "segment-1"],
      /--accept-loss in cluster mode names the groups that lost their majority.*group-N \(N below --groups 16\) or meta/],
    [["--node-id", "1", "--cluster-id", "c", ...peers, "--accept-loss", "group-16"],
      /--accept-loss in cluster mode names the groups.*\(got "group-16"\)/],
    [["--node-id", "1", "--cluster-id", "c", ...peers, "--replicas", "8"], /--replicas/],
    [["--node-id", "1", "--cluster-id", "c", ...peers, "--cold-store=true", "--hot-bytes", "67108864"],
      /--hot-bytes \(history tiering\) in cluster mode \(--node-id\) needs --cold-store=s3/],
    [["--cluster-key-file", "/x/key"], /--cluster-key-file needs --node-id/],
    [certs, /--peer-cert needs --node-id/],
    [[...cluster, ...httpsPeers, "--peer-cert", "/x/c.pem", "--peer-ca", "/x/ca.pem"], /--peer-cert, --peer-key and --peer-ca go together \(--peer-key is missing\)/],
    [[...cluster, ...httpsPeers, ...certs, "--cluster-key-file", "/x/key", "--tls-cert", "/x/t", "--tls-key", "/x/t"],
      /--peer-cert and --cluster-key-file are two ways of authenticating peers: choose one/],
    [[...cluster, ...httpsPeers, ...certs], /peer requests carry the node's certificate, so they need TLS: --tls-cert, or a --peer-listen/],
    [[...cluster, ...peers, ...certs, "--tls-cert", "/x/t", "--tls-key", "/x/t"], /--peer 1: with --peer-cert, peer requests go over TLS: its URL must be https/],
    [[...cluster, "--peer", "1=127.0.0.1:7001,http://127.0.0.1:8001,http://127.0.0.1:9001", "--peer-listen", "127.0.0.1:9001", ...certs],
      /--peer 1: with --peer-cert, peer requests go over TLS: its PEERURL must be https/],
    [[...cluster, ...peers, "--peer-listen", "127.0.0.1:9001"], /--peer-listen: this node's --peer 1 must name its peer listener's URL/],
    [[...cluster, "--peer", "1=127.0.0.1:7001,http://127.0.0.1:8001,http://127.0.0.1:9001", "--peer", "2=127.0.0.1:7002,http://127.0.0.1:8002,http://127.0.0.1:9001"],
      /--peer 1 and --peer 2 have the same PEERURL/],
    [[...cluster, "--peer", "1=127.0.0.1:7001,http://127.0.0.1:8001,ftp://x"], /peer 1: PEERURL must be an http/],
    [["--peer-listen", "nope"], /peer-listen must be HOST:PORT/],
  ];
  for (const [args, message] of cases) {
    test(args.join(" "), () => {
      const r = serve(["--data-dir", tempDir(), "--listen", "127.0.0.1:0", ...args]);
      assert.notEqual(r.status, 0);
      assert.match(r.stderr + r.stdout, message);
    });
  }
});

describe("the configuration file and the environment", () => {
  test("peer may be given once per line in the file, RUNNEL_PEER lists them separated by spaces", () => {
    const dir = tempDir();
    const file = path.join(dir, "c.conf");
    fs.writeFileSync(file, "node-id = 2\ncluster-id = c\npeer = 1=127.0.0.1:7001,http://127.0.0.1:8001\npeer = 2=127.0.0.1:7002,http://127.0.0.1:8002\n");
    const r = serve(["--config", file, "--print-config"]);
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.split("\n").filter((l) => l.startsWith("peer="));
    assert.deepEqual(lines, ["peer=1=127.0.0.1:7001,http://127.0.0.1:8001", "peer=2=127.0.0.1:7002,http://127.0.0.1:8002"]);
    const withPeerUrl = serve(["--print-config", "--node-id", "1", "--cluster-id", "c", "--peer", "1=127.0.0.1:7001,http://a:1/,https://b:2/", "--peer-listen", "[::1]:9001"]);
    assert.equal(withPeerUrl.status, 0, withPeerUrl.stderr);
    assert.ok(withPeerUrl.stdout.split("\n").includes("peer=1=127.0.0.1:7001,http://a:1,https://b:2"), withPeerUrl.stdout);
    assert.ok(withPeerUrl.stdout.split("\n").includes("peer-listen=::1:9001"), withPeerUrl.stdout);
    const e = serve(["--config", file, "--print-config"], { RUNNEL_PEER: "2=127.0.0.1:9002,http://a:1  3=127.0.0.1:9003,http://b:1" });
    assert.equal(e.status, 0, e.stderr);
    assert.deepEqual(e.stdout.split("\n").filter((l) => l.startsWith("peer=")),
      ["peer=2=127.0.0.1:9002,http://a:1", "peer=3=127.0.0.1:9003,http://b:1"], "the environment replaces the file's");
    const f = serve(["--config", file, "--print-config", "--peer", "2=127.0.0.1:9004,http://c:1"], { RUNNEL_PEER: "1=127.0.0.1:9001,http://a:1" });
    assert.equal(f.status, 0, f.stderr);
    assert.deepEqual(f.stdout.split("\n").filter((l) => l.startsWith("peer=")), ["peer=2=127.0.0.1:9004,http://c:1"], "flags replace both");
  });
});

describe("peer certificates a node refuses to start with (exit 1)", () => {
  const pki = tempDir();
  execFileSync("bash", [path.join(path.dirname(new URL(import.meta.url).pathname), "../lib/test_pki.sh"), pki]);
  const files = (name) => ["--peer-cert", path.join(pki, `${name}.pem`), "--peer-key", path.join(pki, `${name}.key`)];
  const cases = [
    ["node 2's certificate on node 3", "peer-2", /the certificate in --peer-cert \S+peer-2.pem is node 2's, and this node is 3 \(--node-id\)/],
    ["another CA's certificate", "rogue-4", /the certificate in --peer-cert \S+rogue-4.pem does not verify against --peer-ca/],
    ["a certificate naming no node", "peer-none", /must name this node as exactly one URI subject alternative name runnel-node:3/],
  ];
  for (const [what, name, message] of cases) {
    test(what, async () => {
      const [port, peerPort, raft] = [await freePort(), await freePort(), await freePort()];
      const r = serve(["--data-dir", tempDir(), "--listen", `127.0.0.1:${port}`, "--node-id", "3", "--cluster-id", "c",
        "--peer", `3=127.0.0.1:${raft},http://127.0.0.1:${port},https://127.0.0.1:${peerPort}`,
        "--peer-listen", `127.0.0.1:${peerPort}`, ...files(name), "--peer-ca", path.join(pki, "ca.pem"),
        "--shutdown-grace-ms", "0"]);
      assert.equal(r.status, 1, r.stdout + r.stderr);
      assert.match(r.stdout + r.stderr, message);
    });
  }
});

describe("the data directory remembers its cluster", () => {
  async function startNode(dir, args) {
    const port = await freePort();
    const raft = await freePort();
    return serve(["--data-dir", dir, "--listen", `127.0.0.1:${port}`, "--node-id", "1",
      "--peer", `1=127.0.0.1:${raft},http://127.0.0.1:${port}`, ...args, "--shutdown-grace-ms", "0"]);
  }

  test("another group count, cluster id or node id is refused; so is a single-node start", async () => {
    const dir = tempDir();
    // a one-node cluster that starts and is stopped at once by a timeout of the test's own
    const port = await freePort();
    const raft = await freePort();
    const { spawn } = await import("node:child_process");
    const p = spawn(BIN, ["serve", "--data-dir", dir, "--listen", `127.0.0.1:${port}`, "--node-id", "1",
      "--cluster-id", "c1", "--groups", "2", "--peer", `1=127.0.0.1:${raft},http://127.0.0.1:${port}`]);
    for (let i = 0; i < 100 && !fs.existsSync(path.join(dir, "cluster-node")); i++) await sleep(100);
    p.kill("SIGTERM");
    await new Promise((r) => p.on("exit", r));
    assert.equal(fs.readFileSync(path.join(dir, "cluster-node"), "utf8"), "cluster-id=c1 node=1 groups=2\n");
    for (const args of [["--cluster-id", "c1", "--groups", "3"], ["--cluster-id", "c2", "--groups", "2"]]) {
      const r = await startNode(dir, args);
      assert.equal(r.status, 1);
      assert.match(r.stdout + r.stderr, /was created for cluster-id=c1 node=1 groups=2; refusing to start/);
    }
    const single = serve(["--data-dir", dir, "--listen", `127.0.0.1:${await freePort()}`]);
    assert.equal(single.status, 1);
    assert.match(single.stdout + single.stderr, /belongs to a cluster node \(cluster-id=c1 node=1 groups=2\); refusing to start it as a single node/);
  });

  test("a directory with Raft files but no marker refuses a cluster start", async () => {
    const dir = tempDir();
    fs.mkdirSync(path.join(dir, "raft"));
    const r = await startNode(dir, ["--cluster-id", "c1"]);
    assert.equal(r.status, 1);
    assert.match(r.stdout + r.stderr, /has no readable cluster-node marker but holds Raft data; refusing to start a cluster node on it/);
    assert.ok(!fs.existsSync(path.join(dir, "cluster-node")), "no marker was written");
  });

  test("a single node's directory refuses a cluster start", async () => {
    const dir = tempDir();
    fs.mkdirSync(path.join(dir, "wal"));
    const r = await startNode(dir, ["--cluster-id", "c1"]);
    assert.equal(r.status, 1);
    assert.match(r.stdout + r.stderr, /holds single-node data; refusing to start a cluster node on it/);
  });
});
