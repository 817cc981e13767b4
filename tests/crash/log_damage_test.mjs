#!/usr/bin/env node
// log_damage_test.mjs - a damaged or incomplete log is refused at start,
// never served as a shorter history, and a torn tail still recovers.
//
// WHAT IT PROVES
//   After acknowledged appends and a SIGKILL (the log then holds them all,
//   no checkpoint covers them), the data directory is damaged by hand:
//     - flip: one byte flipped in the middle of one of 100 acknowledged
//       2,000-byte appends, in the newest log segment, with at least 20
//       acknowledged appends after it (the middle one of the appends that
//       went to the newest segment: the first ones may precede the switch
//       to a preallocated segment);
//     - missing: the newest log segment deleted;
//     - header: one byte of the newest segment's header flipped (records
//       follow it).
//   For each, the restarted server must exit non-zero within 20 s without
//   serving, log an error naming the damage (the segment file, and for the
//   flipped byte the stream's name and the byte range), and leave every
//   file of the data directory byte for byte as it was. Undoing the damage
//   then lets the server start and serve all 200,000 bytes (so the refusal
//   was for the damage, and nothing was lost by refusing).
//   - torn: bytes after the last acknowledged append that form no valid
//     batch (a write the crash interrupted) are cut: the server starts and
//     serves exactly the 200,000 acknowledged bytes.
//   - accept (docs/OPERATIONS.md "Accepting a loss"): the flip damage again, with a
//     second stream and an idempotent producer's stream written before the
//     damaged append. The refusal names the start flag that accepts it,
//     --accept-loss=segment-N; a start naming other damage still refuses
//     and changes nothing. Started with the right name, the server keeps
//     the appends before the damaged one and drops the rest (the log says
//     what it dropped), and every stream's history is rewritten (extensions
//     §2.4): a new Stream-Incarnation, the old token as
//     Stream-Previous-Incarnation, the kept tail as Stream-Inherited-Offset,
//     412 for the old token as a precondition, the producer's epoch closed
//     by=history. The stream accepts appends at the kept tail, and a
//     restart without the flag starts with the same tokens (one rewrite).
//
// OUTPUT: "FAIL ..." lines, "# ..." notes, last line "N passed, M failed".
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { Checks, Server, http, parseArgs, readAll, tempDir, sleep } from "../faults/lib.mjs";
import { xorByte } from "../lib/damage.mjs";

const USAGE = "usage: node tests/crash/log_damage_test.mjs --bin build/runnel";
const opts = parseArgs(process.argv.slice(2), { bin: "build/runnel" }, USAGE);
const checks = new Checks();
const APPENDS = 100;
const BODY_BYTES = 2000;

function body(name, i) {
  const head = Buffer.from(`[[${name}:${String(i).padStart(3, "0")}]]`);
  const fill = crypto.createHash("sha256").update(`${name}/${i}`).digest("hex");
  return Buffer.concat([head, Buffer.alloc(BODY_BYTES - head.length, fill)]);
}
const expected = (name) => Buffer.concat(Array.from({ length: APPENDS }, (_, i) => body(name, i)));

// Every file under dir: relative path -> "size sha256".
function fingerprint(dir) {
  const out = new Map();
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else {
        const data = fs.readFileSync(p);
        out.set(path.relative(dir, p), `${data.length} ${crypto.createHash("sha256").update(data).digest("hex")}`);
      }
    }
  };
  walk(dir);
  return out;
}

function fingerprintDiff(a, b) {
  const issues = [];
  for (const [k, v] of a) if (b.get(k) !== v) issues.push(`${k}: ${v} -> ${b.get(k) ?? "gone"}`);
  for (const k of b.keys()) if (!a.has(k)) issues.push(`${k}: new file`);
  return issues;
}

// Log segments of the data directory, oldest first.
function segments(dataDir) {
  const wal = path.join(dataDir, "wal");
  return fs.readdirSync(wal).filter((n) => /^[0-9]{20}\.log$/.test(n)).sort().map((n) => path.join(wal, n));
}

