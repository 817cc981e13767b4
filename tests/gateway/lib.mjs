// The gateway tests' shared setup: API keys and tenants files, a gated
// deployment in either form (a node with `runnel gateway` in front of it,
// or one `runnel serve --tenants FILE`), a standalone gateway in front of
// any upstreams (a cluster's nodes, or none that answers), `runnel gateway
// key new`, and HTTP stubs for an external authorizer and a JWKS URL.
// Every credential made here is remembered in SECRETS, so that a test can
// look for each in logs, metrics and bodies. Servers and directories go
// when the test process exits (tests/lib/server.mjs).
import crypto from "node:crypto";
import { execFile } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import path from "node:path";
import { BIN, Server, freePort, sleep, tempDir } from "../lib/server.mjs";
import { JwtIssuer } from "./jwt.mjs";

export { BIN, Server, freePort, sleep, tempDir };
export { waitFor, readAll } from "../lib/server.mjs";
import { Conn, call, requestHead } from "./wire.mjs";
export { Conn, call, rawRequest, requestHead } from "./wire.mjs";
export { openSse } from "../blackbox/lib/bucket.mjs";

// The two forms of the gate; a suite runs its table against both.
export const MODES = ["standalone", "embedded"];

// Every key, token and secret a test made (each test process's own).
export const SECRETS = new Set();
export function remember(secret) {
  SECRETS.add(secret);
  return secret;
}

// A new API key in the form `runnel gateway key new` prints (rnk_ and 64
// hex digits).
export function newKey() {
  return remember(`rnk_${crypto.randomBytes(32).toString("hex")}`);
}

// A JWT issuer (jwt.mjs) whose HS256 secret and every token it mints are
// remembered as secrets.
export class Issuer extends JwtIssuer {
  constructor(opts) {
    super(opts);
    remember(this.secretText);
  }

  mint(opts) {
    return remember(super.mint(opts));
  }
}

export const sha256hex = (text) => crypto.createHash("sha256").update(text).digest("hex");

// The tenants file's entry for a key: its SHA-256 only.
export function keyEntry(key, { id = `k-${crypto.randomBytes(3).toString("hex")}`, expires = null } = {}) {
  return { id, sha256: sha256hex(key), ...(expires ? { expires } : {}) };
}

// A tenant with one new key: {key, entry (for the file)}. rights: the
// pattern -> letters map; the other members are copied into the entry.
export function tenant(rights, extra = {}, { expires = null } = {}) {
  const key = newKey();
  return { key, entry: { keys: [keyEntry(key, { expires })], rights, ...extra } };
}

// Writes a tenants file atomically (a new file renamed over the old).
export function writeTenants(file, doc) {
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, typeof doc === "string" ? doc : JSON.stringify(doc, null, 2));
  fs.renameSync(tmp, file);
}

// The tenants document of {name: {key, entry}} tenants (copies of their
// entries, so that a test may change the document), issuers and an
// authorizer.
export function tenantsDoc(tenants, { issuers = [], authorizer = null } = {}) {
  const doc = { tenants: Object.fromEntries(Object.entries(tenants).map(([n, t]) => [n, structuredClone(t.entry)])) };
  if (issuers.length) doc.issuers = issuers;
  if (authorizer) doc.authorizer = authorizer;
  return doc;
}

export const bearer = (credential) => ({ authorization: `Bearer ${credential}` });

// `runnel gateway ...` on upstreams (URLs, none answering is allowed),
// with the tenants file and extra flags. Ready when its readyz answers 200
// (once a node answered); start({waitReady: false}) for one that cannot be.
export class Gateway extends Server {
  constructor({ upstreams, tenantsFile, args = [], logPath, port }) {
    super({ args, logPath, port, dataDir: "-" });
    Object.assign(this, { upstreams, tenantsFile });
  }

  argv() {
    const up = this.upstreams.flatMap((u) => ["--upstream", u]);
    return ["gateway", "--listen", `127.0.0.1:${this.port}`, ...up, "--tenants", this.tenantsFile, ...this.args];
  }
}

// Resolves once url's /__runnel/livez answers 200 (the process serves,
// ready or not).
export async function waitLive(proc, ms = 15000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (!proc.alive()) throw new Error(`exited during start (${JSON.stringify(proc.exitInfo)}):\n${proc.logTail()}`);
    try {
      const r = await fetch(`${proc.url}/__runnel/livez`, { signal: AbortSignal.timeout(1000) });
      await r.arrayBuffer();
      if (r.status === 200) return;
    } catch { /* not yet */ }
    await sleep(20);
  }
  throw new Error(`not live within ${ms} ms:\n${proc.logTail()}`);
}

