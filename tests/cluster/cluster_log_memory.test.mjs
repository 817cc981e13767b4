// Cluster mode, black-box: the Raft log a group holds in memory is bounded
// by configuration, not by traffic. libraft keeps every entry since the
// group's last snapshot (and the snapshot's trailing entries) in memory;
// snapshots used to be taken by entry count only (1,024 entries, 128 kept
// behind), so a group written in large appends held up to 1,152 of them:
// 4.5 GiB of 4 MiB appends, on every replica. --raft-snapshot-bytes makes
// a group snapshot once the entries applied since its last snapshot hold
// that many bytes, and keep behind the snapshot only entries that fit in a
// quarter of it.
//
// The measure is runnel_cluster_log_bytes{group} on every node (the bytes
// of the entries libraft holds, summed over its in-memory log), not the
// process's RSS: a sanitizer build keeps freed memory in its quarantine.
// After 96 MiB of 2 MiB appends with --raft-snapshot-bytes 16 MiB, every
// node must hold at most 16 MiB + 4 MiB + one entry; the entry count alone
// (--raft-snapshot-bytes 0) would keep all 96 MiB. Every byte still reads
// back from every node, and a node restarted afterwards catches up.
//
// Traffic does not open files either: a replica applying appends to a
// stream whose files it has open opens none (runnel_stream_files_opened_total).
// Until the fix this case came with, every replica opened and closed the
// stream's three files for every append it applied (the disk-space check
// before an apply), part of a regression of cluster writes (BENCHMARKS.md,
// "Cluster writes regressed since 2026-12-06").
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { after, before, describe, test } from "node:test";
import { Cluster, follow, req, waitFor } from "./runnel_cluster.mjs";

const SNAPSHOT_BYTES = 16 << 20;
const APPEND = 2 << 20;
const APPENDS = 48;
let c;

before(async () => {
  c = await Cluster.start({ groups: 1, args: ["--raft-snapshot-bytes", String(SNAPSHOT_BYTES)] });
});

after(() => {
  c.stopChecked();
});

// runnel_stream_files_opened_total of node n.
async function filesOpened(n) {
  const r = await req(`${c.url(n)}/__runnel/metrics`, { headers: c.admin });
  assert.equal(r.status, 200, `metrics of node ${n}`);
  const m = /^runnel_stream_files_opened_total (\d+)$/m.exec(r.text);
  assert.ok(m, `node ${n} reports runnel_stream_files_opened_total`);
  return Number(m[1]);
}

// runnel_cluster_log_bytes{group="0"} of node n.
async function logBytes(n) {
  const r = await req(`${c.url(n)}/__runnel/metrics`, { headers: c.admin });
  assert.equal(r.status, 200, `metrics of node ${n}`);
  const m = /^runnel_cluster_log_bytes\{group="0"\} (\d+)$/m.exec(r.text);
  assert.ok(m, `node ${n} reports runnel_cluster_log_bytes`);
  return Number(m[1]);
}

describe("a group's log in memory", () => {
  test("stays within --raft-snapshot-bytes under large appends, every byte kept", async () => {
    const key = "logmem/big";
    const made = await follow(`${c.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "application/octet-stream" } });
    assert.equal(made.status, 201, made.text);
    const bodies = [];
    for (let i = 0; i < APPENDS; i++) {
      const body = crypto.randomBytes(APPEND);
      const r = await follow(`${c.url(1)}/${key}`, { method: "POST", headers: { "content-type": "application/octet-stream" }, body });
      assert.equal(r.status, 204, `append ${i}: ${r.status} ${r.text}`);
      bodies.push(body);
    }
    await c.converged();
    const bound = SNAPSHOT_BYTES + SNAPSHOT_BYTES / 4 + APPEND + 4096;
    const held = [];
    for (let n = 1; n <= 3; n++) held.push(await logBytes(n));
    for (let n = 1; n <= 3; n++)
      assert.ok(held[n - 1] <= bound, `node ${n} holds ${held[n - 1]} bytes of log in memory, more than ${bound} (${APPENDS * APPEND} appended)`);
    assert.ok(held.some((b) => b >= APPEND), `the measure sees the entries it bounds: ${held.join(", ")}`);
    const want = Buffer.concat(bodies);
    for (let n = 1; n <= 3; n++) {
      let got = Buffer.alloc(0), offset = "-1";
      for (let k = 0; k < 100 && got.length < want.length; k++) {
        const r = await req(`${c.url(n)}/${key}?offset=${encodeURIComponent(offset)}`);
        assert.equal(r.status, 200, `read through node ${n}`);
        got = Buffer.concat([got, r.body]);
        offset = r.headers.get("stream-next-offset");
      }
      assert.ok(got.equals(want), `node ${n} reads back every byte (${got.length} of ${want.length})`);
    }
  });

  test("a node down during the appends catches up afterwards", async () => {
    const key = "logmem/later";
    const { node: leader } = await c.leaderOf(0);
    const down = [1, 2, 3].find((n) => n !== leader);
    await c.crash(down);
    const made = await follow(`${c.url(leader)}/${key}`, { method: "PUT", headers: { "content-type": "application/octet-stream" } });
    assert.equal(made.status, 201, made.text);
    const bodies = [];
    for (let i = 0; i < 16; i++) {
      const body = crypto.randomBytes(APPEND);
      const r = await follow(`${c.url(leader)}/${key}`, { method: "POST", headers: { "content-type": "application/octet-stream" }, body });
      assert.equal(r.status, 204, `append ${i}: ${r.status} ${r.text}`);
      bodies.push(body);
    }
    await c.restart(down);
    await c.converged();
    const want = Buffer.concat(bodies);
    await waitFor(`node ${down} to read back every byte`, async () => {
      let got = Buffer.alloc(0), offset = "-1";
      for (let k = 0; k < 100 && got.length < want.length; k++) {
        const r = await req(`${c.url(down)}/${key}?offset=${encodeURIComponent(offset)}`);
        if (r.status !== 200) return false;
        got = Buffer.concat([got, r.body]);
        offset = r.headers.get("stream-next-offset");
      }
      return got.equals(want);
    }, 30000);
    assert.ok((await logBytes(down)) <= SNAPSHOT_BYTES + SNAPSHOT_BYTES / 4 + APPEND + 4096, `node ${down}'s log stays bounded too`);
  });
});

describe("a stream's files", () => {
  test("stay open across appends on every replica", async () => {
    const key = "logmem/files";
    const ct = { "content-type": "application/octet-stream" };
    const made = await follow(`${c.url(1)}/${key}`, { method: "PUT", headers: ct });
    assert.equal(made.status, 201, made.text);
    const first = await follow(`${c.url(1)}/${key}`, { method: "POST", headers: ct, body: "first" });
    assert.equal(first.status, 204, first.text);
    await c.converged();
    const before = [];
    for (let n = 1; n <= 3; n++) before.push(await filesOpened(n));
    const APPENDS_SMALL = 100;
    for (let i = 0; i < APPENDS_SMALL; i++) {
      const r = await follow(`${c.url(1)}/${key}`, { method: "POST", headers: ct, body: `append ${i}` });
      assert.equal(r.status, 204, `append ${i}: ${r.status} ${r.text}`);
    }
    await c.converged();
    for (let n = 1; n <= 3; n++) {
      const opened = (await filesOpened(n)) - before[n - 1];
      assert.equal(opened, 0, `node ${n} opened ${opened} stream files for ${APPENDS_SMALL} appends to one stream`);
    }
  });
});