// Segment file and offset of needle; throws when absent.
function locate(dataDir, needle) {
  for (const seg of segments(dataDir)) {
    const at = fs.readFileSync(seg).indexOf(needle);
    if (at >= 0) return { seg, at };
  }
  throw new Error(`${needle} is in no log segment`);
}

// The stream ids that have files under <data>/streams (data, index, gap).
function streamFileIds(dataDir) {
  const ids = new Set();
  const top = path.join(dataDir, "streams");
  for (const d of fs.existsSync(top) ? fs.readdirSync(top) : []) {
    if (!fs.statSync(path.join(top, d)).isDirectory()) continue;
    for (const f of fs.readdirSync(path.join(top, d))) {
      const m = /^([0-9a-f]{16})\.(dat|idx|gap)$/.exec(f);
      if (m) ids.add(Number.parseInt(m[1], 16));
    }
  }
  return [...ids];
}

// A server on a fresh data directory holding APPENDS acknowledged appends
// to /v1/stream/damage/<name>, left by SIGKILL.
// `before` (optional) runs first and `after` (optional) last, given the server.
async function prepare(root, name, before = null, after = null) {
  const dataDir = path.join(root, name, "data");
  fs.mkdirSync(path.dirname(dataDir), { recursive: true });
  const srv = new Server({ bin: opts.bin, dataDir, logPath: path.join(root, name, "server.log") });
  await srv.start();
  if (before) await before(srv);
  const url = `${srv.url}/v1/stream/damage/${name}`;
  let r = await http(url, { method: "PUT", headers: { "content-type": "application/octet-stream" } });
  if (r.status !== 201) throw new Error(`create answered ${r.status}`);
  for (let i = 0; i < APPENDS; i++) {
    r = await http(url, { method: "POST", headers: { "content-type": "application/octet-stream" }, body: body(name, i) });
    if (r.status !== 204) throw new Error(`append ${i} answered ${r.status} ${r.text}`);
  }
  if (after) await after(srv);
  await srv.stop("SIGKILL");
  return { srv, dataDir, url: () => `${srv.url}/v1/stream/damage/${name}` };
}

// Starts the server and expects it to refuse: exit non-zero within 20 s
// without becoming ready. Returns the new part of its log.
async function expectRefusal(label, env) {
  const logBefore = fs.readFileSync(env.srv.logPath, "utf8").length;
  await env.srv.start({ waitReady: false });
  const t0 = Date.now();
  let served = null;
  while (!env.srv.exitInfo && Date.now() - t0 < 20000) {
    try {
      const r = await http(`${env.srv.url}/__runnel/readyz`, { timeoutMs: 1000 });
      if (r.status === 200) {
        const got = await readAll(env.url()).catch((e) => ({ body: Buffer.from(e.message) }));
        served = got.body.length;
        break;
      }
    } catch { /* not listening yet, or gone */ }
    await sleep(50);
  }
  const exit = env.srv.exitInfo;
  if (!exit) await env.srv.stop("SIGKILL");
  checks.check(`${label}: the server refuses to start (exits non-zero, never ready)`,
    exit && exit.code !== 0 && served === null,
    served !== null ? `it became ready and served ${served} of ${APPENDS * BODY_BYTES} bytes` : `exit ${JSON.stringify(exit)}`);
  return fs.readFileSync(env.srv.logPath, "utf8").slice(logBefore);
}

async function expectServesAll(label, env, name) {
  try {
    await env.srv.start();
    const got = await readAll(env.url());
    const want = expected(name);
    checks.check(`${label}: the server starts and serves all ${want.length} acknowledged bytes`, got.body.equals(want),
      `served ${got.body.length} bytes`);
  } catch (e) {
    checks.check(`${label}: the server starts and serves all acknowledged bytes`, false, e.message.split("\n").slice(0, 6).join(" | "));
  } finally {
    await env.srv.stop("SIGTERM");
  }
}

const errorLines = (log) => log.split("\n").filter((l) => / error /.test(l) || /"level":"error"/.test(l));