// Starts a process that should refuse to start; resolves to {code, log}
// once it exited (rejects when it still runs after ms).
export async function expectNoStart(proc, ms = 10000) {
  await proc.start({ waitReady: false });
  const t = sleep(ms).then(() => null);
  const exit = await Promise.race([proc.exited, t]);
  if (!exit) {
    await proc.stop("SIGKILL");
    throw new Error(`it started and still runs after ${ms} ms:\n${proc.logTail()}`);
  }
  return { ...exit, log: proc.log };
}

// A gated deployment: mode "standalone" (a node, and a gateway in front of
// it) or "embedded" (one `runnel serve --tenants FILE`). tenants: the file's
// document (or text); gateArgs: flags of the gate, given to the gateway or
// to the embedding node; nodeArgs: the node's own; gatewayArgs: the
// standalone gateway's only; accessLog and debug add --access-log and
// --log-level debug to every process; tap (standalone): the gateway reaches
// the node through a tap (startTap) that keeps what the gateway sent.
export class Deployment {
  constructor(mode, { tenants, gateArgs = [], nodeArgs = [], gatewayArgs = [], accessLog = false, debug = false, tap = false }) {
    this.mode = mode;
    this.wantTap = tap && mode === "standalone";
    this.dir = tempDir(`runnel-gw-${mode}-`);
    this.tenantsFile = path.join(this.dir, "tenants.json");
    writeTenants(this.tenantsFile, tenants);
    const common = [...(accessLog ? ["--access-log"] : []), ...(debug ? ["--log-level", "debug"] : [])];
    const nodeLog = path.join(this.dir, "node.log");
    if (mode === "standalone") {
      this.node = new Server({ args: [...nodeArgs, ...common], logPath: nodeLog });
      this.gatewayArgs = [...gateArgs, ...gatewayArgs, ...common];
    } else {
      this.node = new Server({ args: ["--tenants", this.tenantsFile, ...gateArgs, ...nodeArgs, ...common], logPath: nodeLog });
    }
  }

  // Starts every process; when one fails to start, stops those started and
  // rejects.
  async start() {
    try {
      await this.#startAll();
    } catch (e) {
      for (const p of [this.gateway, this.node]) await p?.stop("SIGKILL");
      await this.tap?.close();
      throw e;
    }
    return this;
  }

  async #startAll() {
    await this.node.start();
    if (this.mode === "standalone") {
      if (this.wantTap) this.tap = await startTap(this.node.port);
      const upstream = this.tap ? this.tap.url : this.node.url;
      this.gateway = new Gateway({ upstreams: [upstream], tenantsFile: this.tenantsFile, args: this.gatewayArgs, logPath: path.join(this.dir, "gateway.log") });
      await this.gateway.start();
    }
    this.gate = this.gateway ?? this.node;
    this.url = this.gate.url;
    this.port = this.gate.port;
  }

  // Where the gate's metrics are.
  get metricsPath() {
    return this.mode === "standalone" ? "/__runnel/gateway/metrics" : "/__runnel/metrics";
  }

  // Rewrites the tenants file (not reloaded until reload()).
  setTenants(doc) {
    writeTenants(this.tenantsFile, doc);
  }

  // SIGHUP to the process holding the gate.
  reload() {
    this.gate.proc.kill("SIGHUP");
  }

  // Every process's output so far.
  logs() {
    return [this.node, this.gateway].filter(Boolean).map((p) => p.log).join("\n");
  }

  // SIGTERM to every process; each must exit 0 with no sanitizer report.
  async stop() {
    const out = [];
    for (const p of [this.gateway, this.node].filter(Boolean)) {
      const r = await p.stop();
      if (r && (r.code !== 0 || r.signal)) out.push(`${p === this.node ? "node" : "gateway"} exited ${JSON.stringify(r)}:\n${p.logTail(20)}`);
      const m = /ERROR: (Address|Leak)Sanitizer|runtime error:/.exec(p.log);
      if (m) out.push(`sanitizer report: ${p.log.slice(m.index, m.index + 3000)}`);
    }
    await this.tap?.close();
    if (out.length) throw new Error(out.join("\n"));
  }
}

export async function startDeployment(mode, opts) {
  return new Deployment(mode, opts).start();
}

// `runnel gateway key new ARGS...`: resolves to {code, stdout, stderr}.
export function keyNew(args) {
  return new Promise((resolve) => {
    execFile(BIN, ["gateway", "key", "new", ...args], { timeout: 15000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr });
    });
  });
}

