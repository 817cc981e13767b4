// Forks across groups (issue 27, item 4): a fork whose key hashes to another
// group than its source's, on a 3-node cluster of 4 groups (every node hosts
// every group).
//
// WHAT IT PROVES
//   - Such a fork is created through any node, and every node reads it:
//     catch-up (the source's bytes below the fork offset stitched with the
//     fork's own), long-poll and SSE; appends through every node land in
//     the fork only; a repeated create answers 200, a conflicting one 409;
//     the operator's plane names the fork's source and counts the source's
//     pin; the source's refusals (404 missing source, 400 offset past its tail)
//     come back as they do for a fork in its source's group; a JSON fork
//     reads as a fork in its source's group does (its messages across the
//     fork point).
//   - Deleting the source while the fork lives soft-deletes it (410 on
//     every node, its path refused for a create); the fork still reads its
//     inherited bytes on every node; deleting the fork then removes the
//     source (404 on every node).
//   - The fork survives a leader kill of its source's group and of its own.
//   - A pin whose fork create never applied (failure point
//     fork-create-after-pin) holds its source until the orphan sweep
//     releases it: the source deleted meanwhile is soft-deleted, then gone.
//   - With groups on 3 of 4 nodes (--replicas 3), a fork whose leader hosts
//     its source's group is created and read through every node (a node
//     without the source's group redirects the read to the fork's leader:
//     it answered 500 before); one whose leader does not answers 503
//     NO_LEADER after its 3 s wait and creates nothing (docs/ARCHITECTURE.md,
//     "Not done").
// About 45 s.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Cluster, follow, groupOf, req, sleep, waitFor } from "./runnel_cluster.mjs";

const GROUPS = 4;
const TEXT = { "content-type": "text/plain" };
let c;

before(async () => {
  c = await Cluster.start({ groups: GROUPS, args: ["--test-hooks", "--expiry-sweep-ms", "200"] });
});
after(() => c?.stopChecked());

// A key of `prefix` in group g.
function keyIn(g, prefix) {
  for (let i = 0; ; i++) if (groupOf(`xfrk/${prefix}-${i}`, GROUPS) === g) return `xfrk/${prefix}-${i}`;
}

// A source in group 0 holding `body`, and the key of a fork in group 1.
async function pair(prefix, body) {
  const src = keyIn(0, `${prefix}-src`), fork = keyIn(1, `${prefix}-fork`);
  const r = await follow(`${c.url(1)}/${src}`, { method: "PUT", headers: TEXT, body });
  assert.equal(r.status, 201, r.text);
  return { src, fork, at: r.headers.get("stream-next-offset") };
}

const read = (n, key, q = "offset=-1") => follow(`${c.url(n)}/${key}?${q}`, { forward: true });

async function readsEverywhere(key, text, what) {
  for (let n = 1; n <= 3; n++) {
    const r = await waitFor(`${what} on node ${n}`, async () => {
      const a = await read(n, key);
      return a.status === 200 ? a : null;
    }, 10000);
    assert.equal(r.text, text, `${what} on node ${n}`);
  }
}

