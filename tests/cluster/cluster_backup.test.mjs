// Cluster mode, black-box: backups of a cluster node (POST /__runnel/backup
// with --backup-to on every node). A backup taken on any node, also one
// that leads none of the groups written, holds every write the cluster
// acknowledged before the request (each group's leader confirms its
// leadership after the request and the node waits until it applied what
// the leader had: ReadIndex), and nothing that was never acknowledged;
// it restores byte-exact into a single node with the §2.4 headers. A node
// that cannot reach a group's leader fails the backup with 503 NO_LEADER
// and writes no state object; a name is taken once across the nodes
// sharing a destination.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { restoreAndStart } from "../blackbox/lib/ops.mjs";
import { record, recordWriter, wholeRecords } from "../lib/records.mjs";
import { readAll, tempDir } from "../blackbox/lib/server.mjs";
import { Cluster, follow, groupOf, req, sleep, waitFor } from "./runnel_cluster.mjs";

const GROUPS = 4;
const work = tempDir("runnel-cluster-backup-");
const dest = path.join(work, "backups");
const OCTET = "application/octet-stream";
let c;
const restored = [];

before(async () => {
  c = await Cluster.start({ groups: GROUPS, args: ["--backup-to", dest] });
});

after(async () => {
  for (const s of restored) await s.stop();
  c.stopChecked();
});

// Appends numbered records to key through the nodes in turn (following
// redirects) until stopped.
const writer = (key, first) =>
  recordWriter(key, (i, body) =>
    follow(`${c.url(((first + i) % 3) + 1)}/v1/stream/${key}`, { method: "POST", headers: { "content-type": OCTET }, body }));

// A node that leads none of the groups of keys, if there is one; else the
// node leading the fewest of them.
async function nonLeaderOf(keys) {
  const led = new Map([1, 2, 3].map((n) => [n, 0]));
  for (const g of new Set(keys.map((k) => groupOf(k, GROUPS)))) {
    const { node } = await c.leaderOf(g);
    led.set(node, led.get(node) + 1);
  }
  return [...led.entries()].sort((a, b) => a[1] - b[1])[0][0];
}

async function restoreInto(name) {
  const s = await restoreAndStart(dest, name, path.join(work, `restored-${name}`));
  restored.push(s);
  return s;
}

describe("a backup of a cluster node under write load", () => {
  const keys = Array.from({ length: 8 }, (_, i) => `bk/s${i}`);
  let taker;
  let ackedBefore;
  const tokens = {};
  const final = {};

  test("taken on a node that leads none (or the fewest) of the groups, it holds every acknowledged write", async () => {
    for (const key of keys) {
      const r = await follow(`${c.url(1)}/v1/stream/${key}`, { method: "PUT", headers: { "content-type": OCTET } });
      assert.equal(r.status, 201, r.text);
    }
    taker = await nonLeaderOf(keys);
    const writers = keys.map((k, i) => writer(k, i));
    while (writers.some((w) => w.acked < 20)) await sleep(20);
    ackedBefore = Object.fromEntries(keys.map((k, i) => [k, writers[i].acked]));
    const r = await req(`${c.url(taker)}/__runnel/backup?name=load`, { method: "POST", headers: c.admin, timeoutMs: 120000 });
    const ackedAtAnswer = Object.fromEntries(keys.map((k, i) => [k, writers[i].acked]));
    while (writers.some((w, i) => w.acked < ackedAtAnswer[keys[i]] + 10)) await sleep(20);
    for (const w of writers) await w.stop();
    assert.equal(r.status, 200, `backup on node ${taker} answered ${r.status} ${r.text}`);
    const answer = JSON.parse(r.text);
    assert.equal(answer.streams, keys.length, r.text);
    assert.ok(fs.existsSync(path.join(dest, "load", "state")), "the state object is written");
    await c.converged();
    for (const key of keys) {
      const hr = await req(`${c.url(taker)}/v1/stream/${key}`, { method: "HEAD" });
      tokens[key] = hr.headers.get("stream-incarnation");
      final[key] = (await readAll(`${c.url(taker)}/v1/stream/${key}`)).body;
      wholeRecords(final[key], key);
    }
  });

  test("restored into a single node: a prefix of each stream holding every write acknowledged before the backup, with §2.4's headers", async () => {
    const s = await restoreInto("load");
    for (const key of keys) {
      const url = `${s.url}/v1/stream/${key}`;
      const { body } = await readAll(url);
      const n = wholeRecords(body, key);
      assert.ok(n >= ackedBefore[key], `${key}: ${n} appends restored, ${ackedBefore[key]} were acknowledged before the backup`);
      assert.ok(final[key].subarray(0, body.length).equals(body), `${key}: the restored bytes are the cluster's`);
      const hr = await req(url, { method: "HEAD" });
      assert.equal(hr.status, 200);
      assert.equal(hr.headers.get("stream-previous-incarnation"), tokens[key], `${key}: the backed-up incarnation`);
      assert.notEqual(hr.headers.get("stream-incarnation"), tokens[key], `${key}: a new incarnation`);
      assert.equal(hr.headers.get("stream-next-offset"), hr.headers.get("stream-inherited-offset"), `${key}: inherited at the restored tail`);
      const w = await req(url, { method: "POST", headers: { "content-type": OCTET }, body: record(key, n) });
      assert.equal(w.status, 204, `${key}: the restored stream takes appends`);
    }
  });

  test("a name is taken once, whichever node of the destination is asked", async () => {
    for (const n of [1, 2, 3]) {
      const r = await req(`${c.url(n)}/__runnel/backup?name=load`, { method: "POST", headers: c.admin, timeoutMs: 60000 });
      assert.equal(r.status, 409, `node ${n}: ${r.status} ${r.text}`);
      assert.equal(JSON.parse(r.text).error.code, "BACKUP_EXISTS");
    }
  });
});

describe("a node that cannot confirm a group", () => {
  test("answers 503 NO_LEADER within the settle bound and writes no state object", async () => {
    const others = [2, 3];
    for (const n of others) c.kill(n, "SIGKILL");
    await waitFor("the survivors to see the kill", async () => others.every((n) => !c.alive(n)), 5000);
    const started = Date.now();
    const r = await req(`${c.url(1)}/__runnel/backup?name=alone`, { method: "POST", headers: c.admin, timeoutMs: 60000 });
    const took = Date.now() - started;
    assert.equal(r.status, 503, `${r.status} ${r.text}`);
    assert.equal(JSON.parse(r.text).error.code, "NO_LEADER");
    assert.ok(took < 30000, `answered after ${took} ms`);
    assert.ok(!fs.existsSync(path.join(dest, "alone", "state")), "no state object");
    for (const n of others) await c.restart(n);
    await waitFor("a backup once the majority is back", async () => {
      const again = await req(`${c.url(1)}/__runnel/backup?name=alone`, { method: "POST", headers: c.admin, timeoutMs: 60000 });
      assert.notEqual(again.status, 409, again.text);
      return again.status === 200;
    }, 60000, 500);
    assert.ok(fs.existsSync(path.join(dest, "alone", "state")), "the retry under the same name completes");
  });
});
