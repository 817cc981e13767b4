#!/usr/bin/env node
// subs_test.mjs - black-box tests of Runnel's subscriptions (PROTOCOL.md
// sections 6 and 7), written against the protocol, not against the code.
//
// WHAT IT PROVES
//   signature  a webhook notification carries a Webhook-Signature that
//              verifies with Node's crypto against the public key published
//              in the JWK Set document, and stops verifying when one byte of
//              the body or the timestamp is changed;
//   retry      a receiver that fails is retried with exponential backoff
//              (about 1 s, 2 s, 4 s, each within the protocol's 20% jitter),
//              the same wake each time, with status "failed" while retrying
//              and "active" after the first success; the retry schedule
//              survives a SIGKILL (the next attempt keeps its time);
//   isolation  a receiver that never answers does not slow appends or reads;
//   restart    subscription definitions, links, acked offsets, generation,
//              wake, lease holder, claim tokens and the signing key survive a
//              SIGTERM restart and a SIGKILL restart unchanged.
//
// HOW
//   Starts `runnel serve --webhook-allow-loopback --webhook-timeout-ms 1500`
//   on a free 127.0.0.1 port with a temporary data directory, and webhook
//   receivers (node:http) on 127.0.0.1. All traffic stays on 127.0.0.1;
//   every request has a timeout and every wait loop a deadline.
//
// OUTPUT: "ok <check>" / "FAIL <check>: <details>" per check, then the last
// line "N passed, M failed". Exit code 0 only if M == 0. The temporary
// directory is removed on success and kept (path printed) on failure.
//
// usage: node tests/subs/subs_test.mjs --bin PATH_TO_RUNNEL [--timeout-ms 180000]

import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { Server, sleep, tempDir, waitFor as waitUntil } from '../lib/server.mjs';

const REQUEST_TIMEOUT_MS = 10_000;
const READY_TIMEOUT_MS = 10_000;
const EXIT_TIMEOUT_MS = 15_000;
const WEBHOOK_TIMEOUT_MS = 1_500; // --webhook-timeout-ms of the server under test
const SCHEDULING_SLACK_MS = 400;  // loop, fsync and HTTP latency allowed on top of a backoff

// ---------------------------------------------------------------- arguments

function parseArgs(argv) {
  const opts = { bin: null, timeoutMs: 180_000 };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s, 2);
    const value = inline ?? argv[++i];
    if (flag === '--bin') opts.bin = value;
    else if (flag === '--timeout-ms' && /^[0-9]+$/.test(value ?? '')) opts.timeoutMs = Number(value);
    else {
      console.error(`subs_test: bad argument ${argv[i]}\nusage: node tests/subs/subs_test.mjs --bin PATH [--timeout-ms N]`);
      process.exit(2);
    }
  }
  if (!opts.bin) { console.error('subs_test: --bin is required'); process.exit(2); }
  opts.bin = path.resolve(opts.bin);
  return opts;
}

// ------------------------------------------------------------------ helpers

// req(method, url, {body, headers}) -> {status, headers, text, json}. Each
// request opens its own connection (no keep-alive pool), so no request can
// land on a connection to a server process that a restart killed. Throws
// (with method, URL and cause) when no answer arrives in REQUEST_TIMEOUT_MS.
function req(method, url, { body, headers = {} } = {}) {
  const h = { ...headers };
  let payload;
  if (body !== undefined) {
    payload = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
    if (!h['content-type']) h['content-type'] = 'application/json';
    h['content-length'] = String(payload.length);
  }
  return new Promise((resolve, reject) => {
    const rq = http.request(url, { method, headers: h, agent: false, timeout: REQUEST_TIMEOUT_MS }, (rs) => {
      const chunks = [];
      rs.on('data', (c) => chunks.push(c));
      rs.on('error', (err) => reject(new Error(`${method} ${url}: ${err.code ?? err.message}`)));
      rs.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json = null;
        try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
        resolve({ status: rs.statusCode, headers: { get: (n) => rs.headers[n.toLowerCase()] ?? null }, text, json });
      });
    });
    rq.on('timeout', () => rq.destroy(new Error('timed out')));
    rq.on('error', (err) => reject(new Error(`${method} ${url}: ${err.code ?? err.message}`)));
    rq.end(payload);
  });
}