describe("forks across groups", () => {
  test("created, read and appended to through every node; repeats and refusals", async () => {
    const { src, fork, at } = await pair("life", "hello ");
    assert.notEqual(groupOf(src, GROUPS), groupOf(fork, GROUPS));
    const from = { "stream-forked-from": src, "stream-fork-offset": at };
    const f = await follow(`${c.url(2)}/${fork}`, { method: "PUT", headers: from });
    assert.equal(f.status, 201, f.text);
    await follow(`${c.url(1)}/${src}`, { method: "POST", headers: TEXT, body: "after" });
    await readsEverywhere(fork, "hello ", "the inherited bytes");
    for (let n = 1; n <= 3; n++) {
      const a = await follow(`${c.url(n)}/${fork}`, { method: "POST", headers: TEXT, body: `${n}` });
      assert.equal(a.status, 204, a.text);
    }
    await readsEverywhere(fork, "hello 123", "the fork's own appends after its inherited bytes");
    await readsEverywhere(src, "hello after", "the source, unchanged by the fork");

    const state = async (key) => JSON.parse((await req(`${c.url(3)}/__runnel/admin/buckets/${key.replace("/", "/streams/")}`,
      { headers: c.admin })).text);
    const fs = await state(fork);
    assert.equal(fs.fork_of?.path, src, JSON.stringify(fs));
    assert.equal((await state(src)).forks, 1, "the operator's plane counts the source's pin");
    const again = await follow(`${c.url(3)}/${fork}`, { method: "PUT", headers: from });
    assert.equal(again.status, 200, again.text);
    const other = await follow(`${c.url(3)}/${fork}`, { method: "PUT", headers: { ...from, "stream-ttl": "600" } });
    assert.equal(other.status, 409, other.text);
    const missing = await follow(`${c.url(1)}/${keyIn(1, "nosrc")}`, {
      method: "PUT", headers: { "stream-forked-from": keyIn(0, "absent") } });
    assert.equal(missing.status, 404, missing.text);
    const past = await follow(`${c.url(1)}/${keyIn(1, "pastfork")}`, {
      method: "PUT", headers: { "stream-forked-from": src, "stream-fork-offset": "0000000000000000_0000000000000099" } });
    assert.equal(past.status, 400, past.text);
  });

  test("a JSON fork reads as one in its source's group does, on every node", async () => {
    const src = keyIn(0, "json-src"), far = keyIn(1, "json-far"), near = keyIn(0, "json-near");
    const JSONT = { "content-type": "application/json" };
    const made = await follow(`${c.url(1)}/${src}`, { method: "PUT", headers: JSONT, body: "[1,2]" });
    assert.equal(made.status, 201, made.text);
    for (const fork of [far, near]) {
      const f = await follow(`${c.url(2)}/${fork}`, { method: "PUT", headers: { "stream-forked-from": src } });
      assert.equal(f.status, 201, f.text);
      const a = await follow(`${c.url(3)}/${fork}`, { method: "POST", headers: JSONT, body: '{"a":3}' });
      assert.equal(a.status, 204, a.text);
    }
    const want = (await read(1, near)).text;
    assert.ok(want.includes("1") && want.includes('{"a":3}'), want);
    for (let n = 1; n <= 3; n++)
      await waitFor(`the JSON fork on node ${n}`, async () => (await read(n, far)).text === want, 10000);
  });

  test("long-poll and SSE reads of the fork on every node", async () => {
    const { src, fork } = await pair("live", "base:");
    const f = await follow(`${c.url(1)}/${fork}`, { method: "PUT", headers: { "stream-forked-from": src } });
    assert.equal(f.status, 201, f.text);
    await readsEverywhere(fork, "base:", "the inherited bytes");
    for (let n = 1; n <= 3; n++) {
      const tail = (await read(n, fork)).headers.get("stream-next-offset");
      const polled = read(n, fork, `offset=${tail}&live=long-poll`);
      await sleep(300);
      await follow(`${c.url(n)}/${fork}`, { method: "POST", headers: TEXT, body: `p${n}` });
      const p = await polled;
      assert.equal(p.status, 200, p.text);
      assert.ok(p.text.startsWith(`p${n}`), `long-poll on node ${n}: ${p.text}`);
      const ctl = new AbortController();
      const sse = await fetch(`${c.url(n)}/${fork}?offset=-1&live=sse`, { signal: ctl.signal });
      assert.equal(sse.status, 200);
      const reader = sse.body.getReader();
      let seen = "";
      while (!seen.includes("base:")) seen += new TextDecoder().decode((await reader.read()).value);
      ctl.abort();
    }
  });

  test("source deleted while the fork lives: 410, the fork reads on; fork deleted: source gone", async () => {
    const { src, fork } = await pair("soft", "kept bytes");
    const f = await follow(`${c.url(1)}/${fork}`, { method: "PUT", headers: { "stream-forked-from": src } });
    assert.equal(f.status, 201, f.text);
    assert.equal((await follow(`${c.url(2)}/${src}`, { method: "DELETE" })).status, 204);
    for (let n = 1; n <= 3; n++)
      await waitFor(`410 on node ${n}`, async () => (await read(n, src)).status === 410, 10000);
    const again = await follow(`${c.url(1)}/${src}`, { method: "PUT", headers: TEXT });
    assert.equal(again.status, 409, again.text);
    const late = await follow(`${c.url(1)}/${keyIn(1, "late")}`, { method: "PUT", headers: { "stream-forked-from": src } });
    assert.equal(late.status, 409, "a soft-deleted source is not forked again");
    await readsEverywhere(fork, "kept bytes", "the fork of a soft-deleted source");
    assert.equal((await follow(`${c.url(3)}/${fork}`, { method: "DELETE" })).status, 204);
    for (let n = 1; n <= 3; n++)
      // within 5 s: the fork's delete releases its pin (the orphan sweep
      // would take RN_PIN_GRACE_MS, 10 s)
      await waitFor(`the source removed on node ${n}`, async () => (await read(n, src)).status === 404, 5000);
  });

  test("the fork survives a leader kill of its source's group and of its own", async () => {
    const { src, fork } = await pair("kill", "before ");
    const f = await follow(`${c.url(1)}/${fork}`, { method: "PUT", headers: { "stream-forked-from": src } });
    assert.equal(f.status, 201, f.text);
    for (const g of [0, 1]) {
      const leader = (await c.leaderOf(g)).node;
      await c.crash(leader);
      const live = leader % 3 + 1;
      await waitFor(`an append after killing group ${g}'s leader`, async () =>
        (await follow(`${c.url(live)}/${fork}`, { method: "POST", headers: TEXT, body: `${g}` })).status === 204, 20000);
      await c.restart(leader);
    }
    await readsEverywhere(fork, "before 01", "the fork after both kills");
  });

  test("an orphan pin holds its source until the sweep releases it", async () => {
    const { src, fork } = await pair("orphan", "pinned");
    const forkLeader = (await c.leaderOf(1)).node;
    const armed = await req(`${c.url(forkLeader)}/__runnel/test/fail?point=fork-create-after-pin&n=1&errno=EIO`,
      { method: "POST", headers: c.admin });
    assert.ok(armed.status < 300, armed.text);
    const r = await req(`${c.url(forkLeader)}/${fork}`, { method: "PUT", headers: { "stream-forked-from": src } });
    assert.equal(r.status, 503, r.text);
    assert.equal((await read(forkLeader, fork)).status, 404, "no fork was created");
    assert.equal((await follow(`${c.url(1)}/${src}`, { method: "DELETE" })).status, 204);
    assert.equal((await read(1, src)).status, 410, "the orphan pin holds the source");
    for (let n = 1; n <= 3; n++)
      await waitFor(`the swept source removed on node ${n}`, async () => (await read(n, src)).status === 404, 25000);
  });
});

