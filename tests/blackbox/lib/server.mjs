// Starts and stops a runnel server for black-box tests: a fresh data
// directory (or a given one), a free loopback port, bounded waits. The
// binary comes from RUNNEL_BIN (scripts/test.sh sets it per build).
// Every directory made by tempDir() is removed when the test file's process
// exits, after any server still running has been killed, so a run leaves
// nothing behind and its disk use is bounded by the files running at once.
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

export const BIN = process.env.RUNNEL_BIN ?? "build/runnel";

export async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const madeDirs = [];
const running = new Set();
process.on("exit", () => {
  for (const proc of running) proc.kill("SIGKILL");
  for (const dir of madeDirs) fs.rmSync(dir, { recursive: true, force: true });
});

export function tempDir(prefix = "runnel-bb-") {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  madeDirs.push(dir);
  return dir;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A running server. start() waits until it answers HTTP (10 s at most).
export class Server {
  constructor({ dataDir = tempDir(), args = [] } = {}) {
    this.dataDir = dataDir;
    this.args = args;
    this.log = "";
  }

  async start() {
    this.port ??= await freePort();
    this.url = `http://127.0.0.1:${this.port}`;
    this.proc = spawn(
      BIN,
      ["serve", "--listen", `127.0.0.1:${this.port}`, "--data-dir", this.dataDir, ...this.args],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    this.proc.stdout.on("data", (d) => (this.log += d));
    this.proc.stderr.on("data", (d) => (this.log += d));
    const proc = this.proc;
    running.add(proc);
    this.exited = new Promise((resolve) =>
      proc.on("exit", (code, signal) => {
        running.delete(proc);
        resolve({ code, signal });
      }),
    );
    for (let i = 0; i < 100; i++) {
      try {
        const res = await fetch(`${this.url}/__runnel/readyz`, { signal: AbortSignal.timeout(1000) });
        if (res.status === 200) return this; // recovery finished
        await sleep(20);
      } catch {
        await sleep(100);
      }
    }
    throw new Error(`server did not answer within 10 s:\n${this.log}`);
  }

  // Stops with the signal; resolves to {code, signal}. SIGKILL after 15 s.
  async stop(signal = "SIGTERM") {
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode !== null) return this.exited;
    this.proc.kill(signal);
    const timer = setTimeout(() => this.proc.kill("SIGKILL"), 15000);
    const result = await this.exited;
    clearTimeout(timer);
    return result;
  }

  async restart(signal = "SIGTERM") {
    await this.stop(signal);
    return this.start();
  }

  stream(p) {
    return `${this.url}/v1/stream/${p}`;
  }
}

// Reads a whole stream from offset -1 by following Stream-Next-Offset.
export async function readAll(url, { maxPages = 10000 } = {}) {
  let offset = "-1";
  const chunks = [];
  for (let i = 0; i < maxPages; i++) {
    const res = await fetch(`${url}?offset=${offset}`);
    if (res.status !== 200) throw new Error(`GET ${url}?offset=${offset} answered ${res.status}`);
    chunks.push(Buffer.from(await res.arrayBuffer()));
    offset = res.headers.get("stream-next-offset");
    if (res.headers.get("stream-up-to-date") === "true") {
      return { body: Buffer.concat(chunks), offset, closed: res.headers.get("stream-closed") === "true" };
    }
  }
  throw new Error("stream did not end within the page bound");
}
