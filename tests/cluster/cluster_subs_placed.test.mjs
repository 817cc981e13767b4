// Replicated subscriptions with groups placed on some of the nodes (issue
// 27): 4 nodes, --replicas 3, so the node that delivers (the leader of the
// subscriptions' group) does not host every group. It learns the streams
// of the others from their leaders (src/subs/elsewhere.c).
//
// WHAT IT PROVES
//   - A pattern's backfill links an existing stream of every group, those
//     the delivering node does not host too, at its tail.
//   - A webhook subscription by pattern and one by explicit link wake on
//     appends to a stream of a group the delivering node does not host:
//     every append is covered by a wake whose snapshot reaches it, and
//     the explicit link starts at the stream's tail when it was made (not
//     at 0).
//   - A stream created in such a group is linked by a matching pattern and,
//     once deleted, unlinked (the deliverer learns both from its asks,
//     answered with the changes since its last one: counted).
//   - A pull-wake subscription whose wake stream is in such a group is
//     created (not 400 WAKE_STREAM_MISSING) and its wake event reaches
//     that stream; an ack up to an append to such a stream made just
//     before it is accepted (the deliverer's view of its tail is
//     refreshed first).
//   - A pattern subscription made while the leader of a group the
//     delivering node does not host is stopped (SIGSTOP: its answers time
//     out) links that group's stream all the same, once another leader
//     answers, or is refused 503 NO_LEADER having made nothing: never
//     created on a view missing a group.
//   - While the groups the delivering node does not host have no majority
//     (two nodes stopped), a link to a stream of a group that has one is
//     made at once; a link to a stream of a leaderless group and a
//     pattern subscription (its backfill needs every group) are refused
//     503 NO_LEADER after the 5 s wait, having made nothing.
//   - After the delivering node is SIGKILLed, the next leader of the
//     subscriptions' group goes on: appends to those streams made after
//     the kill are covered by wakes too (none lost), and a stream created
//     after the kill in a group the next deliverer does not host is
//     linked by the pattern and wakes it.
// About 35 s.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Cluster, follow, groupOf, keysPerGroup, req, waitFor, webhookReceiver } from "./runnel_cluster.mjs";

const SUBS_KEY = "__ds/subscriptions"; // src/subs/subs_int.h: RN_SUBS_KEY
const NODES = 4;
const GROUPS = 8;
const JSON_CT = "application/json";
let c, hook, deliverer, far;

before(async () => {
  c = await Cluster.start({ nodes: NODES, groups: GROUPS, replicas: 3, args: ["--webhook-allow-loopback"] });
  hook = await webhookReceiver();
  await c.converged();
  deliverer = (await c.leaderOf(groupOf(SUBS_KEY, GROUPS))).node;
  const placed = (await c.report(deliverer)).groups;
  far = placed.filter((g) => !g.placement.includes(deliverer)).map((g) => g.group);
  assert.ok(far.length > 0, `node ${deliverer} hosts every group: ${JSON.stringify(placed.map((g) => g.placement))}`);
});
after(() => {
  hook?.server.close();
  c.stopChecked();
});


// A key of a group the delivering node does not host.
function farKey(prefix) {
  for (let i = 0; ; i++) if (far.includes(groupOf(`${prefix}${i}`, GROUPS))) return `${prefix}${i}`;
}
const alive = () => [...Array(NODES).keys()].map((i) => i + 1).filter((n) => c.alive(n));
const sub = (id, rest = "") => `${c.url(alive()[0])}/v1/stream/__ds/subscriptions/${id}${rest}`;

async function create(path, ct = "text/plain", body = undefined) {
  const r = await req(`${c.url(alive()[0])}/v1/stream/${path}`, { method: "PUT", headers: { "content-type": ct }, body, forward: true });
  assert.equal(r.status, 201, `create ${path}: ${r.status} ${r.text}`);
}

async function append(path, body) {
  const r = await req(`${c.url(alive()[0])}/v1/stream/${path}`, { method: "POST", headers: { "content-type": "text/plain" }, body, forward: true });
  assert.equal(r.status, 204, `append to ${path}: ${r.status} ${r.text}`);
  return r.headers.get("stream-next-offset");
}

// The stream's tail (its next offset), as its leader answers.
async function tail(path) {
  const r = await follow(`${c.url(alive()[0])}/v1/stream/${path}?consistency=leader`, { method: "HEAD" });
  assert.equal(r.status, 200, `HEAD ${path}: ${r.status}`);
  return r.headers.get("stream-next-offset");
}

async function putSub(id, body) {
  const r = await req(sub(id), { method: "PUT", headers: { "content-type": JSON_CT }, body: JSON.stringify(body), forward: true });
  assert.equal(r.status, 201, `create subscription ${id}: ${r.status} ${r.text}`);
  return JSON.parse(r.text);
}