// waitFor(what, predicate, timeoutMs) -> the predicate's first truthy value,
// polled every 25 ms; throws after timeoutMs.
const waitFor = (what, predicate, timeoutMs = 5_000) => waitUntil(what, predicate, timeoutMs, 25);

// ------------------------------------------------------------------ checks

const results = { passed: 0, failed: 0 };

// check(name, fn): runs one counted check; fn throws (or returns a string) to fail.
async function check(name, fn) {
  try {
    const problem = await fn();
    if (typeof problem === 'string') throw new Error(problem);
    results.passed++;
    console.log(`ok ${name}`);
  } catch (err) {
    results.failed++;
    console.log(`FAIL ${name}: ${err?.message ?? err}`);
  }
}

function expect(cond, message) {
  if (!cond) throw new Error(message);
}

// ------------------------------------------------------------ the server

// The server under test: the shared launcher (tests/lib/server.mjs) with
// webhook deliveries to loopback receivers allowed. start() resolves once
// /__runnel/readyz answers 200 (recovery finished); stop() SIGKILLs after
// EXIT_TIMEOUT_MS.
class Runnel extends Server {
  constructor(bin, dataDir, logPath) {
    super({ bin, dataDir, logPath,
      args: ['--webhook-allow-loopback', '--webhook-timeout-ms', String(WEBHOOK_TIMEOUT_MS)] });
  }

  start() { return super.start({ readyMs: READY_TIMEOUT_MS }); }
  stop(signal) { return super.stop(signal, EXIT_TIMEOUT_MS); }
  sub(id) { return this.stream(`__ds/subscriptions/${id}`); }
}

// ------------------------------------------------------- webhook receivers

// receiver(behave) -> {url, requests, close}. behave(n) for the n-th request
// (0-based) returns {status, body} or 'hang' (never answer).
async function receiver(behave) {
  const requests = [];
  const hanging = [];
  const server = http.createServer((rq, rs) => {
    const chunks = [];
    rq.on('data', (c) => chunks.push(c));
    rq.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body = null;
      try { body = JSON.parse(raw); } catch { /* recorded as null */ }
      const n = requests.length;
      requests.push({ t: Date.now(), raw, body, signature: rq.headers['webhook-signature'] ?? null,
        contentType: rq.headers['content-type'] ?? null });
      const b = behave(n);
      if (b === 'hang') { hanging.push(rs); return; }
      rs.writeHead(b.status, { 'content-type': 'application/json' });
      rs.end(JSON.stringify(b.body ?? {}));
    });
  });
  await new Promise((resolve, reject) => { server.on('error', reject); server.listen(0, '127.0.0.1', resolve); });
  return {
    url: `http://127.0.0.1:${server.address().port}/hook`,
    requests,
    close: async () => {
      for (const rs of hanging) rs.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(() => r()));
    },
  };
}

// ------------------------------------------------------------ signatures

function verifySignature(jwks, header, rawBody) {
  const m = /^t=(\d+),kid=([^,]+),ed25519=([A-Za-z0-9_-]+)$/.exec(header ?? '');
  if (!m) return false;
  const [, t, kid, sig] = m;
  const jwk = jwks.keys.find((k) => k.kid === kid);
  if (!jwk) return false;
  const key = crypto.createPublicKey({ key: jwk, format: 'jwk' });
  return crypto.verify(null, Buffer.from(`${t}.${rawBody}`), key, Buffer.from(sig, 'base64url'));
}

