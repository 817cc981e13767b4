// jwt_corpus.mjs - writes tests/unit/jwt_corpus.json, the tokens
// tests/unit/test_jwt.c checks src/gateway/ against, made by an independent
// implementation (Node.js crypto: HMAC, ECDSA P-256 with IEEE P1363 and DER
// signatures, Ed25519) with fresh keys. The corpus is committed; run this
// again (node tests/unit/jwt_corpus.mjs) only to change it.
//
// Output: the policy's fixed now, issuer and audience; the public keys as
// PEM and as one JWK Set (plus unusable keys the verifier must skip or
// refuse); and each token with the status it must get and, for valid ones,
// the claims it carries.
import crypto from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const NOW = 1767225600; // 2026-01-01T00:00:00Z
const ISS = 'https://issuer.example';
const AUD = 'runnel';

const b64 = (x) => Buffer.from(x).toString('base64url');
const secret = crypto.randomBytes(32);
const ec = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
const ed = crypto.generateKeyPairSync('ed25519');
const pem = (k) => k.export({ type: 'spki', format: 'pem' });
const ecPem = pem(ec.publicKey);
const edPem = pem(ed.publicKey);

const KEYS = {
  HS256: (input) => crypto.createHmac('sha256', secret).update(input).digest(),
  ES256: (input) => crypto.sign('sha256', input, { key: ec.privateKey, dsaEncoding: 'ieee-p1363' }),
  EdDSA: (input) => crypto.sign(null, input, ed.privateKey),
};
const KID = { HS256: 'hs', ES256: 'ec', EdDSA: 'ed' };
// signers with keys of the right kind that the verifier does not have
const otherEc = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
const otherEd = crypto.generateKeyPairSync('ed25519').privateKey;
const otherSecret = crypto.randomBytes(32);
const OTHER = {
  HS256: (input) => crypto.createHmac('sha256', otherSecret).update(input).digest(),
  ES256: (input) => crypto.sign('sha256', input, { key: otherEc, dsaEncoding: 'ieee-p1363' }),
  EdDSA: (input) => crypto.sign(null, input, otherEd),
};
const SIG_LEN = { HS256: 43, ES256: 86, EdDSA: 86 }; // base64url characters

// A token: header and claims are objects (serialized here) or raw text;
// sign maps the signing input to the signature bytes.
function token(header, claims, sign) {
  const text = (v) => (typeof v === 'string' ? v : JSON.stringify(v));
  const input = b64(text(header)) + '.' + b64(text(claims));
  return input + '.' + b64(sign(input));
}

function claimsAt(extra = {}) {
  return {
    iss: ISS, aud: AUD, sub: 'user-1', client_id: 'client-7', tenant: 'acme',
    scope: 'read write admin:x', iat: NOW - 10, nbf: NOW - 10, exp: NOW + 3600,
    jti: crypto.randomUUID(), ...extra,
  };
}

const tokens = [];
function add(name, expect, tok, claims) {
  tokens.push({ name, expect, token: tok, ...(expect === 'OK' ? { claims } : {}) });
}