describe("forks across groups with groups on 3 of 4 nodes", () => {
  test("created where the fork's leader hosts the source's group, read through every node", async () => {
    c.stopChecked(); // one cluster at a time
    c = await Cluster.start({ nodes: 4, groups: GROUPS, replicas: 3 });
    const groups = (await c.report(1)).groups.slice(0, GROUPS);
    let made = 0, refused = 0;
    for (let gs = 0; gs < GROUPS; gs++) {
      for (let gf = 0; gf < GROUPS; gf++) {
        if (gs === gf) continue;
        const src = keyIn(gs, `pl${gs}${gf}-src`), fork = keyIn(gf, `pl${gs}${gf}-fork`);
        const r = await follow(`${c.url(1)}/${src}`, { method: "PUT", headers: TEXT, body: "placed", forward: true });
        assert.equal(r.status, 201, r.text);
        const leader = (await c.leaderOf(gf)).node;
        const hosts = groups[gs].placement.includes(leader);
        if (!hosts && refused) continue; // one refusal is enough (each waits 3 s)
        const f = await follow(`${c.url(1)}/${fork}`, { method: "PUT", headers: { "stream-forked-from": src }, forward: true });
        if (!hosts) {
          assert.equal(f.status, 503, f.text);
          assert.equal(JSON.parse(f.text).error.code, "NO_LEADER");
          assert.equal((await read(1, fork)).status, 404, "nothing was created");
          refused++;
          continue;
        }
        assert.equal(f.status, 201, f.text);
        for (let n = 1; n <= 4; n++) {
          const x = await read(n, fork);
          assert.equal(x.status, 200, `node ${n}: ${x.text}`);
          assert.equal(x.text, "placed", `node ${n}`);
        }
        made++;
      }
    }
    assert.ok(made > 0 && refused === 1, `made ${made}, refused ${refused}`);
  });
});