async function createWebhookSub(rn, id, pattern, url, extra = {}) {
  const r = await req('PUT', rn.sub(id), { body: { type: 'webhook', pattern, webhook: { url }, ...extra } });
  expect(r.status === 201, `PUT subscription ${id}: ${r.status} ${r.text}`);
  return r.json;
}

async function ackedOf(rn, id, streamPath) {
  const r = await req('GET', rn.sub(id));
  return r.json?.streams?.find((s) => s.path === streamPath)?.acked_offset ?? null;
}

async function tailOf(rn, streamPath) {
  const r = await req('HEAD', rn.stream(streamPath));
  return r.headers.get('stream-next-offset');
}

// --------------------------------------------------------------- scenarios

async function signatureChecks(rn) {
  const rcv = await receiver(() => ({ status: 200, body: { done: true } }));
  try {
    const created = await createWebhookSub(rn, 'sig-1', 'sig/*', rcv.url, { lease_ttl_ms: 5000 });
    const jwksUrl = created.webhook?.signing?.jwks_url;
    let jwks;
    await check('signature: JWK Set document (content type, caching, OKP/Ed25519 key with the subscription kid)', async () => {
      expect(jwksUrl === rn.stream('__ds/jwks.json'), `jwks_url ${jwksUrl}`);
      const r = await req('GET', jwksUrl);
      expect(r.status === 200, `status ${r.status}`);
      expect((r.headers.get('content-type') ?? '').includes('application/jwk-set+json'), `content-type ${r.headers.get('content-type')}`);
      const cc = r.headers.get('cache-control') ?? '';
      expect(cc.includes('public') && cc.includes('max-age=300'), `cache-control ${cc}`);
      jwks = r.json;
      const key = jwks.keys.find((k) => k.kid === created.webhook.signing.kid);
      expect(key && key.kty === 'OKP' && key.crv === 'Ed25519' && key.alg === 'EdDSA' && !key.d, `keys ${r.text}`);
      expect(!('webhook_secret' in created) && !JSON.stringify(created).includes('secret'), 'a secret is exposed');
    });
    await req('PUT', rn.stream('sig/a'), { body: { n: 1 } });
    await check('signature: webhook notification verifies with the published key', async () => {
      const n = await waitFor('the webhook', () => rcv.requests[0]);
      expect(n.contentType === 'application/json', `content-type ${n.contentType}`);
      expect(verifySignature(jwks, n.signature, n.raw), `signature ${n.signature} does not verify`);
      const b = n.body;
      expect(b.subscription_id === 'sig-1' && /^w_/.test(b.wake_id) && Number.isInteger(b.generation), `body ${n.raw}`);
      expect(b.callback_url === rn.stream('__ds/subscriptions/sig-1/callback'), `callback_url ${b.callback_url}`);
      expect(typeof b.callback_token === 'string' && b.callback_token.length > 20, 'callback_token');
      const s = b.streams.find((x) => x.path === 'sig/a');
      expect(s && s.has_pending === true && s.link_type === 'glob' &&
        s.acked_offset === '0000000000000000_0000000000000000' && s.tail_offset === await tailOf(rn, 'sig/a'),
      `stream entry ${JSON.stringify(s)}`);
    });
    await check('signature: a tampered body or timestamp does not verify', async () => {
      const n = rcv.requests[0];
      const i = n.raw.indexOf('sig/a');
      const tampered = `${n.raw.slice(0, i)}sig/b${n.raw.slice(i + 5)}`;
      expect(!verifySignature(jwks, n.signature, tampered), 'tampered body verified');
      expect(!verifySignature(jwks, n.signature, `${n.raw} `), 'body with an extra byte verified');
      const [, t] = /^t=(\d+)/.exec(n.signature);
      const otherT = n.signature.replace(`t=${t}`, `t=${Number(t) + 1}`);
      expect(!verifySignature(jwks, otherT, n.raw), 'changed timestamp verified');
      expect(Math.abs(Number(t) - Date.now() / 1000) < 60, `timestamp ${t} is not now`);
    });
    await check('signature: {"done":true} acks the snapshot', async () => {
      const tail = await tailOf(rn, 'sig/a');
      await waitFor('acked == tail', async () => (await ackedOf(rn, 'sig-1', 'sig/a')) === tail);
    });
  } finally {
    await req('DELETE', rn.sub('sig-1')).catch(() => {});
    await rcv.close();
  }
}

