// The gate's refusals of credentials and rights (docs/GATEWAY.md
// "Credentials", "The tenants file", "The gateway's own answers";
// extensions §10-§11), through a standalone gateway in front of a real node
// and through the gate embedded in `runnel serve`, the same table in both
// with identical answers: 401 INVALID_CREDENTIAL (no credential, an unknown
// key, another scheme, JWTs with a bad signature of each algorithm, another
// issuer or audience, typ other than at+jwt, alg none, an alg confusion, a
// DER ES256 signature, no tenant claim, an unknown tenant, nbf ahead, no
// exp, access_token on a POST), 401 CREDENTIAL_EXPIRED (a key, a JWT), 402
// for an unpaid tenant, 403 FORBIDDEN (a write with read rights, outside
// the pattern granting w, under a scope that narrows to read; an operator
// route without admin, the operator's plane and a purge included), 403
// ACCOUNT_REVOKED, the concealing 404 (also for
// a scope that tries to widen the rights), 413 with the tenant's lowered
// limit and that limit on a successful HEAD, and 503
// AUTHENTICATION_UNAVAILABLE for an issuer whose JWKS URL is down; each in
// its exact shape, and nothing applied by a refused write. The controls
// (each credential form done right, leeway, an audience list, a custom
// tenant claim, scopes kept or ignored, a union of patterns, a v1: prefix,
// admin on the operator routes and the operator's plane, the console's
// files without a credential) show that the node's answer passes through.
import assert from "node:assert/strict";
import { after, before } from "node:test";
import { assertFromNode, assertOwn } from "./checks.mjs";
import { modeTable } from "./table.mjs";
import {
  Issuer, bearer, content, deadUrl, jwksStub, newKey, rawRequest, seed, startDeployment, tenant, tenantsDoc,
} from "./lib.mjs";

const iss = new Issuer({ issuer: "https://id.test/", leeway: 5 });
const scoped = new Issuer({ issuer: "https://scoped.test/", scopeRights: true }); // scopes narrow the rights
const viaUrl = new Issuer({ issuer: "https://jwks.test/" }); // public keys from a JWKS URL that answers
const down = new Issuer({ issuer: "https://down.test/" }); // public keys from a JWKS URL that does not
const org = new Issuer({ issuer: "https://org.test/", tenantClaim: "org" }); // the tenant in another claim
const T = {
  full: tenant({ "*": "rwa" }),
  acme: tenant({ orders: "rw", audit: "r", "v1:chat/": "rw" }),
  ro: tenant({ orders: "r" }),
  unpaid: tenant({ orders: "rw" }, { status: "unpaid" }),
  revoked: tenant({ orders: "rw" }, { status: "revoked" }),
  old: tenant({ orders: "rw" }, {}, { expires: "2020-01-01T00:00:00Z" }),
  small: tenant({ orders: "rw" }, { limits: { max_request_bytes: 1000 } }),
  mix: tenant({ orders: "r", "orders/eu-": "w" }),
};
const NODE_LIMIT = "33554432";
let jwks;

before(async () => {
  jwks = await jwksStub(viaUrl.jwks());
});
after(async () => {
  await jwks?.close();
});

async function start(mode) {
  const issuers = [
    iss.entry(),
    viaUrl.entry({ keys: "jwks", jwksUrl: `${jwks.url}/jwks.json` }),
    down.entry({ keys: "jwks", jwksUrl: `${await deadUrl()}/jwks.json` }),
    org.entry(),
    scoped.entry(),
  ];
  const d = await startDeployment(mode, { tenants: tenantsDoc(T, { issuers }) });
  await seed(d, T.full.key, [["/orders/o-1", "hello\n"], ["/orders/eu-1", ""], ["/audit/a-1", "audit\n"], ["/secret/s-1", "hidden\n"],
    ["/v1/stream/chat/room", "chat\n"]]);
  return { d };
}

// One request through the gate on a connection of its own; cred: a key or
// token sent as a bearer credential.
function ask(ctx, method, path, { cred = null, headers = {}, body } = {}) {
  return rawRequest(ctx.d.port, method, path, { headers: { ...(cred ? bearer(cred) : {}), ...headers }, body });
}

const GET_O1 = "/orders/o-1?offset=-1";
const now = () => Math.floor(Date.now() / 1000);

// A refusal case: the request, then the shape of the gateway's own answer.
function refusal(name, status, code, send, opts = {}) {
  return {
    name,
    run: async (ctx) => {
      const r = await send(ctx);
      assertOwn(r, status, code, { what: name, ...opts });
      return r;
    },
  };
}