for (const alg of Object.keys(KEYS)) {
  const sign = KEYS[alg];
  const hdr = (extra = {}) => ({ alg, typ: 'at+jwt', kid: KID[alg], ...extra });
  const ok = (name, header, claims) => add(`${alg} ${name}`, 'OK', token(header, claims, sign), claims);
  const bad = (name, expect, header, claims, s = sign) =>
    add(`${alg} ${name}`, expect, token(header, claims, s));

  ok('valid', hdr(), claimsAt());
  const { kid: _kid, ...noKid } = hdr();
  ok('valid without kid', noKid, claimsAt());
  ok('valid, typ application/AT+JWT', hdr({ typ: 'application/AT+JWT' }), claimsAt());
  ok('valid, aud array', hdr(), claimsAt({ aud: ['other', AUD] }));
  ok('valid, fractional times', hdr(), claimsAt({ exp: NOW + 0.5, nbf: NOW - 0.5, iat: NOW - 0.5 }));
  bad('expired', 'EXPIRED', hdr(), claimsAt({ exp: NOW - 100 }));
  bad('not yet valid', 'NOT_YET_VALID', hdr(), claimsAt({ nbf: NOW + 600 }));
  bad('issued in the future', 'NOT_YET_VALID', hdr(), claimsAt({ iat: NOW + 600 }));
  bad('wrong issuer', 'WRONG_ISSUER', hdr(), claimsAt({ iss: ISS + '/' }));
  bad('wrong audience', 'WRONG_AUDIENCE', hdr(), claimsAt({ aud: 'runnel2' }));
  bad('wrong audience array', 'WRONG_AUDIENCE', hdr(), claimsAt({ aud: ['a', 'Runnel'] }));
  bad('empty audience array', 'WRONG_AUDIENCE', hdr(), claimsAt({ aud: [] }));
  bad('typ JWT', 'WRONG_TYPE', hdr({ typ: 'JWT' }), claimsAt());
  const { typ: _typ, ...noTyp } = hdr();
  bad('no typ', 'WRONG_TYPE', noTyp, claimsAt());
  bad('no exp', 'MISSING_CLAIM', hdr(), claimsAt({ exp: undefined }));
  bad('no aud', 'MISSING_CLAIM', hdr(), claimsAt({ aud: undefined }));
  bad('no iss', 'MISSING_CLAIM', hdr(), claimsAt({ iss: undefined }));
  bad('exp a string', 'MALFORMED', hdr(), claimsAt({ exp: String(NOW + 3600) }));
  bad('aud a number', 'MALFORMED', hdr(), claimsAt({ aud: 7 }));
  // a NUL in any string makes the JSON unreadable as C strings: refused whole
  bad('issuer with a NUL', 'MALFORMED', hdr(), claimsAt({ iss: ISS + '\u0000x' }));
  bad('another claim with a NUL', 'MALFORMED', hdr(), claimsAt({ tenant: 'acme\u0000evil' }));
  bad('kid unknown', 'UNKNOWN_KEY', hdr({ kid: 'nope' }), claimsAt());
  bad('kid a number', 'MALFORMED', hdr({ kid: 7 }), claimsAt());
  bad('kid with a NUL', 'MALFORMED', hdr({ kid: KID[alg] + '\u0000x' }), claimsAt());
  bad('duplicate alg', 'MALFORMED',
      `{"alg":"none","typ":"at+jwt","kid":"${KID[alg]}","alg":"${alg}"}`, claimsAt());
  bad('kid of another algorithm', 'ALG_REFUSED', hdr({ kid: alg === 'EdDSA' ? 'ec' : 'ed' }), claimsAt());
  bad('alg none', 'ALG_REFUSED', hdr({ alg: 'none' }), claimsAt(), () => Buffer.alloc(0));
  bad('alg lowercase', 'ALG_REFUSED', hdr({ alg: alg.toLowerCase() }), claimsAt());
  bad('crit header', 'MALFORMED', hdr({ crit: ['exp'] }), claimsAt());
  bad('duplicate exp', 'MALFORMED', hdr(),
      JSON.stringify(claimsAt()).replace('{', `{"exp":${NOW + 99999},`));
  bad('claims not JSON', 'MALFORMED', hdr(), '{"iss":');
  bad('claims an array', 'MALFORMED', hdr(), '[1,2]');
  bad('header not JSON', 'MALFORMED', `{"alg":"${alg}",`, claimsAt());
  bad('signature by another key', 'BAD_SIGNATURE', hdr(), claimsAt(), OTHER[alg]);
  const good = token(hdr(), claimsAt(), sign);
  const [h, p, s] = good.split('.');
  const flipped = Buffer.from(s, 'base64url');
  flipped[flipped.length >> 1] ^= 0x01;
  add(`${alg} signature bit-flipped`, 'BAD_SIGNATURE', `${h}.${p}.${b64(flipped)}`);
  add(`${alg} claims bit-flipped`, 'BAD_SIGNATURE', `${h}.${b64(Buffer.from(p, 'base64url').map((c, i) => (i === 5 ? c ^ 2 : c)))}.${s}`);
  const sigBytes = Buffer.from(s, 'base64url');
  add(`${alg} signature with one more byte`, 'BAD_SIGNATURE', `${h}.${p}.${b64(Buffer.concat([sigBytes, Buffer.from([0])]))}`);
  add(`${alg} signature of zeros`, 'BAD_SIGNATURE', `${h}.${p}.${b64(Buffer.alloc(sigBytes.length))}`);
  add(`${alg} signature cut by one byte`, 'BAD_SIGNATURE', `${h}.${p}.${b64(Buffer.from(s, 'base64url').subarray(1))}`);
  add(`${alg} truncated`, 'MALFORMED', good.slice(0, h.length + 1 + (p.length >> 1)));
  add(`${alg} no signature part`, 'MALFORMED', `${h}.${p}`);
  add(`${alg} four parts`, 'MALFORMED', `${good}.${s}`);
  add(`${alg} padded signature`, 'MALFORMED', `${good}=`);
  add(`${alg} standard base64 character`, 'MALFORMED', `${h}.${p}.+${s.slice(1)}`);
  const badChar = `${h}.${p.slice(0, 10)}!${p.slice(11)}`;
  add(`${alg} bad base64url in signed claims`, 'MALFORMED', badChar + '.' + b64(sign(badChar)));

  // the size bound: padding in the header and the claims so that the token
  // is exactly 8192, then 8193 bytes (a base64url part cannot have every
  // length, so the two paddings together reach each total)
  const b64len = (n) => Math.ceil((n * 4) / 3);
  for (const want of [8192, 8193]) {
    let found = null;
    for (let hp = 0; hp < 4 && !found; hp++) {
      for (let cp = 5000; cp < 6500 && !found; cp++) {
        const header = hdr({ pad: 'y'.repeat(hp) });
        const claims = claimsAt({ pad: 'x'.repeat(cp), jti: 'fixed-length-jti-000000000000000000' });
        const len = b64len(JSON.stringify(header).length) + 1 + b64len(JSON.stringify(claims).length) + 1 + SIG_LEN[alg];
        if (len === want) found = { header, claims };
      }
    }
    if (!found) throw new Error(`no padding gives ${want} bytes`);
    const t = token(found.header, found.claims, sign);
    if (t.length !== want) throw new Error(`size ${t.length}, not ${want}`);
    if (want === 8192) add(`${alg} 8192 bytes`, 'OK', t, found.claims);
    else add(`${alg} 8193 bytes`, 'MALFORMED', t);
  }
}

