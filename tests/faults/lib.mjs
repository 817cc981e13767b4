// Helpers for the fault, kill-point, log-damage, abuse and soak tests: HTTP
// helpers with timeouts, a check counter that prints "N passed, M failed",
// argument parsing, deterministic record bodies and tmpfs mounts. The
// server launcher, free ports, temporary directories and whole-stream reads
// are tests/lib/server.mjs's (re-exported here).
//
// Nothing here talks to anything but 127.0.0.1.
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { sleep } from "../lib/server.mjs";

export { Server, freePort, readAll, sleep, tempDir } from "../lib/server.mjs";

// parseArgs(argv, defaults) -> options; "--name value" or "--name=value",
// numbers parsed when the default is a number. --bin is resolved.
export function parseArgs(argv, defaults, usage) {
  const opts = { ...defaults };
  for (let i = 0; i < argv.length; i++) {
    let [flag, value] = argv[i].split(/=(.*)/s, 2);
    if (flag === "-h" || flag === "--help") {
      console.log(usage);
      process.exit(0);
    }
    const key = flag.replace(/^--/, "").replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (!flag.startsWith("--") || !(key in opts)) {
      console.error(`unknown argument ${argv[i]}\n${usage}`);
      process.exit(2);
    }
    if (typeof opts[key] === "boolean" && value === undefined) {
      opts[key] = true;
      continue;
    }
    if (value === undefined) value = argv[++i];
    if (value === undefined) {
      console.error(`missing value for ${flag}\n${usage}`);
      process.exit(2);
    }
    if (typeof opts[key] === "number") {
      if (!/^[0-9]+$/.test(value)) {
        console.error(`${flag} needs a non-negative integer\n${usage}`);
        process.exit(2);
      }
      opts[key] = Number(value);
    } else if (typeof opts[key] === "boolean") {
      opts[key] = value === "1" || value === "true";
    } else opts[key] = value;
  }
  if ("bin" in opts) {
    opts.bin = path.resolve(opts.bin);
    try {
      fs.accessSync(opts.bin, fs.constants.X_OK);
    } catch {
      console.error(`not an executable: ${opts.bin}\n${usage}`);
      process.exit(2);
    }
  }
  return opts;
}

export class NetError extends Error {
  constructor(cause) {
    super(`${cause?.cause?.code ?? cause?.name ?? "error"}: ${cause?.cause?.message ?? cause?.message ?? cause}`);
    this.code = cause?.cause?.code ?? cause?.name;
  }
}

// http(url, {method, headers, body, timeoutMs}) -> {status, headers, body, text, json()}.
// Throws NetError when no whole answer arrived.
export async function http(url, { method = "GET", headers = {}, body, timeoutMs = 10000 } = {}) {
  try {
    const res = await fetch(url, { method, headers, body, signal: AbortSignal.timeout(timeoutMs) });
    const buf = Buffer.from(await res.arrayBuffer());
    return {
      status: res.status,
      headers: res.headers,
      body: buf,
      get text() { return buf.toString("utf8"); },
      code() {
        try { return JSON.parse(buf.toString("utf8")).error.code; } catch { return null; }
      },
    };
  } catch (err) {
    throw new NetError(err);
  }
}

// Counted checks: check(name, ok|issues[], detail) prints FAIL lines.
export class Checks {
  constructor() { this.passed = 0; this.failed = 0; this.skipped = 0; this.failures = []; }
  check(name, cond, detail = "") {
    const issues = Array.isArray(cond) ? cond : cond ? [] : [detail || "failed"];
    if (issues.length === 0) { this.passed++; return true; }
    this.failed++;
    const line = `FAIL ${name}: ${issues.slice(0, 3).join("; ")}${issues.length > 3 ? ` (+${issues.length - 3} more)` : ""}`;
    this.failures.push(line);
    console.log(line);
    return false;
  }
  // A check that could not run here: counted, and printed with its reason
  // ("SKIP name: reason"; scripts/test.sh lists these lines).
  skip(name, reason) {
    this.skipped++;
    console.log(`SKIP ${name}: ${reason}`);
  }
  // The closing line, "N passed, M failed" (", K skipped" when some were).
  summary() {
    console.log(`${this.passed} passed, ${this.failed} failed${this.skipped ? `, ${this.skipped} skipped` : ""}`);
    return this.failed === 0 ? 0 : 1;
  }
}

// Deterministic self-identifying record body for (label, seq): "<label:seq:pad>".
export function recordBody(label, seq, seed = 0, maxPad = 200) {
  const h = crypto.createHash("sha256").update(`${seed}/${label}/${seq}`).digest();
  const padLen = h.readUInt16LE(0) % (maxPad + 1);
  let pad = "";
  while (pad.length < padLen) pad += crypto.createHash("sha256").update(`${h.toString("hex")}/${pad.length}`).digest("hex");
  return Buffer.from(`<${label}:${seq}:${pad.slice(0, padLen)}>`, "latin1");
}

// percentile(sorted array, p in [0,100]).
export function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  const i = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, i)];
}

// mountTmpfs(dir, sizeMiB) -> true, or a reason string when mounting is not
// permitted. umount(dir) undoes it.
export async function mountTmpfs(dir, sizeMiB) {
  fs.mkdirSync(dir, { recursive: true });
  const r = await run("mount", ["-t", "tmpfs", "-o", `size=${sizeMiB}m`, "tmpfs", dir]);
  return r.code === 0 ? true : `mount failed (code ${r.code}): ${r.out.trim()}`;
}

export async function umount(dir) {
  for (let i = 0; i < 20; i++) {
    const r = await run("umount", [dir]);
    if (r.code === 0) return true;
    await sleep(100);
  }
  await run("umount", ["-l", dir]);
  return false;
}

export function run(cmd, args) {
  return new Promise((resolve) => {
    let out = "";
    let p;
    try {
      p = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    } catch (e) {
      resolve({ code: -1, out: e.message });
      return;
    }
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (out += d));
    p.on("error", (e) => resolve({ code: -1, out: e.message }));
    p.on("exit", (code) => resolve({ code, out }));
  });
}
