// Replicated subscriptions (issue 27, item 2): the subscriptions' state is
// a command of one group's log and that group's leader delivers, so a
// subscription outlives the node that took it.
//
// WHAT IT PROVES
//   - A webhook subscription registered on the node that delivers keeps
//     waking after that node is SIGKILLed: every append, before and after
//     the kill, is covered by a wake whose snapshot reaches it (none
//     lost); generations never go back; a generation seen twice is the
//     same wake (same wake id) delivered again by the new leader, at most
//     once (the wake in flight at the kill: at least once, PROTOCOL.md
//     §6-7); every notification's signature verifies against the JWK Set
//     of a surviving node (the signing key is the cluster's, not a node's).
//   - Requests on a node that does not deliver are forwarded (or, with
//     Runnel-No-Forward, answered 307 to the leader), as writes are.
//   - A pull-wake claim survives the kill of the delivering node: the
//     wake event reaches the wake stream (which another group may hold),
//     the claim taken before the kill still holds after it (another
//     worker's claim answers 409 ALREADY_CLAIMED naming the holder), and
//     the holder's token acks through a surviving node.
//   - A wake event the wake stream's leader refuses for its log or disk
//     (failure point log-reserve, as a full disk) is written a second
//     later, not dropped.
//   - Every subscription, its links and acked offsets, outlive a SIGKILL
//     of every node, from the group's snapshots (manifests) alone.
// About 50 s (it waits for placement's leaderships to settle).
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { after, before, describe, test } from "node:test";
import { Cluster, groupOf, req, sleep, waitFor, webhookReceiver } from "./runnel_cluster.mjs";

const SUBS_KEY = "__ds/subscriptions"; // src/subs/subs_int.h: RN_SUBS_KEY
const GROUPS = 8;
const JSON_CT = "application/json";
let c, hook;

before(async () => {
  // snapshots every few entries: the state also travels in manifests
  c = await Cluster.start({ groups: GROUPS, args: ["--webhook-allow-loopback", "--raft-snapshot-entries", "4",
    "--raft-snapshot-trailing", "1", "--test-hooks"] });
  hook = await webhookReceiver();
});
after(() => {
  hook?.server.close();
  c.stopChecked();
});

function verifies(jwks, header, raw) {
  const m = /^t=(\d+),kid=([^,]+),ed25519=([A-Za-z0-9_-]+)$/.exec(header ?? "");
  const jwk = m && jwks.keys.find((k) => k.kid === m[2]);
  if (!jwk) return false;
  const key = crypto.createPublicKey({ key: jwk, format: "jwk" });
  return crypto.verify(null, Buffer.from(`${m[1]}.${raw}`), key, Buffer.from(m[3], "base64url"));
}

const subsLeader = async () => (await c.leaderOf(groupOf(SUBS_KEY, GROUPS))).node;
// The subscriptions' leader once the same node and term held it for 4 s:
// after a restart placement hands leaderships back to their preferred
// nodes (one group every 3 s), which moves delivery meanwhile.
async function stableLeader() {
  let last = null, since = Date.now();
  return waitFor("a settled leader of the subscriptions' group", async () => {
    const l = await c.leaderOf(groupOf(SUBS_KEY, GROUPS));
    const key = `${l.node}/${l.term}`;
    if (key !== last) {
      last = key;
      since = Date.now();
    }
    return Date.now() - since >= 4000 ? l.node : null;
  }, 40000, 250);
}
// After a kill: every group has a leader again.
const allLed = async (ms) => {
  for (let g = 0; g < GROUPS; g++) await c.leaderOf(g, ms);
};
const other = (n) => [1, 2, 3].find((i) => i !== n && c.alive(i));
const sub = (n, id, rest = "") => `${c.url(n)}/v1/stream/__ds/subscriptions/${id}${rest}`;

// A GET through node n (forwarded to the delivering node), parsed, once it
// answers 200: a leadership that moves under a loaded machine answers 503
// or 307 meanwhile.
const getJson = (n, url) => waitFor(`200 from ${url}`, async () => {
  const r = await req(url.replace(/^http:\/\/[^/]+/, c.url(n)), { forward: true });
  return r.status === 200 ? JSON.parse(r.text) : null;
}, 20000, 100);

