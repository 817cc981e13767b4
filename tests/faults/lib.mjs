// Shared helpers for the fault, kill-point, abuse and soak tests: a server
// launcher (own data dir, free loopback port, server output to a log file,
// bounded waits), HTTP helpers with timeouts, a check counter that prints
// "N passed, M failed", and deterministic record bodies.
//
// Nothing here talks to anything but 127.0.0.1.
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// A fast scratch directory: /dev/shm when it is writable (kill-point and
// abuse tests only need a file system that survives the process, not the
// machine), else the system temp dir.
export function scratchDir(prefix, { fast = true } = {}) {
  let base = os.tmpdir();
  if (fast) {
    try {
      fs.accessSync("/dev/shm", fs.constants.W_OK);
      base = "/dev/shm";
    } catch { /* fall back to tmpdir */ }
  }
  return fs.mkdtempSync(path.join(base, prefix));
}

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

// Every server process started here, killed when this process exits (also
// on an interrupt), so no server outlives its test.
const LIVE = new Set();
let exitHooked = false;
function hookExit() {
  if (exitHooked) return;
  exitHooked = true;
  process.on("exit", () => { for (const s of LIVE) s.killNow(); });
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    if (process.listenerCount(sig) === 0) process.on(sig, () => { console.log(`# interrupted by ${sig}`); process.exit(1); });
  }
}

// One server process. start() resolves once /__runnel/readyz answers 200
// (within readyMs), or rejects with the log tail. The server's output is
// appended to logPath.
export class Server {
  constructor({ bin, dataDir, args = [], env = {}, logPath, port }) {
    Object.assign(this, { bin, dataDir, args, env, logPath, port });
    this.proc = null;
  }

  async start({ readyMs = 15000, waitReady = true } = {}) {
    this.port ??= await freePort();
    this.url = `http://127.0.0.1:${this.port}`;
    const fd = fs.openSync(this.logPath, "a");
    fs.writeSync(fd, `\n===== start ${new Date().toISOString()} ${this.args.join(" ")} ${JSON.stringify(this.env)}\n`);
    this.proc = spawn(
      this.bin,
      ["serve", "--listen", `127.0.0.1:${this.port}`, "--data-dir", this.dataDir, ...this.args],
      { stdio: ["ignore", fd, fd], env: { ...process.env, ...this.env } },
    );
    fs.closeSync(fd);
    const proc = this.proc;
    hookExit();
    LIVE.add(this);
    this.exited = new Promise((resolve) => proc.once("exit", (code, signal) => { if (this.proc === proc) LIVE.delete(this); resolve({ code, signal }); }));
    this.exitInfo = null;
    this.exited.then((x) => { this.exitInfo = x; });
    if (!waitReady) return this;
    const t0 = Date.now();
    while (Date.now() - t0 < readyMs) {
      if (this.exitInfo) throw new Error(`server exited during start (${JSON.stringify(this.exitInfo)}):\n${this.logTail()}`);
      try {
        const r = await fetch(`${this.url}/__runnel/readyz`, { signal: AbortSignal.timeout(1000) });
        await r.arrayBuffer();
        if (r.status === 200) return this;
      } catch { /* not yet */ }
      await sleep(15);
    }
    throw new Error(`server not ready within ${readyMs} ms:\n${this.logTail()}`);
  }

  alive() {
    return this.proc && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  // Stops with signal (SIGKILL after graceMs); resolves to {code, signal}.
  async stop(signal = "SIGTERM", graceMs = 15000) {
    if (!this.proc) return null;
    if (this.alive()) this.proc.kill(signal);
    const t = setTimeout(() => { if (this.alive()) this.proc.kill("SIGKILL"); }, graceMs);
    const r = await this.exited;
    clearTimeout(t);
    return r;
  }

  killNow() {
    try { if (this.alive()) this.proc.kill("SIGKILL"); } catch { /* gone */ }
  }

  pid() {
    return this.proc?.pid;
  }

  // Resident set size in KiB from /proc (0 when unknown).
  rssKiB() {
    try {
      const m = fs.readFileSync(`/proc/${this.proc.pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/);
      return m ? Number(m[1]) : 0;
    } catch { return 0; }
  }

  logTail(lines = 30) {
    try {
      return fs.readFileSync(this.logPath, "utf8").split("\n").slice(-lines).join("\n");
    } catch (e) { return `(no log: ${e.message})`; }
  }
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

// Reads a whole stream (catch-up reads from -1, following Stream-Next-Offset).
// Returns {body, next, closed} or throws.
export async function readAll(url, { maxPages = 100000, timeoutMs = 10000 } = {}) {
  let offset = "-1";
  const parts = [];
  for (let i = 0; i < maxPages; i++) {
    const r = await http(`${url}?offset=${encodeURIComponent(offset)}`, { timeoutMs });
    if (r.status !== 200) {
      const e = new Error(`GET ${url}?offset=${offset} answered ${r.status} ${r.text.slice(0, 200)}`);
      e.status = r.status;
      throw e;
    }
    parts.push(r.body);
    offset = r.headers.get("stream-next-offset");
    if (r.headers.get("stream-up-to-date") === "true") {
      return { body: Buffer.concat(parts), next: offset, closed: r.headers.get("stream-closed") === "true" };
    }
  }
  throw new Error("stream did not end within the page bound");
}

// Counted checks: check(name, ok|issues[], detail) prints FAIL lines.
export class Checks {
  constructor() { this.passed = 0; this.failed = 0; this.failures = []; }
  check(name, cond, detail = "") {
    const issues = Array.isArray(cond) ? cond : cond ? [] : [detail || "failed"];
    if (issues.length === 0) { this.passed++; return true; }
    this.failed++;
    const line = `FAIL ${name}: ${issues.slice(0, 3).join("; ")}${issues.length > 3 ? ` (+${issues.length - 3} more)` : ""}`;
    this.failures.push(line);
    console.log(line);
    return false;
  }
  summary() {
    console.log(`${this.passed} passed, ${this.failed} failed`);
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
