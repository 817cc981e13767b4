// The helpers every JavaScript test suite shares (black-box, client CLI,
// cluster, crash, log damage, subscriptions, faults, kill points, abuse,
// soak): a runnel server on a free loopback port with bounded waits, free
// ports, temporary directories, sleeps and polls, and a whole-stream read.
// Every server started here is killed, and every temporary directory not
// kept is removed, when the test process exits (also on SIGINT, SIGTERM and
// SIGHUP), so no server outlives its test and a run leaves nothing behind.
// Nothing here talks to anything but 127.0.0.1.
import { spawn } from "node:child_process";
import fs from "node:fs";
import https from "node:https";
import net from "node:net";
import os from "node:os";
import path from "node:path";

// The server binary when a test names none: RUNNEL_BIN (ctest and
// scripts/test.sh set it per build), else the plain build's.
export const BIN = process.env.RUNNEL_BIN ?? "build/runnel";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A TCP port that was free on 127.0.0.1 a moment ago, below the kernel's
// ephemeral range (32768-60999 by default), so that no outgoing
// connection of this machine takes it before the server binds it (a
// cluster test on a loaded machine lost a Raft port that way): random in
// 20000-32767, tried up to 50 times, else any port the kernel gives.
// Never the same port twice in 10 minutes to processes sharing a TMPDIR,
// whichever of them asks: two test processes run at once, and each may hold a port
// unbound for seconds (a sanitizer build's node starting, a node
// restarting on its old ports); CI saw two of them draw the same port
// ("listen on 127.0.0.1:28755: address already in use"). A port is
// reserved by creating a file named after it and the current 10-minute
// period in a directory under TMPDIR (O_EXCL: one creator wins), which
// every process of a scripts/test.sh step shares (ctest runs its tests
// two at a time there) and which goes with the step's scratch directory;
// a file of this period or the one before it keeps the port reserved.
const RESERVE_DIR = path.join(os.tmpdir(), "runnel-test-ports");
const RESERVE_PERIOD_MS = 10 * 60 * 1000;

function reservePort(port) {
  const period = Math.floor(Date.now() / RESERVE_PERIOD_MS);
  fs.mkdirSync(RESERVE_DIR, { recursive: true });
  if (fs.existsSync(path.join(RESERVE_DIR, `${port}.${period - 1}`))) return false;
  try {
    fs.closeSync(fs.openSync(path.join(RESERVE_DIR, `${port}.${period}`), "wx"));
    return true;
  } catch (e) {
    if (e.code === "EEXIST") return false;
    throw e;
  }
}

// Removes the reservations of periods that no longer count (best effort:
// another process may be removing them too).
function dropOldReservations() {
  const period = Math.floor(Date.now() / RESERVE_PERIOD_MS);
  let names = [];
  try {
    names = fs.readdirSync(RESERVE_DIR);
  } catch {
    return;
  }
  for (const name of names) {
    if (Number(name.split(".")[1]) >= period - 1) continue;
    try {
      fs.unlinkSync(path.join(RESERVE_DIR, name));
    } catch {}
  }
}

let oldReservationsDropped = false;
export async function freePort() {
  if (!oldReservationsDropped) {
    oldReservationsDropped = true;
    dropOldReservations();
  }
  const tryPort = (port) => new Promise((resolve) => {
    const s = net.createServer();
    s.once("error", () => resolve(0));
    s.listen(port, "127.0.0.1", () => {
      const got = s.address().port;
      s.close(() => resolve(got));
    });
  });
  for (let i = 0; i < 50; i++) {
    const wanted = 20000 + Math.floor(Math.random() * 12768);
    if (!reservePort(wanted)) continue;
    if (await tryPort(wanted)) return wanted;
  }
  for (let i = 0; i < 50; i++) {
    const port = await tryPort(0);
    if (port && reservePort(port)) return port;
  }
  throw new Error("no free TCP port on 127.0.0.1");
}

