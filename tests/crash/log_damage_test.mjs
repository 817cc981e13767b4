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
//
// OUTPUT: "FAIL ..." lines, "# ..." notes, last line "N passed, M failed".
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { Checks, Server, http, parseArgs, readAll, tempDir, sleep } from "../faults/lib.mjs";

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

function xorByte(file, at, mask) {
  const fd = fs.openSync(file, "r+");
  const b = Buffer.alloc(1);
  fs.readSync(fd, b, 0, 1, at);
  b[0] ^= mask;
  fs.writeSync(fd, b, 0, 1, at);
  fs.closeSync(fd);
}

// A server on a fresh data directory holding APPENDS acknowledged appends
// to /v1/stream/damage/<name>, left by SIGKILL.
async function prepare(root, name) {
  const dataDir = path.join(root, name, "data");
  fs.mkdirSync(path.dirname(dataDir), { recursive: true });
  const srv = new Server({ bin: opts.bin, dataDir, logPath: path.join(root, name, "server.log") });
  await srv.start();
  const url = `${srv.url}/v1/stream/damage/${name}`;
  let r = await http(url, { method: "PUT", headers: { "content-type": "application/octet-stream" } });
  if (r.status !== 201) throw new Error(`create answered ${r.status}`);
  for (let i = 0; i < APPENDS; i++) {
    r = await http(url, { method: "POST", headers: { "content-type": "application/octet-stream" }, body: body(name, i) });
    if (r.status !== 204) throw new Error(`append ${i} answered ${r.status} ${r.text}`);
  }
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

async function flip(root) {
  const env = await prepare(root, "flip");
  const segs = segments(env.dataDir);
  const newest = segs[segs.length - 1];
  const inNewest = [];
  for (let i = 0; i < APPENDS; i++) {
    const { seg, at } = locate(env.dataDir, Buffer.from(`[[flip:${String(i).padStart(3, "0")}]]`));
    if (seg === newest) inNewest.push({ i, at });
  }
  const { i: damaged, at } = inNewest[Math.floor(inNewest.length / 2)] ?? { i: -1 };
  const seg = newest;
  if (!checks.check("flip: at least 20 acknowledged appends follow the damaged one in the newest segment",
    damaged >= 0 && APPENDS - 1 - damaged >= 20, `${inNewest.length} appends in ${newest}`)) return;
  console.log(`# flip: append ${damaged} of ${APPENDS} damaged, ${APPENDS - 1 - damaged} acknowledged after it in the newest segment`);
  const where = at + BODY_BYTES / 2;
  xorByte(seg, where, 0x08);
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

async function main() {
  const t0 = Date.now();
  const root = tempDir("runnel-logdamage-", { keep: true });
  for (const [name, fn] of [["flip", flip], ["missing", missing], ["header", header], ["torn", torn]]) {
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
