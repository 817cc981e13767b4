// Cluster mode, black-box: checksummed stream data (issue 32 item 4). A
// 3-node cluster (one group, Raft snapshots every 16 entries so the log is
// compacted past the bytes damaged, and no scrub) takes acknowledged
// appends; then one byte of a stream data file is flipped behind the
// node's back:
//   - on one follower: reads on it answer the right bytes (directly, or by
//     a 307 to the leader while the block is fetched again), the block is
//     repaired from a peer (counted in its metrics), its file is the
//     others' again on disk, and it then serves the bytes itself;
//   - on two nodes of three, the leader and a follower, in the same block:
//     every read on every node answers the right bytes or 503
//     STREAM_DATA_REPAIRING with Retry-After while the damaged nodes
//     repair, never a wrong byte;
//     both damaged nodes end repaired from the intact one (a damaged peer
//     refuses to send the block: it checks before it answers) and every
//     acknowledged write reads back from every node;
// and in a second cluster whose nodes scrub (10 MB/s), a byte flipped on a
// follower is found and repaired with no read asking for it.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Cluster, follow, req, waitFor } from "./runnel_cluster.mjs";
import { streamDataFile, xorByte } from "../lib/damage.mjs";

let c;
const TEXT = "text/plain";

before(async () => {
  c = await Cluster.start({
    groups: 1,
    args: ["--raft-snapshot-entries", "16", "--raft-snapshot-trailing", "4", "--scrub-bytes-per-second", "0"],
  });
});

after(() => {
  c.stopChecked();
});

const metric = async (n, name) => {
  const text = (await req(`${c.url(n)}/__runnel/metrics`)).text;
  const line = text.split("\n").find((l) => l.startsWith(name + " "));
  return line ? Number(line.split(" ").pop()) : NaN;
};

// A stream of 40 acknowledged appends of 1000 bytes, the first starting
// with `marker`; returns its url and bytes.
async function makeStream(name, marker) {
  const url = `${c.url(1)}/v1/stream/sums/${name}`;
  const r = await follow(url, { method: "PUT", headers: { "content-type": TEXT } });
  assert.equal(r.status, 201);
  let all = "";
  for (let i = 0; i < 40; i++) {
    let body = (i === 0 ? marker : "") + `${name}${i}:`;
    while (body.length < 1000) body += String.fromCharCode(97 + ((body.length * 11 + i) % 26));
    const a = await follow(url, { method: "POST", headers: { "content-type": TEXT }, body });
    assert.ok(a.status === 200 || a.status === 204, `append ${i}: ${a.status} ${a.text}`);
    all += body;
  }
  await c.converged();
  return { path: `/v1/stream/sums/${name}`, all };
}

// Node n's data file of the stream whose bytes start with marker.
const dataFile = (n, marker) => streamDataFile(path.join(c.dir, `node-${n}`), marker);

// Reads the whole stream on node n: following 307s, retrying typed 503s
// (each must carry Retry-After), until it answers 200; the bytes must be
// exactly `all`.
async function readsRight(n, s) {
  let seen503 = 0;
  await waitFor(`node ${n} to answer the stream`, async () => {
    const r = await follow(`${c.url(n)}${s.path}?offset=-1`);
    if (r.status === 503) {
      assert.ok(r.headers.get("retry-after"), `a 503 carries Retry-After: ${r.text}`);
      assert.match(r.text, /"code":"STREAM_DATA_REPAIRING"/, "a refusal names the damage");
      seen503++;
      return false;
    }
    assert.equal(r.status, 200, `node ${n}: ${r.status} ${r.text}`);
    assert.equal(r.text, s.all, `node ${n} answers the acknowledged bytes exactly`);
    return true;
  }, 30000, 200);
  return seen503;
}

const follower = async () => {
  const { node: l } = await c.leaderOf(0);
  return { leader: l, follower: l === 3 ? 2 : 3, other: l === 1 ? 2 : 1 };
};