// Flips one byte in the middle of the middle one of the appends to
// damage/<name> in the newest segment, with at least 20 after it. Returns
// {damaged (its number), seg, where}, or null after a failed check.
function flipMiddleAppend(env, name) {
  const segs = segments(env.dataDir);
  const newest = segs[segs.length - 1];
  const inNewest = [];
  for (let i = 0; i < APPENDS; i++) {
    const { seg, at } = locate(env.dataDir, Buffer.from(`[[${name}:${String(i).padStart(3, "0")}]]`));
    if (seg === newest) inNewest.push({ i, at });
  }
  const { i: damaged, at } = inNewest[Math.floor(inNewest.length / 2)] ?? { i: -1 };
  if (!checks.check(`${name}: at least 20 acknowledged appends follow the damaged one in the newest segment`,
    damaged >= 0 && APPENDS - 1 - damaged >= 20, `${inNewest.length} appends in ${newest}`)) return null;
  console.log(`# ${name}: append ${damaged} of ${APPENDS} damaged, ${APPENDS - 1 - damaged} acknowledged after it in the newest segment`);
  const where = at + BODY_BYTES / 2;
  xorByte(newest, where, 0x08);
  return { damaged, seg: newest, where };
}

async function flip(root) {
  const env = await prepare(root, "flip");
  const flipped = flipMiddleAppend(env, "flip");
  if (!flipped) return;
  const { seg, where } = flipped;
  const before = fingerprint(env.dataDir);
  const log = await expectRefusal("flip", env);
  const errs = errorLines(log);
  const named = errs.some((l) => l.includes(path.basename(seg)) && l.includes("damage/flip") && /bytes? [0-9]+/.test(l));
  checks.check("flip: an error names the segment, the byte range and the stream", named, errs.join(" | ") || "no error line");
  console.log(`# flip: ${errs[0] ?? "(no error line)"}`);
  checks.check("flip: the refused start changed nothing in the data directory", fingerprintDiff(before, fingerprint(env.dataDir)));
  xorByte(seg, where, 0x08);
  await expectServesAll("flip, byte restored", env, "flip");
}

async function missing(root) {
  const env = await prepare(root, "missing");
  const segs = segments(env.dataDir);
  const newest = segs[segs.length - 1];
  const saved = fs.readFileSync(newest);
  checks.check("missing: the newest segment holds acknowledged appends", saved.includes(Buffer.from(`[[missing:${String(APPENDS - 1).padStart(3, "0")}]]`)));
  fs.unlinkSync(newest);
  const before = fingerprint(env.dataDir);
  const log = await expectRefusal("missing", env);
  const errs = errorLines(log);
  const segNo = String(Number(path.basename(newest, ".log")));
  checks.check("missing: an error names the missing segment", errs.some((l) => /missing/.test(l) && l.includes(segNo)), errs.join(" | ") || "no error line");
  console.log(`# missing: ${errs[0] ?? "(no error line)"}`);
  checks.check("missing: the refused start changed nothing in the data directory", fingerprintDiff(before, fingerprint(env.dataDir)));
  fs.writeFileSync(newest, saved);
  await expectServesAll("missing, segment restored", env, "missing");
}

async function header(root) {
  const env = await prepare(root, "header");
  const segs = segments(env.dataDir);
  const newest = segs[segs.length - 1];
  xorByte(newest, 9, 0x01); // the segment number in the header
  const before = fingerprint(env.dataDir);
  const log = await expectRefusal("header", env);
  const errs = errorLines(log);
  checks.check("header: an error names the segment and its header", errs.some((l) => l.includes(path.basename(newest)) && /header/.test(l)), errs.join(" | ") || "no error line");
  console.log(`# header: ${errs[0] ?? "(no error line)"}`);
  checks.check("header: the refused start changed nothing in the data directory", fingerprintDiff(before, fingerprint(env.dataDir)));
  xorByte(newest, 9, 0x01);
  await expectServesAll("header, byte restored", env, "header");
}

