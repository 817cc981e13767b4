// crash_lib.mjs - what crash_test.mjs builds on: the power-cut disk (an
// ext4 image on a loop device), deterministic randomness, HTTP requests
// that tell a missing answer apart, and the verification of what a stream
// holds after the crashes against what its writers sent.
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';

const REQUEST_TIMEOUT_MS = 10_000;   // every HTTP request
const MAX_READ_PAGES = 100_000;

// ------------------------------------------------------------------ helpers

// run(cmd, args) -> stdout; throws with the command's stderr when it fails.
function run(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.error?.message ?? r.stderr.trim() ?? `exit ${r.status}`}`);
  return r.stdout.trim();
}

// Disk: an ext4 file system in an image file, on a loop device mounted at
// mnt. attach() mounts it, cut() shuts it down as a power loss would (the
// fs_shutdown tool), detach() unmounts it and frees the loop device (safe
// to call again, and from an 'exit' handler).
export class Disk {
  constructor({ image, mnt, tool }) { Object.assign(this, { image, mnt, tool, dev: null, mounted: false }); }
  create(mib) {
    fs.closeSync(fs.openSync(this.image, 'w'));
    fs.truncateSync(this.image, mib * 1024 * 1024);
    run('mkfs.ext4', ['-q', '-F', this.image]);
    fs.mkdirSync(this.mnt, { recursive: true });
  }
  attach() {
    this.dev = run('losetup', ['--find', '--show', this.image]);
    run('mount', ['-t', 'ext4', this.dev, this.mnt]);
    this.mounted = true;
  }
  cut() { run(this.tool, [this.mnt]); }
  detach() {
    if (this.mounted) { run('umount', [this.mnt]); this.mounted = false; }
    if (this.dev) { run('losetup', ['-d', this.dev]); this.dev = null; }
  }
}

// makeRng(seed) -> deterministic PRNG (mulberry32). next() is in [0,1),
// int(lo, hi) is inclusive on both ends, hex(n) is n lowercase hex digits.
export function makeRng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo, hi) => lo + Math.floor(next() * (hi - lo + 1));
  const hex = (n) => { let s = ''; for (let i = 0; i < n; i++) s += '0123456789abcdef'[int(0, 15)]; return s; };
  return { next, int, hex };
}

// deriveSeed(seed, ...parts) -> a 32-bit seed for a sub-generator, so each
// writer's payloads depend only on --seed and its own identity.
export function deriveSeed(seed, ...parts) {
  const h = crypto.createHash('sha256').update(`${seed}/${parts.join('/')}`).digest();
  return h.readUInt32LE(0);
}

// largePad(seed, label, seq, part, n) -> n lowercase hex digits derived from
// (seed, writer, seq, part) alone: an AES-CTR keystream of their hash.
export function largePad(seed, label, seq, part, n) {
  const key = crypto.createHash('sha256').update(`${seed}/large/${label}/${seq}/${part}`).digest();
  const c = crypto.createCipheriv('aes-256-ctr', key, Buffer.alloc(16));
  return Buffer.concat([c.update(Buffer.alloc(Math.ceil(n / 2))), c.final()]).toString('hex').slice(0, n);
}

// A request that got no HTTP answer (refused, reset, timed out). Its effect on
// the server is unknown.
export class NetError extends Error {
  constructor(cause) {
    super(`${cause?.cause?.code ?? cause?.name ?? 'error'}: ${cause?.cause?.message ?? cause?.message ?? cause}`);
    this.code = cause?.cause?.code ?? cause?.name;
  }
}

// http(base, method, urlPath, {headers, body}) -> {status, headers, body: Buffer}.
// Throws NetError when no complete HTTP answer arrived within REQUEST_TIMEOUT_MS.
export async function http(base, method, urlPath, { headers = {}, body } = {}) {
  try {
    const res = await fetch(base + urlPath, {
      method, headers, body, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const buf = Buffer.from(await res.arrayBuffer());
    return { status: res.status, headers: res.headers, body: buf };
  } catch (err) {
    throw new NetError(err);
  }
}

// describeAnswer(res) -> short text with the status and the headers that
// explain a producer rejection.
export function describeAnswer(res) {
  const extra = ['producer-expected-seq', 'producer-received-seq', 'producer-epoch', 'stream-closed']
    .filter((h) => res.headers.get(h) !== null).map((h) => `${h}=${res.headers.get(h)}`);
  const body = res.body.length ? ` body=${JSON.stringify(res.body.subarray(0, 120).toString('utf8'))}` : '';
  return `${res.status}${extra.length ? ` (${extra.join(', ')})` : ''}${body}`;
}

// ------------------------------------------------------------- verification

// readAll(base, stream) -> { data: Buffer (binary) | object[] (JSON messages),
// nextOffset, pages } following catch-up GETs from offset -1 until a response
// carries Stream-Up-To-Date: true. Returns { error } on any protocol problem:
// non-200, missing/reserved/non-increasing Stream-Next-Offset, a JSON page
// that is not an application/json array, no progress, or too many pages.
async function readAll(base, stream) {
  let offset = '-1';
  const chunks = [];
  const msgs = [];
  for (let page = 1; page <= MAX_READ_PAGES; page++) {
    let res;
    try { res = await http(base, 'GET', `${stream.path}?offset=${encodeURIComponent(offset)}`); } catch (err) {
      return { error: `GET offset=${offset}: no answer (${err.message})` };
    }
    const at = `GET offset=${offset} (page ${page})`;
    if (res.status !== 200) return { error: `${at}: status ${describeAnswer(res)}, expected 200` };
    const next = res.headers.get('stream-next-offset');
    if (!next) return { error: `${at}: no Stream-Next-Offset` };
    if (next === '-1' || next === 'now') return { error: `${at}: reserved Stream-Next-Offset ${next}` };
    let hasData;
    if (stream.json) {
      const ct = res.headers.get('content-type') ?? '';
      if (!/^application\/json\b/i.test(ct)) return { error: `${at}: Content-Type ${JSON.stringify(ct)}, expected application/json` };
      let arr;
      try { arr = JSON.parse(res.body.toString('utf8')); } catch (err) { return { error: `${at}: body is not JSON (${err.message})` }; }
      if (!Array.isArray(arr)) return { error: `${at}: body is not a JSON array` };
      for (const m of arr) msgs.push(m);
      hasData = arr.length > 0;
    } else {
      chunks.push(res.body);
      hasData = res.body.length > 0;
    }
    if (hasData && offset !== '-1' && !(next > offset)) {
      return { error: `${at}: returned data but Stream-Next-Offset ${next} is not greater than ${offset} (section 8)` };
    }
    const upToDate = res.headers.get('stream-up-to-date') === 'true';
    if (upToDate) return { data: stream.json ? msgs : Buffer.concat(chunks), nextOffset: next, pages: page };
    if (!hasData && next === offset) return { error: `${at}: empty, not up to date, and no progress` };
    offset = next;
  }
  return { error: `no Stream-Up-To-Date: true within ${MAX_READ_PAGES} pages` };
}

// canon(v) -> JSON text with object keys sorted (comparison independent of
// member order and whitespace).
function canon(v) {
  if (Array.isArray(v)) return `[${v.map(canon).join(',')}]`;
  if (v && typeof v === 'object') return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canon(v[k])}`).join(',')}}`;
  return JSON.stringify(v);
}

const snippet = (buf, pos) => JSON.stringify(buf.subarray(Math.max(0, pos - 20), pos + 40).toString('latin1'));

// compareBytes(expected: Buffer[], got: Buffer) -> issues. Exact equality
// with the concatenation; on mismatch, reports the first differing byte and
// the seq of the expected record that covers it.
function compareBytes(label, expectedRecords, got) {
  const expected = Buffer.concat(expectedRecords);
  if (expected.equals(got)) return [];
  const n = Math.min(expected.length, got.length);
  let pos = 0;
  while (pos < n && expected[pos] === got[pos]) pos++;
  let seq = 0;
  for (let off = 0; seq < expectedRecords.length && off + expectedRecords[seq].length <= pos; seq++) off += expectedRecords[seq].length;
  return [`expected ${expected.length} bytes (${expectedRecords.length} records of ${label}), got ${got.length}; ` +
    `first difference at byte ${pos} (in expected seq ${seq < expectedRecords.length ? seq : '<end>'}): ` +
    `expected ${snippet(expected, pos)} got ${snippet(got, pos)}`];
}

// compareMessages(expected: object[], got: object[]) -> issues. Exact
// equality of the message lists (canonical JSON per message).
function compareMessages(expected, got) {
  const n = Math.min(expected.length, got.length);
  let i = 0;
  while (i < n && canon(expected[i]) === canon(got[i])) i++;
  if (i === n && expected.length === got.length) return [];
  return [`expected ${expected.length} messages, got ${got.length}; first difference at message ${i}: ` +
    `expected ${i < expected.length ? canon(expected[i]) : '<end>'} got ${i < got.length ? canon(got[i]).slice(0, 200) : '<end>'}`];
}

// splitBinaryRecords(buf) -> { units: [{ who, seq, bytes }], error }. Cuts a
// binary stream into <label:seq:hex> records; error names the first byte that
// does not start a well-formed record. (Used with several writers per stream.)
function splitBinaryRecords(buf) {
  const s = buf.toString('latin1');
  const re = /<(w[0-9]+(?:\.[0-9]+)?):([0-9]+):[0-9a-f]*>/y;
  const units = [];
  for (let pos = 0; pos < s.length;) {
    re.lastIndex = pos;
    const m = re.exec(s);
    if (!m) return { units, error: `no well-formed record at byte ${pos}: ${snippet(buf, pos)}` };
    units.push({ who: m[1], seq: Number(m[2]), bytes: buf.subarray(pos, re.lastIndex) });
    pos = re.lastIndex;
  }
  return { units, error: null };
}

// verifyInterleaved(stream, got) -> issues, for streams with several writers
// (interleaving unknown): every byte/message belongs to exactly one writer
// record, each request's JSON messages are contiguous, and each writer's
// projection equals exactly what it had acknowledged, in seq order.
function verifyInterleaved(stream, got) {
  const issues = [];
  const byWho = new Map(stream.writers.map((w) => [stream.json ? String(w.wField) : w.label, []]));
  if (!stream.json) {
    const { units, error } = splitBinaryRecords(got);
    if (error) issues.push(error);
    for (const u of units) {
      if (!byWho.has(u.who)) { issues.push(`record from unknown writer ${u.who}`); continue; }
      byWho.get(u.who).push(u.bytes);
    }
    for (const w of stream.writers) {
      const want = w.records.slice(0, w.acked).map((r) => r.body);
      issues.push(...compareBytes(w.label, want, Buffer.concat(byWho.get(w.label))).map((s) => `${w.label}: ${s}`));
    }
    return issues;
  }
  for (let i = 0; i < got.length;) {
    const m = got[i];
    const key = m && typeof m === 'object' ? String(m.w) : undefined;
    const w = stream.writers.find((x) => String(x.wField) === key);
    const rec = w && Number.isSafeInteger(m.n) ? w.records[m.n] : undefined;
    if (!rec) { issues.push(`message ${i} is not from any writer record: ${canon(m).slice(0, 200)}`); i++; continue; }
    const batch = got.slice(i, i + rec.msgs.length);
    if (batch.length !== rec.msgs.length || batch.some((x, j) => x?.w !== m.w || x?.n !== m.n || x?.k !== j)) {
      issues.push(`messages ${i}..: request ${w.label} seq ${m.n} (${rec.msgs.length} messages) is not contiguous`);
    }
    for (const x of batch) byWho.get(key).push(x);
    i += batch.length;
  }
  for (const w of stream.writers) {
    const want = w.records.slice(0, w.acked).flatMap((r) => r.msgs);
    issues.push(...compareMessages(want, byWho.get(String(w.wField))).map((s) => `${w.label}: ${s}`));
  }
  return issues;
}

// verifyStream(base, stream) -> { issues, nextOffset }. The content check:
// the writers saw no unexpected answer, and the catch-up read returns exactly
// the acknowledged records, each once, in order.
export async function verifyStream(base, stream) {
  const issues = [];
  for (const w of stream.writers) {
    issues.push(...w.issues);
    if (w.abortedAt !== null) issues.push(`${w.label} aborted at seq ${w.abortedAt}; expecting its ${w.acked} acknowledged records`);
  }
  const read = await readAll(base, stream);
  if (read.error) return { issues: [...issues, read.error], nextOffset: null };
  if (stream.writers.length === 1) {
    const w = stream.writers[0];
    const want = w.records.slice(0, w.acked);
    issues.push(...(stream.json
      ? compareMessages(want.flatMap((r) => r.msgs), read.data)
      : compareBytes(w.label, want.map((r) => r.body), read.data)));
  } else {
    issues.push(...verifyInterleaved(stream, read.data));
  }
  return { issues, nextOffset: read.nextOffset };
}

// verifyDedup(base, writer) -> issues. Resends the writer's last acknowledged
// request; the producer state must still know it: 204, and Producer-Seq (if
// sent) equal to that seq.
export async function verifyDedup(base, w) {
  if (w.acked === 0) return [`${w.label} has no acknowledged append to duplicate`];
  const seq = w.acked - 1;
  let res;
  try { res = await http(base, 'POST', w.stream.path, { headers: w.headers(seq), body: w.records[seq].body }); } catch (err) {
    return [`duplicate of seq ${seq}: no answer (${err.message})`];
  }
  const issues = [];
  if (res.status !== 204) issues.push(`duplicate of seq ${seq} answered ${describeAnswer(res)}, expected 204`);
  const ps = res.headers.get('producer-seq');
  if (res.status === 204 && ps !== null && ps !== String(seq)) issues.push(`duplicate of seq ${seq}: Producer-Seq ${ps}, expected ${seq}`);
  return issues;
}

// verifyHead(base, stream, nextOffset) -> issues. HEAD must answer 200 with
// Stream-Next-Offset equal to the tail the catch-up read reached.
export async function verifyHead(base, stream, nextOffset) {
  if (nextOffset === null) return ['no tail offset to compare with (the read failed)'];
  let res;
  try { res = await http(base, 'HEAD', stream.path); } catch (err) { return [`HEAD: no answer (${err.message})`]; }
  if (res.status !== 200) return [`HEAD answered ${res.status}, expected 200`];
  const got = res.headers.get('stream-next-offset');
  return got === nextOffset ? [] : [`HEAD Stream-Next-Offset ${JSON.stringify(got)}, read ended at ${JSON.stringify(nextOffset)}`];
}