// Checks that attempt intervals follow 1 s, 2 s, 4 s ... within 20% jitter.
function backoffProblems(times, from = 0) {
  const problems = [];
  for (let k = 1; k < times.length; k++) {
    const base = 1000 * 2 ** (from + k - 1);
    const gap = times[k] - times[k - 1];
    if (gap < base * 0.8 - 50 || gap > base * 1.2 + SCHEDULING_SLACK_MS) {
      problems.push(`attempt ${from + k + 1} came ${gap} ms after the previous one (want ${base} ms ±20%)`);
    }
  }
  return problems;
}

async function retryChecks(rn) {
  const FAILURES = 3;
  const rcv = await receiver((n) => (n < FAILURES ? { status: 500, body: { error: 'down' } } : { status: 200, body: { done: true } }));
  try {
    await createWebhookSub(rn, 'retry-1', 'retry/*', rcv.url);
    await req('PUT', rn.stream('retry/a'), { body: { n: 1 } });
    await check('retry: status is "failed" while a retry is scheduled', async () => {
      await waitFor('the first attempt', () => rcv.requests[0]);
      await waitFor('status failed', async () => (await req('GET', rn.sub('retry-1'))).json?.status === 'failed');
    });
    await check('retry: attempts back off 1 s, 2 s (±20%), then succeed, as one wake', async () => {
      await waitFor('the successful attempt', () => rcv.requests[FAILURES], 15_000);
      const times = rcv.requests.map((r) => r.t);
      const problems = backoffProblems(times.slice(0, FAILURES + 1));
      const wakes = new Set(rcv.requests.map((r) => `${r.body.wake_id}/${r.body.generation}`));
      if (wakes.size !== 1) problems.push(`attempts carried ${wakes.size} different wakes`);
      for (const r of rcv.requests) {
        if (!r.signature) problems.push('an attempt was not signed');
      }
      return problems.length ? problems.join('; ') : undefined;
    });
    await check('retry: after the success, status is "active" and the snapshot is acked', async () => {
      const tail = await tailOf(rn, 'retry/a');
      await waitFor('acked == tail', async () => (await ackedOf(rn, 'retry-1', 'retry/a')) === tail);
      const r = await req('GET', rn.sub('retry-1'));
      expect(r.json.status === 'active', `status ${r.json.status}`);
      await sleep(500);
      expect(rcv.requests.length === FAILURES + 1, `${rcv.requests.length} attempts after the success`);
    });
  } finally {
    await req('DELETE', rn.sub('retry-1')).catch(() => {});
    await rcv.close();
  }
}

async function isolationChecks(rn) {
  const rcv = await receiver(() => 'hang');
  try {
    await createWebhookSub(rn, 'hang-1', 'hang/*', rcv.url);
    await req('PUT', rn.stream('hang/a'), { body: { n: 1 } });
    await waitFor('the hanging attempt', () => rcv.requests[0]);
    await check('isolation: a receiver that never answers does not slow appends or reads', async () => {
      await req('PUT', rn.stream('free/x'), { headers: { 'content-type': 'text/plain' }, body: '' });
      let worst = 0;
      for (let i = 0; i < 40; i++) {
        const t0 = Date.now();
        const a = await req('POST', rn.stream(i % 2 ? 'free/x' : 'hang/a'), {
          headers: { 'content-type': i % 2 ? 'text/plain' : 'application/json' }, body: i % 2 ? 'x' : '{"n":2}' });
        const r = await req('GET', `${rn.stream('free/x')}?offset=-1`);
        worst = Math.max(worst, Date.now() - t0);
        expect((a.status === 204 || a.status === 200) && r.status === 200, `append ${a.status}, read ${r.status}`);
      }
      expect(worst < 500, `an append plus read took ${worst} ms`);
    });
    await check('isolation: the hung attempt times out and is retried', async () => {
      await waitFor('a second attempt', () => rcv.requests[1], WEBHOOK_TIMEOUT_MS + 2_000 + SCHEDULING_SLACK_MS + 1_000);
      const gap = rcv.requests[1].t - rcv.requests[0].t;
      expect(gap >= WEBHOOK_TIMEOUT_MS + 800 - 50, `second attempt only ${gap} ms after the first`);
    });
  } finally {
    await req('DELETE', rn.sub('hang-1')).catch(() => {});
    await rcv.close();
  }
}

