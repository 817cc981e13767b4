// The request limit of extensions §10: a server MUST accept a request body
// of up to 32 MiB on every route. A body of exactly 32 MiB goes to every
// route that takes a body (both surfaces' creates and appends, a JSON
// stream, a snapshot publish, a part, a parts commit, a retention advance,
// a bucket's create, and the subscription API: create, claim, ack, release,
// a webhook callback); each answers as that route answers, never 413 (a
// route whose rules the body breaks refuses it by those rules: the 32 MiB
// commit list, the subscription bodies). And the start refuses
// --max-body-bytes below 32 MiB (flag or environment), before touching the
// disk, unless --test-hooks marks the server as a test's: the tests use
// small limits to reach the size refusals cheaply.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Server, tempDir } from "./lib/server.mjs";
import { MAX_REQUEST_BYTES, head, post, put, req } from "./lib/bucket.mjs";
import { runCli, printConfig } from "./lib/ops.mjs";
import { snapshotDigestOf } from "./lib/snap.mjs";

describe("--max-body-bytes below 32 MiB", () => {
  const work = tempDir("runnel-limit-");
  for (const [how, args, env] of [
    ["the flag", ["--max-body-bytes", String(MAX_REQUEST_BYTES - 1)], {}],
    ["the environment", [], { RUNNEL_MAX_BODY_BYTES: "1048576" }],
  ]) {
    test(`is refused at start from ${how}, nothing written`, () => {
      const dir = path.join(work, `never-${how.length}`);
      const r = runCli(["serve", "--data-dir", dir, ...args], { env });
      assert.equal(r.code, 2, `exit code: ${r.stderr}`);
      assert.match(r.stderr, /--max-body-bytes .*33554432 .*--test-hooks/);
      assert.ok(!fs.existsSync(dir), "the data directory was not created");
    });
  }
  test("is taken with --test-hooks (a test's server), and 32 MiB without", () => {
    assert.equal(printConfig(["--test-hooks", "--max-body-bytes", "1048576"])["max-body-bytes"], "1048576");
    assert.equal(printConfig(["--max-body-bytes", String(MAX_REQUEST_BYTES)])["max-body-bytes"], String(MAX_REQUEST_BYTES));
  });
});

describe("a 32 MiB body on every route that takes one", () => {
  const server = new Server({ args: ["--webhook-allow-loopback"] });
  before(() => server.start());
  after(() => server.stop());
  const octets = Buffer.alloc(MAX_REQUEST_BYTES, 0x61);
  // One JSON message of exactly 32 MiB: a string.
  const jsonMessage = Buffer.alloc(MAX_REQUEST_BYTES, 0x62);
  jsonMessage[0] = jsonMessage[jsonMessage.length - 1] = 0x22;
  // A JSON object of exactly 32 MiB: the fields a route needs, padded.
  const padded = (fields) => {
    const start = JSON.stringify({ ...fields, pad: "" });
    const text = start.slice(0, -2) + "x".repeat(MAX_REQUEST_BYTES - start.length) + '"}';
    const b = Buffer.from(text);
    assert.equal(b.length, MAX_REQUEST_BYTES);
    return b;
  };
  const answers = [];
  const send = async (what, method, url, body, headers = {}) => {
    const r = await req(url, { method, headers: { "content-type": "application/octet-stream", ...headers }, body, timeoutMs: 60000 });
    answers.push(`${what}: ${r.status}`);
    assert.notEqual(r.status, 413, `${what} refused a 32 MiB body: ${r.text}`);
    assert.ok(r.status < 500, `${what}: ${r.status} ${r.text}`);
    return r;
  };

  test("each answers as its route does, none 413", async () => {
    const v1 = `${server.url}/v1/stream/limit/octets`;
    assert.equal((await send("v1 create", "PUT", v1, octets)).status, 201);
    assert.equal((await send("v1 append", "POST", v1, octets)).status, 204);
    const v1json = `${server.url}/v1/stream/limit/json`;
    const jt = { "content-type": "application/json" };
    assert.equal((await send("v1 JSON create", "PUT", v1json, jsonMessage, jt)).status, 201);
    assert.equal((await send("v1 JSON append", "POST", v1json, jsonMessage, jt)).status, 204);

    assert.equal((await send("bucket create", "PUT", `${server.url}/limitbk`, octets)).status, 201);
    const s = `${server.url}/limitbk/s`;
    assert.equal((await send("stream create", "PUT", s, octets)).status, 201);
    const appended = await send("stream append", "POST", s, octets);
    assert.equal(appended.status, 204);
    const tail = appended.headers.get("stream-next-offset");
    const type = "application/octet-stream";
    const published = await send("snapshot publish", "PUT", `${s}/snapshot/${tail}`, octets);
    assert.equal(published.status, 204);
    assert.equal(published.headers.get("stream-snapshot-digest"), await snapshotDigestOf(type, [octets]));
    assert.equal((await send("retention", "PUT", `${s}/retention/${tail}`, octets)).status, 204);
    const more = await send("stream append", "POST", s, Buffer.from("z"));
    const tail2 = more.headers.get("stream-next-offset");
    const part = await send("part", "POST", `${s}/snapshot/${tail2}/parts`, octets);
    assert.equal(part.status, 201);
    const commit = await send("parts commit", "PUT", `${s}/snapshot/${tail2}`, octets, {
      "stream-snapshot-parts": "1",
      "stream-snapshot-digest": "0".repeat(64),
    });
    assert.equal(commit.status, 400, "a 32 MiB list of part ids breaks the commit's rules");
    assert.equal((await head(s)).headers.get("stream-snapshot-offset"), tail, "the commit published nothing");

    const jsonType = { "content-type": "application/json" };
    const subs = `${server.url}/v1/stream/__ds/subscriptions`;
    assert.equal((await put(`${server.url}/v1/stream/limit/wake`, { type: "application/json" })).status, 201);
    await send("subscription create", "PUT", `${subs}/limit-sub`, padded({ type: "pull-wake", pattern: "limit/*", wake_stream: "limit/wake" }), jsonType);
    assert.equal((await put(`${subs}/limit-sub2`, { type: "application/json", body: JSON.stringify({ type: "pull-wake", pattern: "limit/*", wake_stream: "limit/wake" }) })).status, 201);
    await post(v1, "wake", { type: "application/octet-stream" });
    const claim = await send("claim", "POST", `${subs}/limit-sub2/claim`, padded({ worker: "w" }), jsonType);
    const token = claim.status === 200 ? JSON.parse(claim.text).token : "none";
    const auth = { ...jsonType, authorization: `Bearer ${token}` };
    await send("ack", "POST", `${subs}/limit-sub2/ack`, padded({ wake_id: "w", generation: 1 }), auth);
    await send("release", "POST", `${subs}/limit-sub2/release`, padded({ wake_id: "w", generation: 1 }), auth);
    await send("webhook callback", "POST", `${subs}/limit-sub2/callback`, padded({ wake_id: "w", generation: 1 }), auth);
    console.log(answers.join("\n"));
  });
});