// A control case: the node's own answer passes through.
function control(name, status, send, check = () => {}) {
  return {
    name,
    run: async (ctx) => {
      const r = await send(ctx);
      assertFromNode(r, status, name);
      check(r);
      return null;
    },
  };
}

// A refused write: the answer, then the stream unchanged.
function refusedWrite(name, status, code, send, opts = {}) {
  return {
    name,
    run: async (ctx) => {
      const before = await content(ctx.d, T.full.key, "/orders/o-1");
      const r = await send(ctx);
      assertOwn(r, status, code, { what: name, ...opts });
      assert.equal(await content(ctx.d, T.full.key, "/orders/o-1"), before, `${name}: the refused write applied nothing`);
      return r;
    },
  };
}

const post = (cred, body = "refused-write\n", path = "/orders/o-1") => (ctx) =>
  ask(ctx, "POST", path, { cred, headers: { "Content-Type": "text/plain" }, body });

const cases = [
  // the controls: every credential form, done right, reaches the node
  control("an API key reaches the node", 200, (ctx) => ask(ctx, "GET", GET_O1, { cred: T.acme.key }), (r) => assert.equal(r.text, "hello\n")),
  control("an HS256 JWT reaches the node", 200, (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme" }) })),
  control("an ES256 JWT reaches the node", 200, (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", alg: "ES256" }) })),
  control("an EdDSA JWT reaches the node", 200, (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", alg: "EdDSA" }) })),
  control("a JWT verified by a key of a JWKS URL reaches the node", 200, (ctx) => ask(ctx, "GET", GET_O1, { cred: viaUrl.mint({ tenant: "acme", alg: "ES256" }) })),
  control("a JWT expired within the issuer's leeway reaches the node", 200, (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", ttl: -2 }) })),
  control("access_token on a GET reaches the node", 200, (ctx) => ask(ctx, "GET", `${GET_O1}&access_token=${iss.mint({ tenant: "acme" })}`)),
  control("a write with write rights reaches the node", 204, post(T.acme.key, "acme\n")),
  control("a scope that keeps read reads", 200, (ctx) => ask(ctx, "GET", GET_O1, { cred: scoped.mint({ tenant: "acme", scope: "orders:r" }) })),
  control("a scope is ignored by an issuer without scope_rights", 200,
    (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", scope: "audit:r" }) })),
  // GATEWAY.md: with scope_rights a token without a scope claim has no rights
  refusal("with scope_rights, a token without a scope claim: concealed", 404, "BUCKET_NOT_FOUND",
    (ctx) => ask(ctx, "GET", GET_O1, { cred: scoped.mint({ tenant: "acme" }) })),
  control("an audience list naming the audience", 200, (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", claims: { aud: ["other", "runnel"] } }) })),
  control("the issuer's tenant_claim names the tenant", 200, (ctx) => ask(ctx, "GET", GET_O1, { cred: org.mint({ tenant: "acme" }) })),
  control("a /v1/stream/ name inside the tenant's prefix (v1:chat/)", 200, (ctx) => ask(ctx, "GET", "/v1/stream/chat/room?offset=-1", { cred: T.acme.key })),
  control("rights are the union of the matching patterns (r on orders, w on orders/eu-)", 204, post(T.mix.key, "mix\n", "/orders/eu-1")),
  {
    name: "admin on * opens the gate's metrics",
    run: async (ctx) => {
      const r = await ask(ctx, "GET", ctx.d.metricsPath, { cred: T.full.key });
      assert.equal(r.status, 200, r.text);
      assert.match(r.text, /runnel_gateway_requests_total/);
      return null;
    },
  },
  control("admin on * opens the node's operator routes", 200, (ctx) => ask(ctx, "GET", "/__runnel/metrics", { cred: T.full.key }),
    (r) => assert.match(r.text, /runnel_http_requests_total/)),
  control("admin on * opens the operator's plane (/__runnel/admin/)", 200,
    (ctx) => ask(ctx, "GET", "/__runnel/admin/buckets", { cred: T.full.key }),
    (r) => assert.ok(JSON.parse(r.text).buckets.some((b) => b.bucket === "orders"), r.text)),
  {
    name: "livez, readyz and the console's files need no credential",
    run: async (ctx) => {
      for (const p of ["/__runnel/livez", "/__runnel/readyz", "/__runnel/console", "/__runnel/console/app.js"])
        assert.equal((await ask(ctx, "GET", p)).status, 200, p);
      return null;
    },
  },
  // 401 INVALID_CREDENTIAL
  refusal("no credential", 401, "INVALID_CREDENTIAL", (ctx) => ask(ctx, "GET", GET_O1)),
  refusal("no credential, HEAD", 401, "INVALID_CREDENTIAL", (ctx) => ask(ctx, "HEAD", "/orders/o-1"), { isHead: true }),
  refusedWrite("no credential, POST", 401, "INVALID_CREDENTIAL", post(null)),
  refusal("a key not in the file", 401, "INVALID_CREDENTIAL", (ctx) => ask(ctx, "GET", GET_O1, { cred: newKey() })),
  refusal("a key in another scheme (Basic)", 401, "INVALID_CREDENTIAL",
    (ctx) => ask(ctx, "GET", GET_O1, { headers: { Authorization: `Basic ${Buffer.from(`acme:${T.acme.key}`).toString("base64")}` } })),
  refusal("an empty bearer credential", 401, "INVALID_CREDENTIAL", (ctx) => ask(ctx, "GET", GET_O1, { headers: { Authorization: "Bearer " } })),
  refusal("an HS256 JWT signed by another key", 401, "INVALID_CREDENTIAL", (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", otherKey: true }) })),
  refusal("an ES256 JWT signed by another key", 401, "INVALID_CREDENTIAL",
    (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", alg: "ES256", otherKey: true }) })),
  refusal("an EdDSA JWT signed by another key", 401, "INVALID_CREDENTIAL",
    (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", alg: "EdDSA", otherKey: true }) })),
  refusal("an ES256 JWT with a DER signature", 401, "INVALID_CREDENTIAL", (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", alg: "ES256", der: true }) })),
  refusal("a JWT of another issuer", 401, "INVALID_CREDENTIAL", (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", claims: { iss: "https://evil.test/" } }) })),
  refusal("a JWT for another audience", 401, "INVALID_CREDENTIAL", (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", claims: { aud: "not-runnel" } }) })),
  refusal("a JWT whose typ is not at+jwt", 401, "INVALID_CREDENTIAL", (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", header: { typ: "JWT" } }) })),
  refusal("a JWT with alg none", 401, "INVALID_CREDENTIAL", (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", alg: "none" }) })),
  refusal("a JWT with alg none under a known kid", 401, "INVALID_CREDENTIAL",
    (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", alg: "none", header: { kid: iss.kids.HS256 } }) })),
  refusal("an HS256 JWT keyed by the ES256 public key (alg confusion)", 401, "INVALID_CREDENTIAL",
    (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", header: { kid: iss.kids.ES256 }, hmacKey: Buffer.from(iss.esPem) }) })),
  refusal("a JWT without the issuer's tenant_claim", 401, "INVALID_CREDENTIAL",
    (ctx) => ask(ctx, "GET", GET_O1, { cred: org.mint({ tenant: "acme", claims: { org: null, client_id: "acme" } }) })),
  refusal("a JWT naming a tenant not in the file", 401, "INVALID_CREDENTIAL", (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "nobody" }) })),
  refusal("a JWT whose nbf is ahead", 401, "INVALID_CREDENTIAL", (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", claims: { nbf: now() + 600 } }) })),
  refusal("a JWT without exp", 401, "INVALID_CREDENTIAL", (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", claims: { exp: null } }) })),
  refusedWrite("access_token on a POST (GET and HEAD only)", 401, "INVALID_CREDENTIAL",
    (ctx) => ask(ctx, "POST", `/orders/o-1?access_token=${T.acme.key}`, { headers: { "Content-Type": "text/plain" }, body: "query-cred\n" })),
  // 401 CREDENTIAL_EXPIRED
  refusal("an expired API key", 401, "CREDENTIAL_EXPIRED", (ctx) => ask(ctx, "GET", GET_O1, { cred: T.old.key })),
  refusedWrite("an expired API key, POST", 401, "CREDENTIAL_EXPIRED", post(T.old.key)),
  refusal("an expired JWT", 401, "CREDENTIAL_EXPIRED", (ctx) => ask(ctx, "GET", GET_O1, { cred: iss.mint({ tenant: "acme", ttl: -60 }) })),
  refusal("an expired JWT, HEAD", 401, "CREDENTIAL_EXPIRED", (ctx) => ask(ctx, "HEAD", "/orders/o-1", { cred: iss.mint({ tenant: "acme", ttl: -60 }) }), { isHead: true }),
  // 402, 403
  refusal("an unpaid tenant's read", 402, "PAYMENT_REQUIRED", (ctx) => ask(ctx, "GET", GET_O1, { cred: T.unpaid.key })),
  refusedWrite("an unpaid tenant's write", 402, "PAYMENT_REQUIRED", post(T.unpaid.key)),
  refusedWrite("a write with read rights only", 403, "FORBIDDEN", post(T.ro.key)),
  refusedWrite("a write outside the pattern that grants w", 403, "FORBIDDEN", post(T.mix.key)),
  refusedWrite("a write under a scope that narrows to read", 403, "FORBIDDEN", post(scoped.mint({ tenant: "acme", scope: "orders:r" }))),
  refusal("a delete with read rights only", 403, "FORBIDDEN", (ctx) => ask(ctx, "DELETE", "/orders/o-1", { cred: T.ro.key })),
  {
    name: "a create with read rights only",
    run: async (ctx) => {
      const r = await ask(ctx, "PUT", "/orders/ro-made", { cred: T.ro.key, headers: { "Content-Type": "text/plain" } });
      assertOwn(r, 403, "FORBIDDEN", { what: "PUT with read rights" });
      const h = await ask(ctx, "HEAD", "/orders/ro-made", { cred: T.full.key });
      assert.equal(h.status, 404, "the refused create made no stream");
      return r;
    },
  },
  refusedWrite("a write to a bucket of read rights (audit:r)", 403, "FORBIDDEN", post(T.acme.key, "x\n", "/audit/a-1")),
  refusal("an operator route without admin", 403, "FORBIDDEN", (ctx) => ask(ctx, "GET", "/__runnel/metrics", { cred: T.acme.key })),
  refusal("the operator's plane without admin", 403, "FORBIDDEN", (ctx) => ask(ctx, "GET", "/__runnel/admin/buckets", { cred: T.acme.key })),
  refusal("a purge without admin", 403, "FORBIDDEN", (ctx) => ask(ctx, "POST", "/__runnel/admin/buckets/orders/purge", { cred: T.acme.key })),
  refusal("the gate's metrics without admin", 403, "FORBIDDEN", (ctx) => ask(ctx, "GET", ctx.d.metricsPath, { cred: T.acme.key })),
  refusal("a revoked tenant's read", 403, "ACCOUNT_REVOKED", (ctx) => ask(ctx, "GET", GET_O1, { cred: T.revoked.key })),
  refusedWrite("a revoked tenant's write", 403, "ACCOUNT_REVOKED", post(T.revoked.key)),
  // 404 (concealment; compared byte for byte in concealment.test.mjs)
  refusal("a bucket the tenant has no rights on", 404, "BUCKET_NOT_FOUND", (ctx) => ask(ctx, "GET", "/secret/s-1?offset=-1", { cred: T.acme.key })),
  refusal("a scope cannot widen the tenant's rights", 404, "BUCKET_NOT_FOUND",
    (ctx) => ask(ctx, "GET", "/secret/s-1?offset=-1", { cred: scoped.mint({ tenant: "acme", scope: "secret:rw" }) })),
  refusal("a scope that leaves no read conceals", 404, "BUCKET_NOT_FOUND", (ctx) => ask(ctx, "GET", GET_O1, { cred: scoped.mint({ tenant: "acme", scope: "audit:r" }) })),
  // 413 and the lowered limit
  refusedWrite("a body over the tenant's max_request_bytes", 413, "REQUEST_TOO_LARGE", post(T.small.key, "x".repeat(1001)), { maxBytes: 1000 }),
  {
    name: "a create with a body over the tenant's limit",
    run: async (ctx) => {
      const r = await ask(ctx, "PUT", "/orders/too-big", { cred: T.small.key, headers: { "Content-Type": "text/plain" }, body: "y".repeat(1001) });
      assertOwn(r, 413, "REQUEST_TOO_LARGE", { maxBytes: 1000, what: "PUT over the limit" });
      assert.equal((await ask(ctx, "HEAD", "/orders/too-big", { cred: T.full.key })).status, 404, "the refused create made no stream");
      return r;
    },
  },
  control("a body at the tenant's limit is forwarded", 204, post(T.small.key, "z".repeat(1000))),
  control("a successful HEAD carries the tenant's lower limit", 200, (ctx) => ask(ctx, "HEAD", "/orders/o-1", { cred: T.small.key }),
    (r) => assert.equal(r.header("ursula-max-request-bytes"), "1000")),
  control("a successful HEAD without a tenant limit carries the node's", 200, (ctx) => ask(ctx, "HEAD", "/orders/o-1", { cred: T.acme.key }),
    (r) => assert.equal(r.header("ursula-max-request-bytes"), NODE_LIMIT)),
  // 503: the issuer's JWKS URL does not answer
  refusal("a JWT whose issuer's JWKS URL is down", 503, "AUTHENTICATION_UNAVAILABLE",
    (ctx) => ask(ctx, "GET", GET_O1, { cred: down.mint({ tenant: "acme", alg: "ES256" }) })),
  refusedWrite("a write with a JWT whose issuer's JWKS URL is down", 503, "AUTHENTICATION_UNAVAILABLE", post(down.mint({ tenant: "acme", alg: "EdDSA" }))),
];

modeTable("credentials and rights", { start, cases });