// State that GET shows, minus nothing: the whole document must survive.
const view = async (rn, id) => (await req('GET', rn.sub(id))).text;

async function restartChecks(rn) {
  // A pull-wake subscription with a claimed, partly acked wake.
  await req('PUT', rn.stream('wake/pool'), { body: '[]' });
  await req('PUT', rn.stream('dur/a'), { body: [{ n: 1 }, { n: 2 }] });
  const pw = await req('PUT', rn.sub('pw-1'), { body: {
    type: 'pull-wake', pattern: 'dur/*', streams: ['dur/explicit', 'dur/a'], wake_stream: 'wake/pool',
    lease_ttl_ms: 600000, description: 'restart test' } });
  const wakeEvents = async () => (await req('GET', `${rn.stream('wake/pool')}?offset=-1`)).json ?? [];
  await req('POST', rn.stream('dur/a'), { body: { n: 3 } });
  await req('PUT', rn.stream('dur/b'), { body: { n: 1 } });
  await waitFor('a wake event', async () => (await wakeEvents()).some((e) => e.subscription_id === 'pw-1'));
  const claim = await req('POST', `${rn.sub('pw-1')}/claim`, { body: { worker: 'worker-1' } });
  const c = claim.json;
  const partial = c?.streams?.find((s) => s.path === 'dur/b')?.tail_offset;
  const heartbeat = await req('POST', `${rn.sub('pw-1')}/ack`, { headers: { authorization: `Bearer ${c?.token}` },
    body: { wake_id: c?.wake_id, generation: c?.generation, acks: [{ stream: 'dur/b', offset: partial }] } });

  // A webhook subscription whose receiver accepted the wake without finishing it.
  const rcv = await receiver(() => ({ status: 200, body: {} }));
  await createWebhookSub(rn, 'wh-1', 'hook/*', rcv.url, { lease_ttl_ms: 600000 });
  await req('PUT', rn.stream('hook/a'), { body: { n: 1 } });
  const note = await waitFor('the webhook', () => rcv.requests[0]).catch(() => null);
  await sleep(200); // the receiver's answer starts the lease

  await check('restart: setup (create, wake event, claim, heartbeat ack, webhook accepted)', async () => {
    expect(pw.status === 201 && claim.status === 200 && heartbeat.status === 200 && note,
      `create ${pw.status}, claim ${claim.status} ${claim.text}, ack ${heartbeat.status} ${heartbeat.text}, webhook ${!!note}`);
    expect((await ackedOf(rn, 'pw-1', 'dur/b')) === partial, 'heartbeat ack not applied');
  });
  const jwksBefore = (await req('GET', rn.stream('__ds/jwks.json'))).text;

  for (const signal of ['SIGTERM', 'SIGKILL']) {
    const before = { pw: await view(rn, 'pw-1'), wh: await view(rn, 'wh-1') };
    const ex = await rn.stop(signal);
    await check(`restart (${signal}): the server stopped as asked`, () => {
      if (signal === 'SIGTERM') expect(ex.code === 0, `exit ${JSON.stringify(ex)}`);
      else expect(ex.signal === 'SIGKILL', `exit ${JSON.stringify(ex)}`);
    });
    await rn.start();
    await check(`restart (${signal}): definitions, links, acked offsets and status are unchanged`, async () => {
      const after = { pw: await view(rn, 'pw-1'), wh: await view(rn, 'wh-1') };
      expect(after.pw === before.pw, `pull-wake subscription\n  before ${before.pw}\n  after  ${after.pw}`);
      expect(after.wh === before.wh, `webhook subscription\n  before ${before.wh}\n  after  ${after.wh}`);
      const p = JSON.parse(after.pw);
      const links = Object.fromEntries(p.streams.map((s) => [s.path, s.link_type]));
      expect(links['dur/a'] === 'explicit' && links['dur/b'] === 'glob' && links['dur/explicit'] === 'explicit',
        `links ${JSON.stringify(links)}`);
      expect(p.description === 'restart test' && p.lease_ttl_ms === 600000, 'definition fields');
    });
    await check(`restart (${signal}): the lease holder and generation survive (409 ALREADY_CLAIMED)`, async () => {
      const r = await req('POST', `${rn.sub('pw-1')}/claim`, { body: { worker: 'worker-2' } });
      expect(r.status === 409 && r.json?.error?.code === 'ALREADY_CLAIMED' &&
        r.json.error.current_holder === 'worker-1' && r.json.error.generation === c.generation, `${r.status} ${r.text}`);
      // extensions §11: a server sends both code and message
      expect(typeof r.json?.error?.message === 'string' && r.json.error.message.length > 0, `ALREADY_CLAIMED without a message: ${r.text}`);
    });
    await check(`restart (${signal}): the claim token still authorizes a heartbeat`, async () => {
      const r = await req('POST', `${rn.sub('pw-1')}/ack`, { headers: { authorization: `Bearer ${c.token}` },
        body: { wake_id: c.wake_id, generation: c.generation } });
      expect(r.status === 200 && r.json?.ok === true, `${r.status} ${r.text}`);
    });
    await check(`restart (${signal}): the signing key is unchanged`, async () => {
      const now = (await req('GET', rn.stream('__ds/jwks.json'))).text;
      expect(now === jwksBefore, `JWKS changed: ${now}`);
    });
  }

  await check('restart: the webhook wake and its callback token survive both restarts', async () => {
    const b = note.body;
    const tail = b.streams.find((s) => s.path === 'hook/a').tail_offset;
    const r = await req('POST', b.callback_url, { headers: { authorization: `Bearer ${b.callback_token}` },
      body: { wake_id: b.wake_id, generation: b.generation, acks: [{ stream: 'hook/a', offset: tail }], done: true } });
    expect(r.status === 200 && r.json?.ok === true && r.json.next_wake === false, `${r.status} ${r.text}`);
    expect(rcv.requests.length === 1, `${rcv.requests.length} deliveries: a restart re-sent an accepted wake`);
  });
  await rcv.close();

  await check('restart: generation keeps increasing across restarts (done, append, SIGKILL, claim)', async () => {
    const done = await req('POST', `${rn.sub('pw-1')}/ack`, { headers: { authorization: `Bearer ${c.token}` },
      body: { wake_id: c.wake_id, generation: c.generation, done: true,
        acks: c.streams.map((s) => ({ stream: s.path, offset: s.tail_offset })) } });
    expect(done.status === 200 && done.json.next_wake === false, `done ${done.status} ${done.text}`);
    await req('POST', rn.stream('dur/a'), { body: { n: 4 } });
    const gen = await waitFor('the next wake event', async () =>
      (await wakeEvents()).find((e) => e.subscription_id === 'pw-1' && e.generation > c.generation)?.generation);
    await rn.stop('SIGKILL');
    await rn.start();
    const again = await req('POST', `${rn.sub('pw-1')}/claim`, { body: { worker: 'worker-3' } });
    expect(again.status === 200 && again.json.generation === gen, `claim ${again.status} ${again.text} (want generation ${gen})`);
    const stale = await req('POST', `${rn.sub('pw-1')}/ack`, { headers: { authorization: `Bearer ${c.token}` },
      body: { wake_id: c.wake_id, generation: c.generation } });
    expect(stale.status === 409 && stale.json?.error?.code === 'FENCED', `stale ack ${stale.status} ${stale.text}`);
    expect(typeof stale.json?.error?.message === 'string' && stale.json.error.message.length > 0, `FENCED without a message: ${stale.text}`);
  });

  await check('restart: a deleted subscription stays deleted', async () => {
    await req('DELETE', rn.sub('wh-1'));
    await rn.stop('SIGKILL');
    await rn.start();
    const r = await req('GET', rn.sub('wh-1'));
    expect(r.status === 404 && r.json?.error?.code === 'SUBSCRIPTION_NOT_FOUND', `${r.status} ${r.text}`);
  });
}