// ES256 with the DER signature encoding (Node's default) instead of r||s
{
  const input = b64(JSON.stringify({ alg: 'ES256', typ: 'at+jwt', kid: 'ec' })) + '.' + b64(JSON.stringify(claimsAt()));
  add('ES256 DER signature', 'BAD_SIGNATURE', input + '.' + b64(crypto.sign('sha256', input, ec.privateKey)));
}
// alg swapped: HS256 with a public key's PEM bytes as the HMAC secret. With
// the key's kid the key's algorithm refuses it; without kid, against a set
// that has an HS256 key, the signature is checked and fails; against a set of
// public keys only (public_only), no key of the set has the algorithm.
for (const [name, p] of [['EC', ecPem], ['Ed25519', edPem]]) {
  const swap = (header) => token(header, claimsAt(), (i) => crypto.createHmac('sha256', p).update(i).digest());
  const kid = name === 'EC' ? 'ec' : 'ed';
  tokens.push({ name: `HS256 signed with the ${name} PEM, its kid`, expect: 'ALG_REFUSED',
    public_only: 'ALG_REFUSED', token: swap({ alg: 'HS256', typ: 'at+jwt', kid }) });
  tokens.push({ name: `HS256 signed with the ${name} PEM, no kid`, expect: 'BAD_SIGNATURE',
    public_only: 'ALG_REFUSED', token: swap({ alg: 'HS256', typ: 'at+jwt' }) });
}
const jwk = (k, extra) => ({ ...k.export({ format: 'jwk' }), ...extra });
const jwks = {
  keys: [
    { kty: 'oct', k: b64(secret), kid: 'hs', alg: 'HS256', use: 'sig' },
    jwk(ec.publicKey, { kid: 'ec', alg: 'ES256', use: 'sig' }),
    jwk(ed.publicKey, { kid: 'ed' }),
    jwk(crypto.generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey, { kid: 'rsa', alg: 'RS256' }),
    jwk(crypto.generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey, { kid: 'p384' }),
    jwk(crypto.generateKeyPairSync('x25519').publicKey, { kid: 'x' }),
    jwk(crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey, { kid: 'enc', use: 'enc' }),
    jwk(crypto.generateKeyPairSync('ed25519').publicKey, { kid: 'ed-other', alg: 'Ed448' }),
  ],
};

const out = {
  generator: 'tests/unit/jwt_corpus.mjs',
  now: NOW, issuer: ISS, audience: AUD,
  secret: b64(secret),
  ec_pem: ecPem, ed_pem: edPem,
  p384_pem: pem(crypto.generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey),
  rsa_pem: pem(crypto.generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey),
  jwks, jwks_skipped: 5,
  tokens,
};
const here = dirname(fileURLToPath(import.meta.url));
writeFileSync(join(here, 'jwt_corpus.json'), JSON.stringify(out, null, 1) + '\n');
console.log(`${tokens.length} tokens`);
