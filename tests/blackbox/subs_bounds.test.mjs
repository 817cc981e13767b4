// The subscriptions' bounds (--max-subscriptions, --max-subscription-streams):
// the server's memory for subscriptions is bounded by its configuration,
// not by what clients send. A create past the first bound, or explicit
// streams past the second (all subscriptions' together), answer 429 with
// the bound in a header and a typed body, and change nothing; a
// re-confirmation at the bound is still 200; room made by a delete or by
// removing a stream is used again; and the count of explicit streams is
// rebuilt from the state after a restart (SIGKILL), so the bound holds
// across it. Explicit streams need not exist, so without the second bound
// repeated POSTs of 1 MiB bodies would grow memory without limit.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { assertError, del, get, req } from "./lib/bucket.mjs";

const JSON_CT = { "content-type": "application/json" };
const HOOK = { url: "http://127.0.0.1:9/hook" }; // never woken: nothing is appended

function api(server) {
  const base = `${server.url}/v1/stream/__ds/subscriptions`;
  return {
    put: (id, body) => req(`${base}/${id}`, { method: "PUT", headers: JSON_CT, body: JSON.stringify(body) }),
    get: (id) => get(`${base}/${id}`),
    del: (id) => del(`${base}/${id}`),
    addStreams: (id, streams) =>
      req(`${base}/${id}/streams`, { method: "POST", headers: JSON_CT, body: JSON.stringify({ streams }) }),
    dropStream: (id, path) => del(`${base}/${id}/streams/${encodeURIComponent(path)}`),
  };
}

const explicit = async (subs, id) =>
  JSON.parse((await subs.get(id)).text).streams.filter((l) => l.link_type === "explicit").map((l) => l.path).sort();

describe("--max-subscriptions", () => {
  const server = new Server({ args: ["--webhook-allow-loopback", "--max-subscriptions", "3"] });
  let subs;
  before(async () => {
    await server.start();
    subs = api(server);
  });
  after(() => server.stop());

  test("a create past the bound: 429 SUBSCRIPTION_LIMIT, nothing made; room is used again", async () => {
    for (const id of ["s1", "s2", "s3"])
      assert.equal((await subs.put(id, { type: "webhook", pattern: `${id}/*`, webhook: HOOK })).status, 201, id);
    const over = await subs.put("s4", { type: "webhook", pattern: "s4/*", webhook: HOOK });
    assertError(over, 429, "SUBSCRIPTION_LIMIT");
    assert.equal(over.headers.get("runnel-max-subscriptions"), "3");
    assert.equal(over.headers.get("retry-after"), null, "a wait does not lift the bound");
    assert.equal((await subs.get("s4")).status, 404, "the refused create made nothing");
    const again = await subs.put("s2", { type: "webhook", pattern: "s2/*", webhook: HOOK });
    assert.equal(again.status, 200, `a re-confirmation at the bound: ${again.text}`);
    assert.equal((await subs.del("s1")).status, 204);
    assert.equal((await subs.put("s4", { type: "webhook", pattern: "s4/*", webhook: HOOK })).status, 201);
  });
});

describe("--max-subscription-streams", () => {
  const server = new Server({ args: ["--webhook-allow-loopback", "--max-subscription-streams", "5"] });
  let subs;
  before(async () => {
    await server.start();
    subs = api(server);
  });
  after(() => server.stop());

  test("explicit streams past the bound, on a create and on a POST: 429, nothing linked", async () => {
    assert.equal((await subs.put("a", { type: "webhook", streams: ["e/1", "e/2", "e/3"], webhook: HOOK })).status, 201);
    const create = await subs.put("b", { type: "webhook", streams: ["f/1", "f/2", "f/3"], webhook: HOOK });
    assertError(create, 429, "SUBSCRIPTION_STREAMS_LIMIT");
    assert.equal(create.headers.get("runnel-max-subscription-streams"), "5");
    assert.equal((await subs.get("b")).status, 404, "the refused create made nothing");
    // a pattern-only subscription names no explicit stream: not refused
    assert.equal((await subs.put("p", { type: "webhook", pattern: "f/*", webhook: HOOK })).status, 201);
    // e/3 is linked already: two new, five in all
    assert.equal((await subs.addStreams("a", ["e/3", "e/4", "e/5"])).status, 204);
    const post = await subs.addStreams("a", ["e/6", "e/7"]);
    assertError(post, 429, "SUBSCRIPTION_STREAMS_LIMIT");
    assert.deepEqual(await explicit(subs, "a"), ["e/1", "e/2", "e/3", "e/4", "e/5"], "nothing of the refused POST linked");
    assert.equal((await subs.addStreams("a", ["e/5"])).status, 204, "a stream already linked takes no room");
  });

  test("the count is rebuilt after a SIGKILL; removed streams make room", async () => {
    await server.restart("SIGKILL");
    subs = api(server);
    assertError(await subs.addStreams("a", ["e/6"]), 429, "SUBSCRIPTION_STREAMS_LIMIT");
    assert.equal((await subs.dropStream("a", "e/1")).status, 204);
    assert.equal((await subs.addStreams("a", ["e/6"])).status, 204);
    assertError(await subs.addStreams("a", ["e/7"]), 429, "SUBSCRIPTION_STREAMS_LIMIT");
    assert.equal((await subs.del("a")).status, 204);
    assert.equal((await subs.put("b", { type: "webhook", streams: ["f/1", "f/2", "f/3", "f/4", "f/5"], webhook: HOOK })).status, 201,
      "a deleted subscription's streams make room");
    assert.deepEqual(await explicit(subs, "b"), ["f/1", "f/2", "f/3", "f/4", "f/5"]);
  });
});
