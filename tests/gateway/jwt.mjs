// JWT access tokens (RFC 9068) for the gateway tests, minted with Node's
// crypto only: an issuer with three keys (HS256, ES256 with the JWS
// signature encoding, Ed25519 as EdDSA), its entry for the tenants file
// (keys inline, or a JWKS file or URL) and its JWKS document, and tokens
// broken on purpose (another key, alg none, a DER signature, a wrong typ).
import crypto from "node:crypto";

const b64u = (buf) => Buffer.from(buf).toString("base64url");
const json64 = (obj) => b64u(JSON.stringify(obj));

export class JwtIssuer {
  // issuer: the `iss` value; audience; leeway (seconds); tenantClaim (the
  // claim naming the tenant, the file's default when absent); scopeRights.
  constructor({ issuer, audience = "runnel", leeway = 0, tenantClaim = null, scopeRights = false }) {
    Object.assign(this, { issuer, audience, leeway, tenantClaim, scopeRights });
    this.secret = crypto.randomBytes(32);
    this.es = crypto.generateKeyPairSync("ec", { namedCurve: "P-256" });
    this.ed = crypto.generateKeyPairSync("ed25519");
    const tag = crypto.randomBytes(3).toString("hex");
    this.kids = { HS256: `h-${tag}`, ES256: `e-${tag}`, EdDSA: `d-${tag}` };
  }

  // The issuer's entry in the tenants file. keys: "inline" (all three in
  // `keys`), or "jwks" (the HS256 secret inline, the public keys from
  // jwksFile or jwksUrl, whichever is given).
  entry({ keys = "inline", jwksFile = null, jwksUrl = null } = {}) {
    const e = { issuer: this.issuer, audience: this.audience, leeway_seconds: this.leeway };
    if (this.tenantClaim) e.tenant_claim = this.tenantClaim;
    if (this.scopeRights) e.scope_rights = true;
    e.keys = [{ kid: this.kids.HS256, secret_base64url: b64u(this.secret) }];
    if (keys === "inline") {
      e.keys.push({ kid: this.kids.ES256, pem: this.esPem });
      e.keys.push({ kid: this.kids.EdDSA, pem: this.ed.publicKey.export({ type: "spki", format: "pem" }) });
    }
    if (jwksFile) e.jwks_file = jwksFile;
    if (jwksUrl) e.jwks_url = jwksUrl;
    return e;
  }

  // The ES256 public key as the file holds it (PEM).
  get esPem() {
    return this.es.publicKey.export({ type: "spki", format: "pem" });
  }

  // The public keys as a JWKS document.
  jwks() {
    const jwk = (key, kid, alg) => ({ ...key.export({ format: "jwk" }), kid, alg, use: "sig" });
    return { keys: [jwk(this.es.publicKey, this.kids.ES256, "ES256"), jwk(this.ed.publicKey, this.kids.EdDSA, "EdDSA")] };
  }

  // The secret of the HS256 key as the file holds it (a secret the logs
  // must never show).
  get secretText() {
    return b64u(this.secret);
  }

  // A token for `tenant`: alg HS256, ES256, EdDSA or none; ttl seconds
  // from now (negative: already expired); claims added or overriding
  // (null removes one); header members added or overriding; der: an ES256
  // signature in DER, not the JWS encoding; otherKey: signed by a key the
  // gateway does not know under the same kid; hmacKey: an HS256
  // signature by these bytes (an alg confusion: a public key as the secret).
  mint({ tenant, alg = "HS256", ttl = 300, scope = null, claims = {}, header = {}, der = false, otherKey = false, hmacKey = null }) {
    const now = Math.floor(Date.now() / 1000);
    const h = { alg, typ: "at+jwt", ...(alg === "none" ? {} : { kid: this.kids[alg] }), ...header };
    const c = {
      iss: this.issuer,
      aud: this.audience,
      sub: `user-${tenant}`,
      [this.tenantClaim ?? "client_id"]: tenant,
      iat: now,
      exp: now + ttl,
      jti: crypto.randomUUID(),
      ...(scope === null ? {} : { scope }),
      ...claims,
    };
    for (const [k, v] of Object.entries(c)) if (v === null) delete c[k];
    const input = `${json64(h)}.${json64(c)}`;
    return `${input}.${this.#sign(alg, input, { der, otherKey, hmacKey })}`;
  }

  #sign(alg, input, { der, otherKey, hmacKey }) {
    const data = Buffer.from(input, "latin1");
    if (alg === "none") return "";
    if (alg === "HS256") {
      const secret = hmacKey ?? (otherKey ? crypto.randomBytes(32) : this.secret);
      return b64u(crypto.createHmac("sha256", secret).update(data).digest());
    }
    if (alg === "ES256") {
      const key = otherKey ? crypto.generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey : this.es.privateKey;
      return b64u(crypto.sign("sha256", data, { key, dsaEncoding: der ? "der" : "ieee-p1363" }));
    }
    if (alg === "EdDSA") {
      const key = otherKey ? crypto.generateKeyPairSync("ed25519").privateKey : this.ed.privateKey;
      return b64u(crypto.sign(null, data, key));
    }
    throw new Error(`unknown alg ${alg}`);
  }
}