const running = new Set(); // server processes not yet exited
const madeDirs = []; // temporary directories removed at exit
let exitHooked = false;
function hookExit() {
  if (exitHooked) return;
  exitHooked = true;
  process.on("exit", () => {
    for (const proc of running) {
      try { proc.kill("SIGKILL"); } catch { /* gone */ }
    }
    for (const dir of madeDirs) fs.rmSync(dir, { recursive: true, force: true });
  });
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    if (process.listenerCount(sig) === 0) {
      process.on(sig, () => {
        console.log(`# interrupted by ${sig}`);
        process.exit(1);
      });
    }
  }
}

// tempDir(prefix, {fast, keep}) -> a new directory. fast: under /dev/shm
// when it is writable (for tests that need a file system surviving the
// process, not the machine), else under the system temp dir. keep: not
// removed at exit (the test removes it, or keeps it to show a failure).
export function tempDir(prefix = "runnel-test-", { fast = false, keep = false } = {}) {
  let base = os.tmpdir();
  if (fast) {
    try {
      fs.accessSync("/dev/shm", fs.constants.W_OK);
      base = "/dev/shm";
    } catch { /* fall back to the temp dir */ }
  }
  const dir = fs.mkdtempSync(path.join(base, prefix));
  if (!keep) {
    hookExit();
    madeDirs.push(dir);
  }
  return dir;
}

// Polls fn until it returns a truthy value, which it returns; throws after
// ms, naming what describe() says of the last state (when given).
export async function waitFor(what, fn, ms = 15000, every = 100, describe = null) {
  const end = Date.now() + ms;
  for (;;) {
    const last = await fn();
    if (last) return last;
    if (Date.now() > end) {
      const state = describe ? `: ${describe()}` : "";
      throw new Error(`timed out after ${ms} ms waiting for ${what}${state}`);
    }
    await sleep(every);
  }
}

// The status of a GET over https trusting the CA certificate(s) ca (PEM),
// on a connection of its own.
export function httpsStatus(url, ca, timeoutMs = 1000) {
  return new Promise((resolve, reject) => {
    const rq = https.get(url, { ca, agent: false, timeout: timeoutMs }, (rs) => {
      rs.resume();
      rs.on("end", () => resolve(rs.statusCode));
      rs.on("error", reject);
    });
    rq.on("timeout", () => rq.destroy(new Error(`GET ${url} timed out`)));
    rq.on("error", reject);
  });
}

// One server process: `runnel serve` on 127.0.0.1 with a data directory (a
// new temporary one unless given). Its output goes to logPath (appended,
// each start headed by a line) or, without one, to the string `log`. With
// tls ({cert, key, ca}: file paths) it serves https with that certificate
// and key, and its readiness is asked trusting the CA file ca.
export class Server {
  constructor({ bin = BIN, dataDir, args = [], env = {}, logPath = null, port, tls = null } = {}) {
    Object.assign(this, { bin, dataDir: dataDir ?? tempDir("runnel-bb-"), args, env, logPath, port, tls });
    this.proc = null;
    this.memoryLog = "";
  }

  // Starts the server; resolves once /__runnel/readyz answers 200 (recovery
  // finished) within readyMs, or rejects with the log's tail. With
  // waitReady false it resolves at once.
  async start({ readyMs = 15000, waitReady = true } = {}) {
    this.port ??= await freePort();
    this.url = `${this.tls ? "https" : "http"}://127.0.0.1:${this.port}`;
    const argv = this.argv();
    const options = { env: { ...process.env, ...this.env } };
    let fd = null;
    if (this.logPath) {
      fd = fs.openSync(this.logPath, "a");
      fs.writeSync(fd, `\n===== start ${new Date().toISOString()} ${this.args.join(" ")} ${JSON.stringify(this.env)}\n`);
      options.stdio = ["ignore", fd, fd];
    } else {
      options.stdio = ["ignore", "pipe", "pipe"];
    }
    hookExit();
    const proc = spawn(this.bin, argv, options);
    this.proc = proc;
    if (fd !== null) fs.closeSync(fd);
    else for (const s of [proc.stdout, proc.stderr]) s.on("data", (d) => (this.memoryLog += d));
    running.add(proc);
    this.exitInfo = null;
    this.exited = new Promise((resolve) =>
      proc.once("exit", (code, signal) => {
        running.delete(proc);
        resolve({ code, signal });
      }),
    );
    this.exited.then((x) => { if (this.proc === proc) this.exitInfo = x; });
    if (!waitReady) return this;
    const t0 = Date.now();
    while (Date.now() - t0 < readyMs) {
      if (this.exitInfo) throw new Error(`server exited during start (${JSON.stringify(this.exitInfo)}):\n${this.logTail()}`);
      try {
        if (this.tls) {
          if ((await httpsStatus(`${this.url}/__runnel/readyz`, fs.readFileSync(this.tls.ca))) === 200) return this;
        } else {
          const r = await fetch(`${this.url}/__runnel/readyz`, { signal: AbortSignal.timeout(1000) });
          await r.arrayBuffer();
          if (r.status === 200) return this;
        }
      } catch { /* not yet */ }
      await sleep(15);
    }
    throw new Error(`server not ready within ${readyMs} ms:\n${this.logTail()}`);
  }