async function torn(root) {
  const env = await prepare(root, "torn");
  const last = body("torn", APPENDS - 1);
  const { seg, at } = locate(env.dataDir, last);
  // later pages of a batch whose write the crash interrupted (never
  // acknowledged): its first page, after the last acknowledged append,
  // did not reach the disk
  const garbage = crypto.createHash("sha512").update("torn").digest();
  const page = (Math.floor((at + last.length) / 4096) + 1) * 4096;
  const fd = fs.openSync(seg, "r+");
  fs.writeSync(fd, garbage, 0, garbage.length, page);
  fs.closeSync(fd);
  await expectServesAll("torn", env, "torn");
}

async function accept(root) {
  const other = (srv) => `${srv.url}/v1/stream/damage/accept-other`;
  const prod = (srv) => `${srv.url}/v1/stream/damage/accept-prod`;
  const late = (srv) => `${srv.url}/v1/stream/damage/accept-late`;
  const octet = { "content-type": "application/octet-stream" };
  const env = await prepare(root, "accept", async (srv) => {
    for (const u of [other(srv), prod(srv)]) {
      if ((await http(u, { method: "PUT", headers: octet })).status !== 201) throw new Error(`create ${u}`);
    }
    if ((await http(other(srv), { method: "POST", headers: octet, body: "kept" })).status !== 204) throw new Error("append");
    for (let seq = 0; seq < 3; seq++) {
      const r = await http(prod(srv), {
        method: "POST", body: `p${seq}`,
        headers: { ...octet, "producer-id": "p", "producer-epoch": "1", "producer-seq": String(seq) },
      });
      if (r.status !== 200) throw new Error(`producer write ${seq}: ${r.status} ${r.text}`);
    }
  }, async (srv) => {
    // created after the damaged append: the accepted loss drops it
    if ((await http(late(srv), { method: "PUT", headers: octet, body: "late" })).status !== 201) throw new Error("create late");
  });
  const before = {};
  const flipped = flipMiddleAppend(env, "accept");
  if (!flipped) return;
  const log = await expectRefusal("accept", env);
  const named = `--accept-loss=segment-${Number(path.basename(flipped.seg, ".log"))}`;
  checks.check("accept: the refusal names the flag that accepts this loss", log.includes(named),
    errorLines(log).join(" | ") || "no error line");
  env.srv.args = ["--accept-loss=segment-999999"];
  const fp = fingerprint(env.dataDir);
  await expectRefusal("accept, another damage named", env);
  checks.check("accept: a start accepting another damage changed nothing", fingerprintDiff(fp, fingerprint(env.dataDir)));

  // The tokens before the loss: from the log's records, which the refused
  // starts never served; read them from a copy of the directory with the
  // damage undone.
  const copy = path.join(root, "accept", "undamaged");
  fs.cpSync(env.dataDir, copy, { recursive: true });
  xorByte(path.join(copy, "wal", path.basename(flipped.seg)), flipped.where, 0x08);
  const peek = new Server({ bin: opts.bin, dataDir: copy, logPath: path.join(root, "accept", "peek.log") });
  await peek.start();
  for (const [k, u] of [["accept", env.url().replace(env.srv.url, peek.url)], ["other", other(peek)], ["prod", prod(peek)]]) {
    before[k] = (await http(u, { method: "HEAD" })).headers.get("stream-incarnation");
  }
  await peek.stop("SIGKILL");

  // the newest stream's files: its create comes after the damage
  const lateId = Math.max(...streamFileIds(env.dataDir));
  checks.check("accept: the stream created after the damage has files before the accepted start",
    streamFileIds(env.dataDir).length === 4, `ids ${streamFileIds(env.dataDir)}`);
  env.srv.args = [named];
  const logBefore = fs.readFileSync(env.srv.logPath, "utf8").length;
  try {
    await env.srv.start();
  } catch (e) {
    checks.check("accept: the server starts with the loss accepted", false, e.message.split("\n").slice(0, 6).join(" | "));
    return;
  }
  const startLog = fs.readFileSync(env.srv.logPath, "utf8").slice(logBefore);
  checks.check("accept: the log says what was dropped and that every stream was rewritten",
    /accepting the loss/.test(startLog) && startLog.includes("damage/accept") && /rewrote the history of all 3 streams/.test(startLog),
    startLog.split("\n").filter((l) => /accept/.test(l)).join(" | ").slice(0, 600));
  checks.check("accept: the files of the stream the loss dropped are removed",
    !streamFileIds(env.dataDir).includes(lateId), `ids ${streamFileIds(env.dataDir)}, dropped ${lateId}`);
  checks.check("accept: the stream created after the damage is gone", (await http(late(env.srv), { method: "HEAD" })).status === 404);
  const kept = expected("accept").subarray(0, flipped.damaged * BODY_BYTES);
  const got = await readAll(env.url());
  checks.check(`accept: the stream serves exactly the ${flipped.damaged} appends before the damaged one`,
    got.body.equals(kept), `served ${got.body.length} bytes, kept ${kept.length}`);
  const tokens = {};
  for (const [k, u] of [["accept", env.url()], ["other", other(env.srv)], ["prod", prod(env.srv)]]) {
    const h = await http(u, { method: "HEAD" });
    tokens[k] = h.headers.get("stream-incarnation");
    const issues = [];
    if (!tokens[k] || tokens[k] === before[k]) issues.push(`token ${tokens[k]} (before ${before[k]})`);
    if (h.headers.get("stream-previous-incarnation") !== before[k]) issues.push(`previous ${h.headers.get("stream-previous-incarnation")}`);
    if (h.headers.get("stream-inherited-offset") !== h.headers.get("stream-next-offset")) issues.push(`inherited ${h.headers.get("stream-inherited-offset")} tail ${h.headers.get("stream-next-offset")}`);
    const pre = await http(u, { method: "HEAD", headers: { "stream-incarnation": before[k] } });
    if (pre.status !== 412 || pre.headers.get("stream-incarnation") !== tokens[k]) issues.push(`old token as a precondition: ${pre.status}`);
    checks.check(`accept: ${k} has a new incarnation and reports the old one and the kept tail (§2.4)`, issues);
  }
  const closed = await http(prod(env.srv), {
    method: "POST", body: "p3",
    headers: { ...octet, "producer-id": "p", "producer-epoch": "1", "producer-seq": "3" },
  });
  checks.check("accept: the producer's epoch is closed by history",
    closed.status === 403 && closed.headers.get("producer-outcome") === "epoch-closed;by=history" &&
    closed.headers.get("producer-closed-seq") === "2", `${closed.status} ${closed.headers.get("producer-outcome")} ${closed.text}`);
  const more = await http(env.url(), { method: "POST", headers: octet, body: body("accept", flipped.damaged) });
  checks.check("accept: the stream takes appends at the kept tail", more.status === 204, `${more.status} ${more.text}`);
  await env.srv.stop("SIGTERM");
  env.srv.args = [];
  await env.srv.start();
  const again = (await http(other(env.srv), { method: "HEAD" })).headers.get("stream-incarnation");
  checks.check("accept: a restart without the flag starts, with the same tokens (one rewrite)", again === tokens.other,
    `${again} vs ${tokens.other}`);
  const all = await readAll(env.url());
  checks.check("accept: the append after the loss survives the restart",
    all.body.equals(expected("accept").subarray(0, (flipped.damaged + 1) * BODY_BYTES)), `${all.body.length} bytes`);
  await env.srv.stop("SIGTERM");
}

async function main() {
  const t0 = Date.now();
  const root = tempDir("runnel-logdamage-", { keep: true });
  for (const [name, fn] of [["flip", flip], ["missing", missing], ["header", header], ["torn", torn], ["accept", accept]]) {
    try {
      await fn(root);
    } catch (e) {
      checks.check(`${name}: internal error`, false, e.stack);
    }
  }
  console.log(`# runtime ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  if (checks.failed > 0) console.log(`# kept ${root}`);
  else fs.rmSync(root, { recursive: true, force: true });
  process.exit(checks.summary());
}

main();