// Waits for a notification of subscription id whose snapshot of path
// reaches offset.
const covered = (id, path, offset) => waitFor(`a wake of ${id} covering ${path} up to ${offset}`, () =>
  hook.seen.some(({ body: n }) => n.subscription_id === id && n.streams.some((s) => s.path === path && s.tail_offset >= offset)), 20000, 50);

describe("subscriptions of streams the delivering node does not host", () => {
  const offsets = { pat: [], exp: [] };
  let patPath, expPath;

  test("backfill links a stream of every group; pattern and explicit links wake", async () => {
    const keys = keysPerGroup("bf/s", GROUPS);
    for (const k of keys) await create(k, "text/plain", "old");
    patPath = keys[far[0]];
    expPath = farKey("ex/s");
    await create(expPath, "text/plain", "before the link");
    const pat = await putSub("pat", { type: "webhook", pattern: "bf/*", webhook: { url: hook.url } });
    assert.deepEqual(pat.streams.map((l) => l.path).sort(), [...keys].sort(), "every group's stream linked");
    for (const l of pat.streams) assert.equal(l.acked_offset, await tail(l.path), `${l.path} linked at its tail`);
    const exp = await putSub("exp", { type: "webhook", streams: [expPath], webhook: { url: hook.url } });
    const link = exp.streams.find((l) => l.path === expPath);
    assert.equal(link?.acked_offset, await tail(expPath), "the explicit link starts at the stream's tail");
    for (let i = 0; i < 3; i++) {
      offsets.pat.push(await append(patPath, `p${i}`));
      offsets.exp.push(await append(expPath, `e${i}`));
      await covered("pat", patPath, offsets.pat.at(-1));
      await covered("exp", expPath, offsets.exp.at(-1));
    }
    const wakes = hook.seen.filter((n) => n.body.subscription_id === "pat").length;
    assert.ok(wakes >= 1 && wakes <= 3, `${wakes} wakes of pat for 3 appends`);
  });

  test("a stream created and one deleted in a group the deliverer does not host: the pattern follows both", async () => {
    const born = farKey("bf/born-");
    await create(born, "text/plain", "new");
    const links = async () => JSON.parse((await req(sub("pat"))).text).streams.map((l) => l.path);
    await waitFor(`${born} linked by the pattern`, async () => (await links()).includes(born), 10000, 50);
    const r = await req(`${c.url(alive()[0])}/v1/stream/${born}`, { method: "DELETE", forward: true });
    assert.equal(r.status, 204, r.text);
    await waitFor(`${born} no longer linked once deleted`, async () => !(await links()).includes(born), 10000, 50);
    // the deliverer's asks after its first were answered with the changes
    // since its cursor (the leaders' journals), not every stream
    let changes = 0;
    for (const n of alive())
      changes += Number(/^runnel_cluster_stream_asks_changes_total (\d+)$/m.exec((await req(`${c.url(n)}/__runnel/metrics`)).text)?.[1] ?? 0);
    assert.ok(changes > 0, "asks answered with the changes since a cursor");
  });

  test("a pull-wake subscription whose wake stream the deliverer does not host", async () => {
    const ws = farKey("wake/far-");
    const work = farKey("pf/s");
    await create(ws, JSON_CT);
    await create(work);
    await putSub("pf", { type: "pull-wake", pattern: "pf/*", wake_stream: ws, lease_ttl_ms: 60000 });
    await append(work, "work");
    const event = await waitFor("the wake event in the wake stream", async () => {
      const r = await follow(`${c.url(alive()[0])}/v1/stream/${ws}?offset=-1`);
      return r.status === 200 && JSON.parse(r.text).find((e) => e.subscription_id === "pf");
    }, 20000, 100);
    assert.equal(event.stream, work);
    const claim = await req(sub("pf", "/claim"), { method: "POST", headers: { "content-type": JSON_CT }, forward: true,
      body: JSON.stringify({ worker: "w1" }) });
    assert.equal(claim.status, 200, claim.text);
    const held = JSON.parse(claim.text);
    // an ack up to an append made just before it: the deliverer's view of
    // the stream may not have that tail yet, the ack is good all the same
    const now = await append(work, "more");
    const ack = await req(sub("pf", "/ack"), { method: "POST", forward: true,
      headers: { "content-type": JSON_CT, authorization: `Bearer ${held.token}` },
      body: JSON.stringify({ wake_id: held.wake_id, generation: held.generation, acks: [{ stream: work, offset: now }], done: true }) });
    assert.equal(ack.status, 200, ack.text);
  });

  test("a far group's leader that cannot answer: the create waits, never links a partial view", async () => {
    const path = farKey("stop/s");
    await create(path, "text/plain", "held");
    const before = await tail(path);
    const stopped = (await c.leaderOf(groupOf(path, GROUPS))).node;
    assert.notEqual(stopped, deliverer);
    c.kill(stopped, "SIGSTOP"); // its answers to the deliverer's asks time out
    try {
      const held = `${c.url(deliverer)}/v1/stream/__ds/subscriptions/held`;
      const r = await req(held, { method: "PUT",
        headers: { "content-type": JSON_CT }, body: JSON.stringify({ type: "webhook", pattern: "stop/*", webhook: { url: hook.url } }) });
      if (r.status === 503) { // no complete view came within its bound: nothing made
        assert.equal(JSON.parse(r.text).error.code, "NO_LEADER", r.text);
        assert.equal((await req(held)).status, 404, "a refused create made nothing");
      } else {
        assert.equal(r.status, 201, r.text);
        const links = JSON.parse(r.text).streams;
        assert.deepEqual(links.map((l) => l.path), [path], "the stream of the group whose leader was stopped is linked");
        assert.equal(links[0].acked_offset, before, "at its tail");
      }
    } finally {
      c.kill(stopped, "SIGCONT");
    }
    await c.converged();
  });

  test("far groups without a majority hold up only the changes that look them up", async () => {
    // every group the deliverer does not host is on the three other nodes;
    // stopping two of them, one the node the subscriptions' group leaves
    // out, takes those groups' majority and keeps the subscriptions' own
    const placed = (await c.report(deliverer)).groups;
    const subsGroup = placed.find((g) => g.group === groupOf(SUBS_KEY, GROUPS));
    const x = [1, 2, 3, 4].find((n) => !subsGroup.placement.includes(n));
    const y = [1, 2, 3, 4].find((n) => n !== deliverer && n !== x);
    const alsoHere = placed.find((g) => !g.placement.includes(x) && g.group !== subsGroup.group) ?? subsGroup;
    const hostedKey = keysPerGroup("here/s", GROUPS)[alsoHere.group];
    const farPath = farKey("lost/s");
    await create(hostedKey, "text/plain", "here");
    await create(farPath, "text/plain", "lost");
    const at = (id, rest = "") => `${c.url(deliverer)}/v1/stream/__ds/subscriptions/${id}${rest}`;
    const post = (id, rest, body, method = "POST") =>
      req(at(id, rest), { method, headers: { "content-type": JSON_CT }, body: JSON.stringify(body), timeoutMs: 20000 });
    c.kill(x, "SIGSTOP");
    c.kill(y, "SIGSTOP");
    try {
      await waitFor("the deliverer to see no leader of the groups it does not host", async () =>
        (await c.report(deliverer)).groups.every((g) => !far.includes(g.group) || g.leader === null), 20000, 100);
      const started = Date.now();
      const [hosted, lost, pattern] = await Promise.all([
        post("exp", "/streams", { streams: [hostedKey] }),
        post("exp", "/streams", { streams: [farPath] }),
        post("lost", "", { type: "webhook", pattern: "lost/*", webhook: { url: hook.url } }, "PUT"),
      ]);
      assert.equal(hosted.status, 204, `a link to a stream of a group with a leader: ${hosted.status} ${hosted.text}`);
      for (const [what, r] of [["a link to a stream of a group without one", lost], ["a pattern's backfill", pattern]]) {
        assert.equal(r.status, 503, `${what}: ${r.status} ${r.text}`);
        assert.equal(JSON.parse(r.text).error.code, "NO_LEADER", r.text);
      }
      assert.ok(Date.now() - started >= 4000, "refused after waiting for a complete view (5 s), not at once");
      const exp = JSON.parse((await req(at("exp"))).text);
      assert.ok(exp.streams.some((l) => l.path === hostedKey), "the hosted stream is linked");
      assert.ok(!exp.streams.some((l) => l.path === farPath), "the refused link made nothing");
      assert.equal((await req(at("lost"))).status, 404, "the refused create made nothing");
    } finally {
      c.kill(x, "SIGCONT");
      c.kill(y, "SIGCONT");
    }
    await c.converged();
  });

  test("after the deliverer is SIGKILLed the next one goes on, no wake lost", async () => {
    await c.crash(deliverer);
    for (let g = 0; g < GROUPS; g++) await c.leaderOf(g, 30000);
    const next = (await c.leaderOf(groupOf(SUBS_KEY, GROUPS))).node;
    assert.notEqual(next, deliverer);
    // a stream the next deliverer does not host, new since the kill: the
    // pattern links it from its start when that node first hears of it
    const farNext = (await c.report(next)).groups.filter((g) => !g.hosted).map((g) => g.group);
    assert.ok(farNext.length > 0, `node ${next} hosts every group`);
    let newPath = null;
    for (let i = 0; !newPath; i++) if (farNext.includes(groupOf(`bf/new-${i}`, GROUPS))) newPath = `bf/new-${i}`;
    await create(newPath, "text/plain", "first");
    const newTail = await tail(newPath);
    for (let i = 0; i < 3; i++) {
      offsets.pat.push(await append(patPath, `after-p${i}`));
      offsets.exp.push(await append(expPath, `after-e${i}`));
    }
    for (const o of offsets.pat) await covered("pat", patPath, o);
    for (const o of offsets.exp) await covered("exp", expPath, o);
    await covered("pat", newPath, newTail);
  });
});