// An HTTP stub on a free loopback port: handler(req, body, res) answers;
// `requests` keeps {method, url, headers, body} of each. close() stops it
// (its port then refuses connections).
export async function startStub(handler) {
  const requests = [];
  const server = http.createServer((req, res) => {
    const parts = [];
    req.on("data", (d) => parts.push(d));
    req.on("end", () => {
      const body = Buffer.concat(parts).toString("utf8");
      requests.push({ method: req.method, url: req.url, headers: req.headers, body });
      Promise.resolve(handler(req, body, res)).catch(() => res.destroy());
    });
  });
  const port = await freePort();
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise((resolve) => {
      server.closeAllConnections?.();
      server.close(() => resolve());
    }),
  };
}

// A JWKS URL serving doc at /jwks.json.
export function jwksStub(doc) {
  return startStub((req, body, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(doc));
  });
}

// An external authorizer: decide(request JSON) returns {status, headers,
// body, delayMs}; the stub answers with it.
export function authorizerStub(decide) {
  return startStub(async (req, body, res) => {
    let ask = null;
    try { ask = JSON.parse(body); } catch { /* answered as decide says */ }
    const d = (await decide(ask)) ?? { status: 204 };
    if (d.delayMs) await sleep(d.delayMs);
    res.writeHead(d.status, d.headers ?? {});
    res.end(d.body === undefined ? undefined : typeof d.body === "string" ? d.body : JSON.stringify(d.body));
  });
}

// A TCP tap on a free loopback port that passes every connection on to
// 127.0.0.1:targetPort both ways and keeps the bytes sent to the target:
// {port, url, sent() (a Buffer of all of them), close()}.
export async function startTap(targetPort) {
  const chunks = [];
  const sockets = new Set();
  const server = net.createServer((client) => {
    const up = net.connect(targetPort, "127.0.0.1");
    for (const s of [client, up]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => { client.destroy(); up.destroy(); });
    }
    client.on("data", (d) => chunks.push(Buffer.from(d)));
    client.pipe(up);
    up.pipe(client);
  });
  const port = await freePort();
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    sent: () => Buffer.concat(chunks),
    close: () => new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}

// A port on which nothing listens (it was free a moment ago).
export async function deadUrl() {
  return `http://127.0.0.1:${await freePort()}`;
}

// Creates streams through the gate with a key: [[path, body]] (text/plain,
// the body its first bytes, or none); each must answer 201.
export async function seed(d, key, streams) {
  for (const [p, body] of streams) {
    const r = await call(`${d.url}${p}`, { method: "PUT", headers: { ...bearer(key), "content-type": "text/plain" }, body });
    if (r.status !== 201) throw new Error(`PUT ${p} through the ${d.mode} gate answered ${r.status} ${r.text}`);
  }
}

// A stream's whole content read through the gate with a key (a catch-up
// read from the start, following Stream-Next-Offset).
export async function content(d, key, p) {
  let offset = "-1";
  const parts = [];
  for (let i = 0; i < 1000; i++) {
    const r = await call(`${d.url}${p}?offset=${encodeURIComponent(offset)}`, { headers: bearer(key) });
    if (r.status !== 200) throw new Error(`GET ${p} through the ${d.mode} gate answered ${r.status} ${r.text}`);
    parts.push(r.body);
    offset = r.header("stream-next-offset");
    if (r.header("stream-up-to-date") === "true") return Buffer.concat(parts).toString("latin1");
  }
  throw new Error(`${p} did not end within 1000 reads`);
}

// A text/plain POST of `total` bytes to path through port with key, cut
// from under the gateway: once 3 MiB are sent (past --hold-body-bytes, so
// streamed on as they come) and half a second passed, kill() runs (a node
// SIGKILLed); the rest is sent while the connection takes it. Resolves to
// the answer (rejects when none came).
export async function uploadCut(port, path, key, total, kill) {
  const c = await Conn.open(port, { timeoutMs: 30000 });
  c.write(requestHead("POST", path, { ...bearer(key), "Content-Type": "text/plain", "Content-Length": String(total) }));
  const piece = Buffer.alloc(256 * 1024, 0x42);
  let sent = 0;
  for (; sent < 3 * (1 << 20); sent += piece.length) c.write(piece);
  await sleep(500);
  await kill();
  let answer = null;
  const pending = c.answer({ timeoutMs: 30000 }).then((r) => (answer = r), (e) => (answer = e));
  for (; !answer && sent < total; sent += piece.length) {
    if (!c.write(piece)) break;
    await sleep(5);
  }
  await pending;
  c.close();
  if (answer instanceof Error) throw answer;
  return answer;
}
