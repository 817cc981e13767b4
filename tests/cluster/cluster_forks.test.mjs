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
//   - With groups on 3 of 4 nodes (--replicas 3), a fork (text and JSON)
//     whose leader does not host its source's group is created (it answered
//     503 NO_LEADER before), its answer waiting for the leader's copy of the
//     inherited bytes (slowed by failure point gap-piece), which the leader
//     then serves itself; every node reads it: catch-up, long-poll, SSE; a
//     kill of the fork's leader keeps it readable, and the old leader serves
//     its copy after its restart; the source deleted answers 410 everywhere
//     while the fork reads on; the fork deleted removes the source; then a
//     fork for every pair of groups, created and read through every node.
//   - A bucket purge of a source cuts its forks in other groups and their
//     forks (retained offset at the fork offset: 410 below with the code a
//     fork in the source's group gives, own bytes from there, on every
//     node and both surfaces; the source 404; the forks deleted after),
//     also under --replicas 3 where a node keeps a copy of the inherited
//     bytes.
// About 54 s.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Cluster, follow, groupOf, operatorReq, req, retryNoLeader, sleep, waitFor } from "./runnel_cluster.mjs";

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

const ZERO = "0000000000000000_0000000000000000";

// A key of bucket `bucket` in group g.
function bucketKeyIn(bucket, g, name) {
  for (let i = 0; ; i++) if (groupOf(`${bucket}/${name}-${i}`, GROUPS) === g) return `${bucket}/${name}-${i}`;
}

// Purges `bucket` through node 1 (asked again while a group has no leader,
// as an operator would) and waits until every group removed its streams.
async function purge(bucket) {
  const p = await operatorReq(`${c.url(1)}/__runnel/admin/buckets/${bucket}/purge`, { method: "POST", headers: c.admin });
  assert.ok(p.status === 200 || p.status === 202, p.text);
  await waitFor(`the purge of ${bucket}`, async () =>
    JSON.parse((await req(`${c.url(1)}/__runnel/admin/buckets/${bucket}`, { headers: c.admin })).text).purge?.done, 20000);
}

// After a purge of its source's bucket, on every node and through both
// surfaces: `fork` answers 410 below `at` (its retained offset now, with the
// body `gone` a fork in the source's group gives), `own` from there; its
// source answers 404.
async function cutEverywhere(nodes, fork, at, own, src, gone) {
  for (const n of nodes) {
    for (const base of [`${c.url(n)}/${fork}`, `${c.url(n)}/v1/stream/${fork}`]) {
      await waitFor(`${base} retained at ${at}`, async () =>
        (await follow(base, { method: "HEAD", forward: true })).headers.get("stream-retained-offset") === at, 10000);
      const below = await follow(`${base}?offset=${ZERO}`, { forward: true });
      assert.equal(below.status, 410, `${base} below its fork offset: ${below.text}`);
      assert.equal(JSON.parse(below.text).error.code, gone, `${base}: ${below.text}`);
      const r = await follow(`${base}?offset=${encodeURIComponent(at)}`, { forward: true });
      assert.equal(r.status, 200, `${base} from ${at}: ${r.text}`);
      assert.equal(r.text, own, `${base} from ${at}`);
    }
    for (const base of [`${c.url(n)}/${src}`, `${c.url(n)}/v1/stream/${src}`])
      assert.equal((await follow(`${base}?offset=-1`, { forward: true })).status, 404, `${base} after the purge`);
  }
}

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

  test("a purge of the source's bucket cuts its forks in other groups, and theirs", async () => {
    const src = bucketKeyIn("xpgone", 0, "src");
    const near = bucketKeyIn("xpkeep", 0, "near"), far = bucketKeyIn("xpkeep", 1, "far");
    const farther = bucketKeyIn("xpkeep", 2, "farther");
    const made = await follow(`${c.url(1)}/${src}`, { method: "PUT", headers: TEXT, body: "purged bytes" });
    assert.equal(made.status, 201, made.text);
    const at = made.headers.get("stream-next-offset");
    for (const [fork, from, own] of [[near, src, "near"], [far, src, "far1"], [farther, far, "far2"]]) {
      const f = await follow(`${c.url(2)}/${fork}`, { method: "PUT", headers: { "stream-forked-from": from } });
      assert.equal(f.status, 201, f.text);
      assert.equal((await follow(`${c.url(3)}/${fork}`, { method: "POST", headers: TEXT, body: own })).status, 204);
    }
    await readsEverywhere(farther, "purged bytesfar1far2", "the fork of a fork before the purge");
    const farAt = (await read(1, far)).headers.get("stream-next-offset"); // farther's fork offset
    await purge("xpgone");
    const gone = JSON.parse((await read(1, near, `offset=${ZERO}`)).text).error?.code;
    assert.ok(gone, "a fork in the source's group answers 410 with a typed body");
    await cutEverywhere([1, 2, 3], near, at, "near", src, gone);
    await cutEverywhere([1, 2, 3], far, at, "far1", src, gone);
    await cutEverywhere([1, 2, 3], farther, at, "far1far2", src, gone);
    for (let n = 1; n <= 3; n++)
      assert.equal((await read(n, farther, `offset=${encodeURIComponent(farAt)}`)).text, "far2");
    for (const fork of [farther, far, near])
      assert.equal((await follow(`${c.url(1)}/${fork}`, { method: "DELETE" })).status, 204, `delete ${fork}`);
    for (let n = 1; n <= 3; n++)
      for (const fork of [farther, far, near])
        await waitFor(`${fork} removed on node ${n}`, async () => (await read(n, fork)).status === 404, 5000);
  });
});