async function retryScheduleSurvivesKill(rn) {
  const rcv = await receiver(() => ({ status: 503, body: {} }));
  try {
    await createWebhookSub(rn, 'sched-1', 'sched/*', rcv.url);
    await req('PUT', rn.stream('sched/a'), { body: { n: 1 } });
    await waitFor('three failed attempts', () => rcv.requests[2], 10_000);
    await sleep(300); // the third failure's schedule (about 4 s) is persisted
    const third = rcv.requests[2].t;
    await rn.stop('SIGKILL');
    await rn.start();
    await check('retry: a SIGKILL keeps the persisted retry schedule (next attempt ~4 s after the third)', async () => {
      await waitFor('the fourth attempt', () => rcv.requests[3], 10_000);
      const gap = rcv.requests[3].t - third;
      expect(gap >= 4000 * 0.8 - 50 && gap <= 4000 * 1.2 + SCHEDULING_SLACK_MS, `fourth attempt ${gap} ms after the third`);
      const same = new Set(rcv.requests.slice(0, 4).map((r) => r.body.wake_id));
      expect(same.size === 1, 'the restart changed the wake');
    });
  } finally {
    await req('DELETE', rn.sub('sched-1')).catch(() => {});
    await rcv.close();
  }
}

// ------------------------------------------------------------------- main

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const tmp = tempDir('runnel-subs-', { keep: true });
  const logPath = path.join(tmp, 'server.log');
  const rn = new Runnel(opts.bin, path.join(tmp, 'data'), logPath);
  const watchdog = setTimeout(() => {
    console.log(`FAIL watchdog: the test did not finish within ${opts.timeoutMs} ms`);
    rn.killNow();
    console.log(`${results.passed} passed, ${results.failed + 1} failed`);
    process.exit(1);
  }, opts.timeoutMs);
  process.on('exit', () => rn.killNow());
  try {
    await rn.start();
    await signatureChecks(rn);
    await retryChecks(rn);
    await isolationChecks(rn);
    await retryScheduleSurvivesKill(rn);
    await restartChecks(rn);
    const ex = await rn.stop('SIGTERM');
    await check('shutdown: SIGTERM exits 0', () => expect(ex.code === 0, `exit ${JSON.stringify(ex)}`));
  } catch (err) {
    await check('the scenario ran to the end', () => { throw err; });
  } finally {
    clearTimeout(watchdog);
    rn.killNow();
  }
  const log = fs.existsSync(logPath) ? fs.readFileSync(logPath, 'utf8') : '';
  await check('no sanitizer report in the server log', () => {
    const m = /ERROR: (Address|Leak)Sanitizer|runtime error:/.exec(log);
    expect(!m, log.slice(Math.max(0, m?.index - 200), (m?.index ?? 0) + 3000));
  });
  if (results.failed) {
    console.log(`# kept ${tmp}; server log tail:\n${log.split('\n').slice(-30).join('\n')}`);
  } else {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  console.log(`${results.passed} passed, ${results.failed} failed`);
  process.exit(results.failed ? 1 : 0);
}

main();