describe("a flipped byte in a stream file", () => {
  test("on one follower: read right, repaired from a peer, fixed on disk", async () => {
    const s = await makeStream("one", "MARK-ONE");
    const { follower: f } = await follower();
    // the Raft log was compacted past the damaged bytes (appended ~30 entries ago)
    const raft = fs.readdirSync(path.join(c.dir, `node-${f}`, "raft", "g00"));
    assert.ok(raft.some((x) => x.startsWith("snapshot-")), `a Raft snapshot: ${raft}`);
    const starts = raft.filter((x) => /^\d+-\d+$/.test(x)).map((x) => Number(x.split("-")[0]));
    assert.ok(starts.every((x) => x > 20), `no closed segment holds the early appends: ${raft}`);
    const file = dataFile(f, "MARK-ONE");
    xorByte(file, 9000, 0x04); /* block 2, bytes 8192..12288 */
    assert.notEqual(fs.readFileSync(file).toString(), s.all);
    await readsRight(f, s);
    await waitFor("the repair to be counted", async () => (await metric(f, "runnel_data_blocks_repaired_total")) === 1);
    assert.equal(await metric(f, "runnel_data_blocks_damaged_read_total"), 1);
    assert.equal(await metric(f, "runnel_data_blocks_unrepairable_total"), 0);
    assert.equal(fs.readFileSync(file).toString(), s.all, "the file holds the right bytes again");
    const local = await req(`${c.url(f)}${s.path}?offset=-1`); /* no redirect: served here */
    assert.equal(local.status, 200);
    assert.equal(local.text, s.all);
    assert.match(c.log(f), /stream_data_repaired: stream sums\/one \([0-9a-f]{16}\): 1 damaged blocks rewritten/);
  });

  test("on two nodes of three: never a wrong byte, both repaired from the intact one", async (t) => {
    const s = await makeStream("two", "MARK-TWO");
    const { leader: l, follower: f, other: o } = await follower();
    const before = { [l]: await metric(l, "runnel_data_blocks_repaired_total"), [f]: await metric(f, "runnel_data_blocks_repaired_total") };
    for (const n of [l, f]) xorByte(dataFile(n, "MARK-TWO"), 20000, 0x04); /* block 4 on both */
    let refused = 0;
    for (const n of [f, l, o]) refused += await readsRight(n, s);
    t.diagnostic(`${refused} reads answered 503 STREAM_DATA_REPAIRING before the repairs`);
    for (const n of [l, f])
      await waitFor(`node ${n}'s repair`, async () => (await metric(n, "runnel_data_blocks_repaired_total")) === before[n] + 1);
    for (const n of [1, 2, 3]) {
      assert.equal(fs.readFileSync(dataFile(n, "MARK-TWO")).toString(), s.all, `node ${n}'s file`);
      const r = await req(`${c.url(n)}${s.path}?offset=-1`);
      assert.equal(r.status, 200, `node ${n} serves the stream itself`);
      assert.equal(r.text, s.all);
    }
  });
});

describe("the scrub in a cluster", () => {
  let sc;
  before(async () => {
    sc = await Cluster.start({ groups: 1, args: ["--scrub-bytes-per-second", "10000000"] });
  });
  after(() => sc.stopChecked());

  test("repairs a flipped byte on a follower with no read", async () => {
    const url = `${sc.url(1)}/v1/stream/sums/scrub`;
    assert.equal((await follow(url, { method: "PUT", headers: { "content-type": TEXT } })).status, 201);
    let all = "";
    for (let i = 0; i < 10; i++) {
      const body = (i === 0 ? "MARK-SCRUB" : "") + `s${i}:`.padEnd(2000, "xyz".charAt(i % 3));
      const a = await follow(url, { method: "POST", headers: { "content-type": TEXT }, body });
      assert.ok(a.status === 200 || a.status === 204);
      all += body;
    }
    await sc.converged();
    const { node: l } = await sc.leaderOf(0);
    const f = l === 3 ? 2 : 3;
    const file = streamDataFile(path.join(sc.dir, `node-${f}`), "MARK-SCRUB");
    xorByte(file, 13000, 0x04);
    const m = async (name) => {
      const line = (await req(`${sc.url(f)}/__runnel/metrics`)).text.split("\n").find((x) => x.startsWith(name + " "));
      return line ? Number(line.split(" ").pop()) : NaN;
    };
    await waitFor("the scrub's repair", async () => (await m("runnel_data_blocks_repaired_total")) === 1, 20000, 200);
    assert.equal(await m("runnel_data_blocks_damaged_scrub_total"), 1);
    assert.equal(await m("runnel_data_blocks_damaged_read_total"), 0, "no read found it");
    assert.equal(fs.readFileSync(file).toString(), all, "the file holds the right bytes again");
  });
});