describe("forks across groups with groups on 3 of 4 nodes", () => {
  test("a fork whose leader lacks the source's group: created, read everywhere, kept", async () => {
    c.stopChecked(); // one cluster at a time
    c = await Cluster.start({ nodes: 4, groups: GROUPS, replicas: 3, args: ["--test-hooks"] });
    await c.converged();
    const placement = (await c.report(1)).groups.slice(0, GROUPS).map((g) => g.placement);
    let gs = -1, gf = -1, leader = 0;
    for (let f = 0; f < GROUPS && gs < 0; f++) {
      const l = (await c.leaderOf(f)).node;
      const s = placement.findIndex((p, g) => g !== f && !p.includes(l));
      if (s >= 0) [gs, gf, leader] = [s, f, l];
    }
    assert.ok(gs >= 0, `no group lacks a leader of another: ${JSON.stringify(placement)}`);
    const nodes = [1, 2, 3, 4];
    const src = keyIn(gs, "pl-src"), fork = keyIn(gf, "pl-fork");
    const jsrc = keyIn(gs, "pl-jsrc"), jfork = keyIn(gf, "pl-jfork"), jnear = keyIn(gs, "pl-jnear");
    const JSONT = { "content-type": "application/json" };
    const put = (n, key, headers, body) => follow(`${c.url(n)}/${key}`, { method: "PUT", headers, body, forward: true });
    const post = (n, key, headers, body) => follow(`${c.url(n)}/${key}`, { method: "POST", headers, body, forward: true });
    assert.equal((await put(1, src, TEXT, "placed ")).status, 201);
    assert.equal((await put(1, jsrc, JSONT, "[1,2]")).status, 201);
    // the leader's copy is slow (its first 4 pieces taken as unanswered, each
    // asked again 500 ms later): the create's answer waits for it
    const armed = await req(`${c.url(leader)}/__runnel/test/fail?point=gap-piece&n=4&errno=EIO`,
      { method: "POST", headers: c.admin });
    assert.ok(armed.status < 300, armed.text);
    for (const [f, s] of [[fork, src], [jfork, jsrc], [jnear, jsrc]]) {
      // 503 NO_LEADER (the source's leader not known to the fork's, or
      // changing, on a loaded machine) applied nothing: a client retries
      const r = await retryNoLeader(() => put(1, f, { "stream-forked-from": s }));
      assert.equal(r.status, 201, `${f} (its leader ${leader} lacks group ${gs}): ${r.text}`);
    }
    // the fork's leader serves the inherited bytes itself, from its own copy
    const own = await req(`${c.url(leader)}/${fork}?offset=-1`);
    assert.equal(own.status, 200, own.text);
    assert.equal(own.text, "placed ");
    assert.equal((await post(2, src, TEXT, "after")).status, 204);
    assert.equal((await post(3, fork, TEXT, "own")).status, 204);
    for (const f of [jfork, jnear]) assert.equal((await post(4, f, JSONT, '{"a":3}')).status, 204);
    const want = (await read(1, jnear)).text; // as a fork in its source's group reads
    assert.ok(want.includes("1") && want.includes('{"a":3}'), want);
    const readsAll = async (what, live = nodes) => {
      for (const n of live) {
        await waitFor(`${what}: the fork on node ${n}`, async () => (await read(n, fork)).text === "placed own", 10000);
        await waitFor(`${what}: the JSON fork on node ${n}`, async () => (await read(n, jfork)).text === want, 10000);
      }
    };
    await readsAll("catch-up");
    for (const n of nodes) {
      const tail = (await read(n, fork)).headers.get("stream-next-offset");
      const polled = read(n, fork, `offset=${tail}&live=long-poll`);
      await sleep(300);
      assert.equal((await post(n, fork, TEXT, `p${n}`)).status, 204);
      const p = await polled;
      assert.equal(p.status, 200, p.text);
      assert.ok(p.text.startsWith(`p${n}`), `long-poll on node ${n}: ${p.text}`);
      const ctl = new AbortController();
      const sse = await fetch(`${c.url(n)}/${fork}?offset=-1&live=sse`, { signal: ctl.signal });
      assert.equal(sse.status, 200, `SSE on node ${n}`);
      const reader = sse.body.getReader();
      let seen = "";
      while (!seen.includes("placed own")) seen += new TextDecoder().decode((await reader.read()).value);
      ctl.abort();
    }
    const text = (await read(1, fork)).text;
    assert.ok(text.startsWith("placed ownp1"), text);

    await c.crash(leader); // the fork's group elects another; the old leader keeps its copy
    await waitFor("a new leader of the fork's group", async () => (await c.leaderOf(gf)).node !== leader, 20000);
    for (const n of nodes.filter((n) => n !== leader))
      await waitFor(`the fork on node ${n} after its leader's kill`, async () => (await read(n, fork)).text === text, 20000);
    await c.restart(leader);
    const kept = await waitFor("the old leader serving its copy after a restart", async () => {
      const r = await req(`${c.url(leader)}/${fork}?offset=-1`);
      return r.status === 200 ? r : null;
    }, 20000);
    assert.equal(kept.text, text);

    assert.equal((await follow(`${c.url(1)}/${src}`, { method: "DELETE", forward: true })).status, 204);
    for (const n of nodes)
      await waitFor(`410 for the source on node ${n}`, async () => (await read(n, src)).status === 410, 10000);
    for (const n of nodes)
      assert.equal((await read(n, fork)).text, text, `the fork of a soft-deleted source on node ${n}`);
    assert.equal((await follow(`${c.url(2)}/${fork}`, { method: "DELETE", forward: true })).status, 204);
    for (const n of nodes)
      await waitFor(`the source removed on node ${n}`, async () => (await read(n, src)).status === 404, 5000);

    await c.converged(); // the leaderships placement hands back after the restart
    // a create while placement's balance moves a leadership may answer 503
    // NO_LEADER (nothing applied, Retry-After): asked again, as a client would
    const created = async (n, key, headers, body) => {
      for (let tries = 0; ; tries++) {
        const r = await put(n, key, headers, body);
        if (r.status !== 503 || tries === 20 || !r.text.includes('"NO_LEADER"')) return r;
        await sleep(500);
      }
    };
    for (let ps = 0; ps < GROUPS; ps++) { // every pair of groups, whoever leads them
      for (let pf = 0; pf < GROUPS; pf++) {
        if (ps === pf) continue;
        const s = keyIn(ps, `pl${ps}${pf}-src`), f = keyIn(pf, `pl${ps}${pf}-fork`);
        assert.equal((await created(1, s, TEXT, "placed")).status, 201);
        const r = await created(2, f, { "stream-forked-from": s });
        assert.equal(r.status, 201, `a fork in group ${pf} of one in group ${ps}: ${r.text}`);
        for (const n of nodes)
          await waitFor(`the fork ${f} on node ${n}`, async () => (await read(n, f)).text === "placed", 10000);
      }
    }
  });

  test("a purge of the source's bucket: the copies of its bytes go too", async () => {
    if (c.nodes !== 4) { // run alone: this describe's cluster
      c.stopChecked();
      c = await Cluster.start({ nodes: 4, groups: GROUPS, replicas: 3, args: ["--test-hooks"] });
    }
    await c.converged();
    const placement = (await c.report(1)).groups.slice(0, GROUPS).map((g) => g.placement);
    // a group gf on a node that lacks group gs: that node keeps a copy
    let gs = -1, gf = -1;
    for (let f = 0; f < GROUPS && gs < 0; f++)
      gs = placement.findIndex((p, g) => g !== f && placement[f].some((n) => !p.includes(n)));
    for (let f = 0; f < GROUPS && gf < 0; f++)
      if (f !== gs && placement[f].some((n) => !placement[gs].includes(n))) gf = f;
    const src = bucketKeyIn("xpplaced", gs, "src"), fork = bucketKeyIn("xpkeep", gf, "placed");
    const made = await follow(`${c.url(1)}/${src}`, { method: "PUT", headers: TEXT, body: "copied bytes", forward: true });
    assert.equal(made.status, 201, made.text);
    const at = made.headers.get("stream-next-offset");
    const f = await follow(`${c.url(2)}/${fork}`, { method: "PUT", headers: { "stream-forked-from": src }, forward: true });
    assert.equal(f.status, 201, f.text);
    assert.equal((await follow(`${c.url(3)}/${fork}`, { method: "POST", headers: TEXT, body: "mine", forward: true })).status, 204);
    const nodes = [1, 2, 3, 4];
    for (const n of nodes)
      await waitFor(`the fork on node ${n}`, async () => (await read(n, fork)).text === "copied bytesmine", 10000);
    await purge("xpplaced");
    await cutEverywhere(nodes, fork, at, "mine", src, "STREAM_GONE");
    assert.equal((await follow(`${c.url(4)}/${fork}`, { method: "DELETE", forward: true })).status, 204);
  });
});