  // The command line after the binary (a subclass that runs another
  // command, such as `runnel gateway`, names its own).
  argv() {
    const tlsArgs = this.tls ? ["--tls-cert", this.tls.cert, "--tls-key", this.tls.key] : [];
    return ["serve", "--listen", `127.0.0.1:${this.port}`, "--data-dir", this.dataDir, ...tlsArgs, ...this.args];
  }

  alive() {
    return this.proc !== null && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  // Stops with signal (SIGKILL after graceMs); resolves to {code, signal},
  // or null when it was never started.
  async stop(signal = "SIGTERM", graceMs = 15000) {
    if (!this.proc) return null;
    if (this.alive()) this.proc.kill(signal);
    const t = setTimeout(() => { if (this.alive()) this.proc.kill("SIGKILL"); }, graceMs);
    const r = await this.exited;
    clearTimeout(t);
    return r;
  }

  async restart(signal = "SIGTERM") {
    await this.stop(signal);
    return this.start();
  }

  // SIGKILL now, if running (safe in an 'exit' handler).
  killNow() {
    try { if (this.alive()) this.proc.kill("SIGKILL"); } catch { /* gone */ }
  }

  pid() {
    return this.proc?.pid;
  }

  // Everything the server wrote (all its starts).
  get log() {
    if (!this.logPath) return this.memoryLog;
    try { return fs.readFileSync(this.logPath, "utf8"); } catch { return ""; }
  }

  logTail(lines = 30) {
    return this.log.split("\n").slice(-lines).join("\n");
  }

  // Resident set size in KiB from /proc (0 when unknown).
  rssKiB() {
    try {
      const m = fs.readFileSync(`/proc/${this.proc.pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/);
      return m ? Number(m[1]) : 0;
    } catch { return 0; }
  }

  stream(p) {
    return `${this.url}/v1/stream/${p}`;
  }
}

// Reads a whole stream: catch-up reads from offset -1, following
// Stream-Next-Offset. Returns {body, next, closed}; throws on an answer
// other than 200 (the error carries its status) or a request past timeoutMs.
export async function readAll(url, { maxPages = 100000, timeoutMs = 10000 } = {}) {
  let offset = "-1";
  const parts = [];
  for (let i = 0; i < maxPages; i++) {
    const res = await fetch(`${url}?offset=${encodeURIComponent(offset)}`, { signal: AbortSignal.timeout(timeoutMs) });
    const body = Buffer.from(await res.arrayBuffer());
    if (res.status !== 200) {
      const e = new Error(`GET ${url}?offset=${offset} answered ${res.status} ${body.toString("utf8").slice(0, 200)}`);
      e.status = res.status;
      throw e;
    }
    parts.push(body);
    offset = res.headers.get("stream-next-offset");
    if (res.headers.get("stream-up-to-date") === "true") {
      return { body: Buffer.concat(parts), next: offset, closed: res.headers.get("stream-closed") === "true" };
    }
  }
  throw new Error("stream did not end within the page bound");
}
