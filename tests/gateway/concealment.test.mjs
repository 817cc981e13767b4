// Concealment (docs/GATEWAY.md "Concealment", extensions §11), through a
// standalone gateway in front of a real node and through the embedded gate,
// the same table in both with identical answers. For GET, HEAD, PUT, POST
// and DELETE, a tenant without rights gets, for an existing stream of an
// existing bucket, a missing stream of it and a bucket that does not
// exist, the same bytes (status line, every header line in order but Date,
// body); those bytes are the node's own 404 BUCKET_NOT_FOUND for a bucket
// that does not exist as the gate passes it through to a tenant that may
// read that bucket, less Ursula-Protocol and Ursula-Cluster-Id; and the
// node's 404 asked of a node directly, less those two and the CORS headers
// (the node sends `Access-Control-Allow-Origin: *`, which the gate never
// does). A PUT creates its stream on a node, so its reference is the
// node's answer to a GET. A bucket create, a subresource, a /v1/stream/
// name outside the tenant's prefix and a stream id outside its prefix are
// concealed the same way; nothing is created by a concealed write.
import assert from "node:assert/strict";
import { assertOwn, assertSameAnswer } from "./checks.mjs";
import { modeTable } from "./table.mjs";
import { Server, bearer, rawRequest, seed, startDeployment, tenant, tenantsDoc } from "./lib.mjs";

const T = {
  full: tenant({ "*": "rwa" }),
  outsider: tenant({ orders: "rw", void: "rw", "v1:chat/": "rw", "logs/eu-": "rw" }),
};
const IDENTITY = ["ursula-protocol", "ursula-cluster-id"];
const CORS = ["access-control-allow-origin", "access-control-expose-headers", "access-control-allow-methods",
  "access-control-allow-headers", "access-control-max-age", "vary"];

async function start(mode) {
  const d = await startDeployment(mode, { tenants: tenantsDoc(T) });
  await seed(d, T.full.key, [["/hidden/h-1", "secret\n"], ["/orders/o-1", "hello\n"], ["/logs/us-1", "us\n"], ["/logs/eu-1", "eu\n"],
    ["/v1/stream/private/x", "v1\n"]]);
  // the node asked directly: the backing node, or (embedded: the node is
  // the gate) a plain node of the same build
  const ref = mode === "standalone" ? d.node : await new Server().start();
  return { d, ref };
}

const body = (method) => (method === "PUT" || method === "POST" ? "x\n" : undefined);
const headersFor = (method, key) => ({
  ...(key ? bearer(key) : {}),
  ...(body(method) ? { "Content-Type": "text/plain" } : {}),
});
const gate = (ctx, method, path, key = T.outsider.key) =>
  rawRequest(ctx.d.port, method, path, { headers: headersFor(method, key), body: body(method) });
const direct = (ctx, method, path) => rawRequest(ctx.ref.port, method, path, { headers: headersFor(method, null), body: body(method) });
const refMethod = (method) => (method === "PUT" ? "GET" : method);

function methodCase(method) {
  return {
    name: `${method}: existing and missing, the node's 404 less its identity`,
    run: async (ctx) => {
      const isHead = method === "HEAD";
      const existing = await gate(ctx, method, "/hidden/h-1");
      assertOwn(existing, 404, "BUCKET_NOT_FOUND", { isHead, what: `${method} of an existing stream` });
      const missingStream = await gate(ctx, method, "/hidden/nope");
      const missingBucket = await gate(ctx, method, "/ghost/g-1");
      assertSameAnswer(existing, missingStream, [], `${method}: an existing stream and a missing one of the bucket`);
      assertSameAnswer(existing, missingBucket, [], `${method}: an existing bucket and a missing one`);
      // the node's own 404 passed through to a tenant that may read (void: never created)
      const passed = await gate(ctx, refMethod(method), "/void/v-1");
      assert.equal(passed.status, 404, `the node's 404 through the gate: ${passed.text}`);
      assert.equal(passed.header("ursula-protocol"), "2", "the passed-through 404 carries the node's identity");
      assertSameAnswer(existing, passed, IDENTITY, `${method}: concealment vs the node's 404 through the gate`);
      // the node's 404 asked directly
      const node = await direct(ctx, refMethod(method), "/ghost2/x");
      assert.equal(node.status, 404, `the node's own answer: ${node.text}`);
      assertSameAnswer(existing, node, [...IDENTITY, ...CORS], `${method}: concealment vs the node's 404 asked directly`);
      // nothing was created
      for (const p of ["/hidden/nope", "/ghost/g-1"]) {
        assert.equal((await gate(ctx, "HEAD", p, T.full.key)).status, 404, `${method} concealed: ${p} not created`);
      }
      return existing;
    },
  };
}

// Another concealed request: the same bytes as the GET (or PUT) of a
// missing bucket.
function sameAs(name, method, path, like) {
  return {
    name,
    run: async (ctx) => {
      const r = await gate(ctx, method, path);
      assertSameAnswer(r, await gate(ctx, like, "/ghost/g-1"), [], name);
      return r;
    },
  };
}

const cases = [
  ...["GET", "HEAD", "PUT", "POST", "DELETE"].map(methodCase),
  sameAs("a bucket create (PUT /bucket)", "PUT", "/hidden", "PUT"),
  sameAs("a subresource (bootstrap)", "GET", "/hidden/h-1/bootstrap", "GET"),
  sameAs("a catch-up read with a query", "GET", "/hidden/h-1?offset=-1&max_bytes=10", "GET"),
  sameAs("a live read", "GET", "/hidden/h-1?offset=now&live=long-poll&timeout_ms=100", "GET"),
  {
    name: "a /v1/stream/ name outside the tenant's prefix: existing and missing answer the same",
    run: async (ctx) => {
      // names of one length; a message may name what the request named
      const ask = async (name) => {
        const r = await gate(ctx, "GET", `/v1/stream/private/${name}?offset=-1`);
        return { ...r, body: Buffer.from(r.text.replaceAll(`/v1/stream/private/${name}`, "NAME")) };
      };
      const existing = await ask("x");
      assert.equal(existing.status, 404, existing.text);
      assert.equal(existing.header("ursula-protocol"), null, "concealment carries no identity");
      assertSameAnswer(existing, await ask("y"), [], "an existing v1 name and a missing one");
      return existing;
    },
  },
  {
    // GATEWAY.md: on /v1/stream/ the node's answer for a missing stream
    name: "a /v1/stream/ name outside the tenant's prefix is the node's STREAM_NOT_FOUND",
    run: async (ctx) => {
      const r = await gate(ctx, "GET", "/v1/stream/private/x?offset=-1");
      assert.equal(r.status, 404, r.text);
      assert.equal(JSON.parse(r.text).error.code, "STREAM_NOT_FOUND", r.text);
      assert.equal(r.header("ursula-protocol"), null, "no server identity on a concealing answer");
      return r;
    },
  },
  sameAs("a stream id outside the tenant's prefix (logs/eu-)", "GET", "/logs/us-1?offset=-1", "GET"),
  {
    name: "a stream id inside the tenant's prefix is the node's",
    run: async (ctx) => {
      const r = await gate(ctx, "GET", "/logs/eu-1?offset=-1");
      assert.equal(r.status, 200, r.text);
      assert.equal(r.text, "eu\n");
      return null;
    },
  },
];

modeTable("concealment", {
  start,
  stop: async (ctx) => {
    if (ctx.ref !== ctx.d.node) await ctx.ref.stop();
    await ctx.d.stop();
  },
  cases,
});