async function append(n, path, body, ct = "text/plain") {
  const r = await req(`${c.url(n)}/v1/stream/${path}`, { method: "POST", headers: { "content-type": ct }, body, forward: true });
  assert.equal(r.status, 204, `append to ${path} on node ${n}: ${r.status} ${r.text}`);
  return r.headers.get("stream-next-offset");
}

// Waits for a notification whose snapshot of path reaches offset.
function covered(path, offset) {
  return waitFor(`a wake covering ${path} up to ${offset}`, () => hook.seen.some((n) =>
    n.body.streams.some((s) => s.path === path && s.tail_offset >= offset)), 20000, 50);
}

describe("replicated subscriptions", () => {
  test("a webhook subscription keeps waking after its node is killed", async () => {
    const first = await stableLeader();
    const r = await req(`${c.url(first)}/v1/stream/ev/a`, { method: "PUT", headers: { "content-type": "text/plain" }, forward: true });
    assert.equal(r.status, 201, r.text);
    const put = await req(sub(first, "wh"), { forward: true, method: "PUT", headers: { "content-type": JSON_CT },
      body: JSON.stringify({ type: "webhook", pattern: "ev/*", webhook: { url: hook.url } }) });
    assert.equal(put.status, 201, put.text);
    // another node forwards, or redirects when asked not to forward
    const elsewhere = other(first);
    const read = await req(sub(elsewhere, "wh"), { forward: true });
    assert.equal(read.status, 200, read.text);
    assert.equal(JSON.parse(read.text).type, "webhook");
    const redirect = await req(sub(elsewhere, "wh"));
    assert.equal(redirect.status, 307, redirect.text);
    assert.equal(redirect.headers.get("location"), sub(first, "wh"));
    const jwks = await getJson(elsewhere, `${c.url(elsewhere)}/v1/stream/__ds/jwks.json`);

    const offsets = [];
    for (let i = 0; i < 3; i++) {
      offsets.push(await append(elsewhere, "ev/a", `before-${i}`));
      await covered("ev/a", offsets.at(-1));
    }
    // one more append whose wake may be in flight when the node dies
    offsets.push(await append(elsewhere, "ev/a", "at-the-kill"));
    await c.crash(first);
    await allLed();
    const second = await subsLeader();
    assert.notEqual(second, first);
    for (let i = 0; i < 3; i++) {
      offsets.push(await append(second, "ev/a", `after-${i}`));
      await covered("ev/a", offsets.at(-1));
    }
    for (const o of offsets) await covered("ev/a", o);

    // generations never go back; a generation seen twice is one wake sent again
    const byGen = new Map();
    let last = 0, repeats = 0;
    for (const n of hook.seen) {
      assert.equal(n.body.subscription_id, "wh");
      assert.ok(n.body.generation >= last, `generation ${n.body.generation} after ${last}`);
      last = n.body.generation;
      if (byGen.has(n.body.generation)) {
        assert.equal(byGen.get(n.body.generation), n.body.wake_id, "one wake id per generation");
        repeats++;
      }
      byGen.set(n.body.generation, n.body.wake_id);
      assert.ok(verifies(jwks, n.signature, n.raw), `notification ${n.body.generation} verifies`);
    }
    assert.ok(repeats <= 1, `${repeats} wakes delivered again (only the one in flight at the kill may be)`);
    const state = await getJson(second, sub(second, "wh"));
    await waitFor("the last wake's ack committed", async () => {
      const s = await getJson(second, sub(second, "wh"));
      return s.streams.find((l) => l.path === "ev/a").acked_offset === offsets.at(-1);
    }, 10000, 100);
    assert.equal(state.webhook.signing.kid, jwks.keys[0].kid, "one signing key across leaders");
    await c.restart(first);
    await c.converged();
  });

  test("a pull-wake claim survives the kill of the delivering node", async () => {
    for (let n = 1; n <= 3; n++) if (!c.alive(n)) await c.restart(n); // the first test's victim
    await allLed();
    // a wake stream whose group another node leads: the event crosses nodes
    // (should the subscriptions' leader lead every group, it is restarted)
    let first, wakeStream = null;
    for (let round = 0; round < 4 && !wakeStream; round++) {
      first = await stableLeader();
      for (let i = 0; i < 64 && !wakeStream; i++) {
        const g = groupOf(`wake/pool-${i}`, GROUPS);
        if ((await c.leaderOf(g)).node !== first) wakeStream = `wake/pool-${i}`;
      }
      if (!wakeStream) {
        await c.crash(first);
        await c.restart(first);
        await allLed();
      }
    }
    assert.ok(wakeStream, "some group is led by another node than the subscriptions' group");
    const any = other(first);
    for (const [path, ct] of [[wakeStream, JSON_CT], ["pw/a", "text/plain"]]) {
      const r = await req(`${c.url(any)}/v1/stream/${path}`, { method: "PUT", headers: { "content-type": ct }, forward: true });
      assert.equal(r.status, 201, r.text);
    }
    const put = await req(sub(any, "pw"), { method: "PUT", headers: { "content-type": JSON_CT }, forward: true,
      body: JSON.stringify({ type: "pull-wake", pattern: "pw/*", wake_stream: wakeStream, lease_ttl_ms: 60000 }) });
    assert.equal(put.status, 201, put.text);
    const tail = await append(any, "pw/a", "work");
    const event = await waitFor("the wake event in the wake stream", async () => {
      const r = await req(`${c.url(any)}/v1/stream/${wakeStream}?offset=-1`);
      const events = r.status === 200 ? JSON.parse(r.text) : [];
      return events.find((e) => e.subscription_id === "pw");
    }, 20000, 100);
    assert.equal(event.stream, "pw/a");
    const claim = await req(sub(any, "pw", "/claim"), { forward: true, method: "POST", headers: { "content-type": JSON_CT },
      body: JSON.stringify({ worker: "w1" }) });
    assert.equal(claim.status, 200, claim.text);
    const held = JSON.parse(claim.text);
    assert.equal(held.generation, event.generation);

    await c.crash(first);
    await allLed();
    const second = await subsLeader();
    assert.notEqual(second, first);
    const stolen = await req(sub(second, "pw", "/claim"), { forward: true, method: "POST", headers: { "content-type": JSON_CT },
      body: JSON.stringify({ worker: "w2" }) });
    assert.equal(stolen.status, 409, stolen.text);
    const err = JSON.parse(stolen.text).error;
    assert.equal(err.code, "ALREADY_CLAIMED");
    assert.equal(err.current_holder, "w1");
    /* right after the kill a leadership may move again: a 503 that says
     * nothing applied (NO_LEADER) or that the outcome is unknown is sent
     * again, as a client does; after an unknown outcome the done ack may
     * have applied, and the repeat then finds the wake released (409
     * FENCED): the state below says what holds */
    const sendAck = () => req(sub(other(second), "pw", "/ack"), { method: "POST", forward: true,
      headers: { "content-type": JSON_CT, authorization: `Bearer ${held.token}` },
      body: JSON.stringify({ wake_id: held.wake_id, generation: held.generation, acks: [{ stream: "pw/a", offset: tail }], done: true }) });
    let ack, unknown = 0;
    for (let tries = 0; ; tries++) {
      ack = await sendAck();
      const code = ack.status === 503 ? JSON.parse(ack.text).error.code : null;
      if (tries === 40 || (code !== "NO_LEADER" && code !== "OUTCOME_UNKNOWN")) break;
      if (code === "OUTCOME_UNKNOWN") unknown++;
      await sleep(250);
    }
    if (unknown && ack.status === 409) {
      assert.equal(JSON.parse(ack.text).error.code, "FENCED", ack.text);
      console.log(`# the ack's outcome was unknown ${unknown} time(s); its repeat found the wake released`);
    } else {
      assert.equal(ack.status, 200, ack.text);
      assert.deepEqual(JSON.parse(ack.text), { ok: true, next_wake: false });
    }
    const state = await getJson(second, sub(second, "pw"));
    assert.equal(state.streams.find((l) => l.path === "pw/a").acked_offset, tail);
    await c.restart(first);
    await c.converged();
  });

  test("a wake event refused for a full disk is written a second later", async () => {
    await allLed();
    const leader = await stableLeader();
    // a wake stream of the subscriptions' own group: the leader appends locally
    let i = 0;
    while (groupOf(`wake/local-${i}`, GROUPS) !== groupOf(SUBS_KEY, GROUPS)) i++;
    const ws = `wake/local-${i}`;
    for (const [path, ct] of [[ws, JSON_CT], ["fd/a", "text/plain"]]) {
      const r = await req(`${c.url(leader)}/v1/stream/${path}`, { method: "PUT", headers: { "content-type": ct }, forward: true });
      assert.equal(r.status, 201, r.text);
    }
    const put = await req(sub(leader, "fd"), { forward: true, method: "PUT", headers: { "content-type": JSON_CT },
      body: JSON.stringify({ type: "pull-wake", pattern: "fd/*", wake_stream: ws }) });
    assert.equal(put.status, 201, put.text);
    await append(leader, "fd/a", "work");
    const events = async () => {
      const r = await req(`${c.url(leader)}/v1/stream/${ws}?offset=-1`);
      return r.status === 200 ? JSON.parse(r.text).filter((e) => e.subscription_id === "fd") : [];
    };
    await waitFor("the first wake event", async () => (await events()).length === 1, 10000, 50);
    const claim = await req(sub(leader, "fd", "/claim"), { forward: true, method: "POST", headers: { "content-type": JSON_CT },
      body: JSON.stringify({ worker: "w1" }) });
    assert.equal(claim.status, 200, claim.text);
    const held = JSON.parse(claim.text);
    // the next logged stream command on the leader finds its disk full: the
    // release's wake event (the release itself is a state command, which
    // does not pass there)
    const armed = await req(`${c.url(leader)}/__runnel/test/fail?point=log-reserve&n=1&errno=ENOSPC`,
      { method: "POST", headers: c.admin });
    assert.ok(armed.status < 300, `${armed.status} ${armed.text}`);
    const released = await req(sub(leader, "fd", "/release"), { forward: true, method: "POST",
      headers: { "content-type": JSON_CT, authorization: `Bearer ${held.token}` },
      body: JSON.stringify({ wake_id: held.wake_id, generation: held.generation }) });
    assert.equal(released.status, 204, released.text);
    const again = await waitFor("the next wake's event, written again", async () =>
      (await events()).find((e) => e.generation === held.generation + 1), 10000, 50);
    assert.equal(again.stream, "fd/a");
    assert.match(c.log(leader), /wake_event_retry/);
  });

  test("the state outlives a restart of every node (snapshots and log)", async () => {
    const leader = await stableLeader();
    // a dozen changes (explicit links added and removed): every node,
    // restarted earlier or not, snapshots the group past them
    for (let i = 0; i < 6; i++) {
      const add = await req(sub(leader, "wh", "/streams"), { forward: true, method: "POST", headers: { "content-type": JSON_CT },
        body: JSON.stringify({ streams: [`ev/x${i}`] }) });
      assert.equal(add.status, 204, add.text);
      const del = await req(sub(leader, "wh", `/streams/${encodeURIComponent(`ev/x${i}`)}`), { method: "DELETE", forward: true });
      assert.equal(del.status, 204, del.text);
    }
    const before = {};
    for (const id of ["wh", "pw", "fd"]) {
      const r = await req(sub(leader, id), { forward: true });
      assert.equal(r.status, 200, r.text);
      before[id] = JSON.parse(r.text);
    }
    // then a dozen writes of a stream of the same group, no subscription's:
    // every node snapshots the group past the last state, so that its log
    // no longer holds it and only manifests carry it
    const g = groupOf(SUBS_KEY, GROUPS);
    let pad = 0;
    while (groupOf(`pad/${pad}`, GROUPS) !== g) pad++;
    const padUrl = `${c.url(leader)}/v1/stream/pad/${pad}`;
    assert.equal((await req(padUrl, { method: "PUT", headers: { "content-type": "text/plain" }, forward: true })).status, 201);
    for (let i = 0; i < 12; i++) await append(leader, `pad/${pad}`, `p${i}`);
    for (let n = 1; n <= 3; n++)
      await waitFor(`node ${n} to snapshot group ${g}`, async () => {
        const m = (await req(`${c.url(n)}/__runnel/metrics`, { headers: c.admin })).text;
        return Number(new RegExp(`^runnel_cluster_snapshots_total\\{group="${g}"\\} (\\d+)`, "m").exec(m)?.[1]) > 0;
      }, 10000, 100);
    for (let n = 1; n <= 3; n++) await c.crash(n);
    for (let n = 1; n <= 3; n++) c.launch(n);
    await allLed(30000);
    for (const id of ["wh", "pw", "fd"]) {
      const r = await waitFor(`subscription ${id} served again`, async () => {
        const x = await req(sub(1, id), { forward: true });
        return x.status === 200 ? x : null;
      }, 20000, 200);
      const now = JSON.parse(r.text);
      assert.deepEqual(now.streams, before[id].streams, `${id}: links and acked offsets`);
      assert.equal(now.created_at, before[id].created_at);
    }
  });
});
