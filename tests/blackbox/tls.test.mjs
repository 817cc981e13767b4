// TLS (issue 17): --tls-cert/--tls-key make the port speak HTTPS. Every
// route family answers over https (curl), on HTTP/1.1 and on HTTP/2 chosen
// by ALPN; start refuses an expired
// certificate, a key that does not match it and an unreadable file with a
// message naming the file; plain HTTP to the TLS port is answered 400 or
// closed, never left hanging; a handshake dribbled byte by byte holds no
// other client up and is closed at the idle timeout; TLS 1.1 is refused,
// sessions resume from tickets; SIGHUP reloads certificate and key under
// load without a failed request, open connections keep theirs, and a
// failed reload keeps the previous one. The certificates come from a test
// CA made by tests/lib/test_pki.sh for this run.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import https from "node:https";
import net from "node:net";
import path from "node:path";
import tls from "node:tls";
import { after, before, describe, test } from "node:test";
import { Server, freePort, sleep, tempDir } from "./lib/server.mjs";
import { spawnServe } from "./lib/ops.mjs";
import { curlTls, makePki } from "../lib/tls.mjs";

const pki = makePki();
const { file, ca } = pki;
const serialOf = (pem) => new crypto.X509Certificate(pem).serialNumber;

const curl = (url, args) => curlTls(pki, url, args);

// One https request with node (agent: a keep-alive agent, or none for a
// connection of its own); {status, headers, body, socket, reused}.
function request(url, { method = "GET", headers = {}, body, agent = false, timeoutMs = 10000 } = {}) {
  return new Promise((resolve, reject) => {
    const rq = https.request(url, { method, headers, ca, agent, timeout: timeoutMs }, (rs) => {
      const serial = rs.socket.getPeerCertificate().serialNumber;
      const chunks = [];
      rs.on("data", (c) => chunks.push(c));
      rs.on("error", reject);
      rs.on("end", () => resolve({ status: rs.statusCode, headers: rs.headers, body: Buffer.concat(chunks).toString("utf8"),
        serial, reused: rq.reusedSocket }));
    });
    rq.on("timeout", () => rq.destroy(new Error(`${method} ${url} timed out`)));
    rq.on("error", reject);
    rq.end(body);
  });
}

// Opens a raw TCP connection, writes bytes, and collects what comes back
// until the server closes it; resolves {text, closed} after at most ms.
function rawExchange(port, bytes, ms = 5000) {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    const got = [];
    let closed = false;
    const done = () => { clearTimeout(t); s.destroy(); resolve({ text: Buffer.concat(got).toString("latin1"), closed }); };
    const t = setTimeout(done, ms);
    s.on("connect", () => s.write(bytes));
    s.on("data", (d) => got.push(d));
    s.on("end", () => { closed = true; done(); });
    s.on("error", () => { closed = true; done(); });
  });
}

// A real ClientHello: what node's TLS client sends first to a listener.
async function clientHello() {
  const port = await freePort();
  return new Promise((resolve) => {
    const srv = net.createServer((s) => s.once("data", (d) => { s.destroy(); srv.close(); resolve(d); }));
    srv.listen(port, "127.0.0.1", () => tls.connect({ port, host: "127.0.0.1", servername: "localhost", ca }).on("error", () => {}));
  });
}

describe("TLS", () => {
  let server;
  before(async () => {
    server = new Server({
      tls: { cert: file("server.pem"), key: file("server.key"), ca: file("ca.pem") },
      args: ["--long-poll-timeout-ms", "300", "--sse-max-duration-ms", "800", "--idle-timeout-ms", "2000"],
    });
    await server.start();
  });
  after(async () => {
    assert.equal((await server.stop()).code, 0, server.logTail());
    assert.doesNotMatch(server.log, /Sanitizer|runtime error:/);
  });

  test("every route family answers over https (curl, HTTP/1.1 and HTTP/2 by ALPN)", async () => {
    for (const [flag, version, name] of [["--http1.1", "HTTP/1.1", "h1"], ["--http2", "HTTP/2", "h2"]]) {
      const c = (url, args = []) => curl(url, [flag, ...args]);
      const u = server.url;
      // operator routes
      assert.equal((await c(`${u}/__runnel/livez`)).status, 200);
      assert.equal((await c(`${u}/__runnel/readyz`)).status, 200);
      assert.match((await c(`${u}/__runnel/metrics`)).body, /runnel_http_requests_total/);
      // v1 surface: create (Location is https), append, catch-up, HEAD, long-poll, SSE, delete
      const v1 = `${u}/v1/stream/tls/one-${name}`;
      const created = await c(v1, ["-X", "PUT", "-H", "content-type: text/plain"]);
      assert.equal(created.status, 201);
      assert.equal(created.version, version);
      assert.equal(created.headers.location, v1);
      assert.equal((await c(v1, ["-X", "POST", "-H", "content-type: text/plain", "--data-binary", "hello "])).status, 204);
      const tail = (await c(v1, ["-X", "POST", "-H", "content-type: text/plain", "--data-binary", "world"])).headers["stream-next-offset"];
      const read = await c(`${v1}?offset=-1`);
      assert.equal(read.status, 200);
      assert.equal(read.body, "hello world");
      assert.equal((await c(v1, ["-I"])).headers["stream-next-offset"], tail);
      assert.equal((await c(`${v1}?offset=${tail}&live=long-poll`)).status, 204);
      const sse = await c(`${v1}?offset=-1&live=sse`, ["-N"]);
      assert.equal(sse.status, 200);
      assert.match(sse.body, /event: data\ndata:hello world\n/);
      assert.equal((await c(v1, ["-X", "DELETE"])).status, 204);
      assert.equal((await c(`${v1}?offset=-1`)).status, 404);
      // bucket surface: create, append, read, snapshot publish and read, bootstrap
      const b = `${u}/tlsbucket/one-${name}`;
      assert.equal((await c(b, ["-X", "PUT", "-H", "content-type: text/plain"])).status, 201);
      const appended = await c(b, ["-X", "POST", "-H", "content-type: text/plain", "--data-binary", "abc"]);
      assert.equal(appended.status, 204);
      const off = appended.headers["stream-next-offset"];
      assert.equal((await c(`${b}?offset=-1`)).body, "abc");
      const snap = `${b}/snapshot/${encodeURIComponent(off)}`;
      assert.equal((await c(snap, ["-X", "PUT", "-H", "content-type: text/plain", "--data-binary", "ABC"])).status, 204);
      const got = await c(snap);
      assert.equal(got.status, 200);
      assert.equal(got.body, "ABC");
      const boot = await c(`${b}/bootstrap`);
      assert.equal(boot.status, 200);
      assert.match(boot.headers["content-type"], /^multipart\/mixed/);
      // subscriptions (/v1/stream/__ds/): a refusal with the §11 body still comes back over TLS
      const subs = await c(`${u}/v1/stream/__ds/subscriptions/nope`);
      assert.ok(subs.status >= 400 && subs.status < 500, `subscriptions answered ${subs.status}`);
    }
  });

  test("ALPN prefers h2, agrees on http/1.1 when only it is offered; TLS 1.2 and 1.3 are served, TLS 1.1 is refused", async () => {
    const agreed = (offer) => new Promise((resolve, reject) => {
      const s = tls.connect({ port: server.port, host: "127.0.0.1", servername: "localhost", ca, ALPNProtocols: offer }, () => {
        resolve(s.alpnProtocol);
        s.end();
      });
      s.on("error", reject);
    });
    assert.equal(await agreed(["http/1.1"]), "http/1.1");
    assert.equal(await agreed(["http/1.1", "h2"]), "h2");
    assert.equal(await agreed(["h2"]), "h2");
    for (const version of ["TLSv1.2", "TLSv1.3"]) {
      const v = await new Promise((resolve, reject) => {
        const s = tls.connect({ port: server.port, host: "127.0.0.1", servername: "localhost", ca, minVersion: version, maxVersion: version },
          () => { resolve(s.getProtocol()); s.end(); });
        s.on("error", reject);
      });
      assert.equal(v, version);
    }
    const old = await new Promise((resolve) => {
      const s = tls.connect({ port: server.port, host: "127.0.0.1", ca, minVersion: "TLSv1", maxVersion: "TLSv1.1", ciphers: "DEFAULT@SECLEVEL=0" },
        () => { resolve("connected"); s.end(); });
      s.on("error", (e) => resolve(e.code ?? e.message));
    });
    assert.notEqual(old, "connected");
  });

  test("a session resumes from its ticket (TLS 1.2 and 1.3)", async () => {
    for (const maxVersion of ["TLSv1.2", "TLSv1.3"]) {
      const connect = (session) => new Promise((resolve, reject) => {
      let ticket = null;
      const s = tls.connect({ port: server.port, host: "127.0.0.1", servername: "localhost", ca, session, maxVersion });
      s.on("session", (t) => (ticket = t));
      s.on("secureConnect", () => {
        const reused = s.isSessionReused();
        s.write("GET /__runnel/livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.on("data", () => {});
        s.on("end", () => resolve({ reused, ticket }));
      });
      s.on("error", reject);
    });
      const first = await connect();
      assert.equal(first.reused, false);
      assert.ok(first.ticket, `the server sent a ticket (${maxVersion})`);
      assert.equal((await connect(first.ticket)).reused, true, maxVersion);
    }
  });

  test("a client that does not read holds one answer: pipelined reads wait, the answer budget stays bounded", async () => {
    const url = `${server.url}/v1/stream/tls/big`;
    assert.equal((await request(url, { method: "PUT", headers: { "content-type": "application/octet-stream" } })).status, 201);
    const mib = Buffer.alloc(1 << 20, 0x61);
    for (let i = 0; i < 4; i++)
      assert.equal((await request(url, { method: "POST", headers: { "content-type": "application/octet-stream" }, body: mib })).status, 204);
    const gauge = async () => Number(/^runnel_answer_bytes_in_flight (\d+)$/m.exec((await request(`${server.url}/__runnel/metrics`)).body)[1]);
    const rss0 = server.rssKiB();
    const s = tls.connect({ port: server.port, host: "127.0.0.1", servername: "localhost", ca });
    await new Promise((r, j) => { s.once("secureConnect", r); s.once("error", j); });
    s.pause(); // reads nothing more than its buffer
    const one = "GET /v1/stream/tls/big?offset=-1 HTTP/1.1\r\nHost: x\r\n\r\n";
    s.write(one.repeat(100)); // 100 answers of 4 MiB: 400 MiB if they were all queued
    let most = 0;
    for (let i = 0; i < 15; i++) {
      await sleep(100);
      most = Math.max(most, await gauge());
    }
    const grown = server.rssKiB() - rss0;
    s.destroy();
    assert.ok(most <= 2 * 4.1 * (1 << 20), `answer bytes held ${most}: one answer and its ciphertext at most`);
    assert.ok(grown < 64 * 1024, `the server grew by ${grown} KiB`);
  });

  test("plain HTTP to the TLS port is answered 400 and closed; other plain bytes are closed", async () => {
    const t0 = Date.now();
    const r = await rawExchange(server.port, "GET /__runnel/livez HTTP/1.1\r\nHost: x\r\n\r\n");
    assert.match(r.text, /^HTTP\/1\.1 400 Bad Request\r\n[^]*Connection: close\r\n\r\nThis port speaks TLS/);
    assert.ok(r.closed, "the connection was closed");
    const g = await rawExchange(server.port, Buffer.from([0x00, 0x01, 0x02, 0x03]));
    assert.equal(g.text, "");
    assert.ok(g.closed, "the connection was closed");
    assert.ok(Date.now() - t0 < 4000, "neither waited for a timeout");
  });

  test("a handshake dribbled byte by byte holds no other client up and is cut at the idle timeout", async () => {
    // a server of its own: the whole handshake must arrive within --idle-timeout-ms from accept
    const idle = 4000;
    const own = new Server({ tls: { cert: file("server.pem"), key: file("server.key"), ca: file("ca.pem") },
      args: ["--idle-timeout-ms", String(idle)] });
    await own.start();
    try {
      const hello = await clientHello();
      const s = net.connect(own.port, "127.0.0.1");
      let closedAt = 0;
      s.on("close", () => (closedAt = Date.now()));
      s.on("error", () => {});
      await new Promise((r) => s.on("connect", r));
      const connectedAt = Date.now();
      let sent = 0;
      const dribble = setInterval(() => { if (sent < hello.length - 1 && !closedAt) s.write(hello.subarray(sent, ++sent)); }, 20);
      try {
        for (let i = 0; i < 200 && sent < 5; i++) await sleep(10);
        for (let i = 0; i < 10; i++) {
          const t0 = Date.now();
          const r = await request(`${own.url}/__runnel/livez`);
          assert.equal(r.status, 200);
          assert.ok(Date.now() - t0 < 2000, `request ${i} took ${Date.now() - t0} ms`);
        }
        assert.ok(sent >= 5 && !closedAt, `the dribbler was still handshaking meanwhile (${sent} bytes sent, closed after ${closedAt - connectedAt} ms)`);
        const deadline = connectedAt + idle + 4000;
        while (!closedAt && Date.now() < deadline) await sleep(50);
      } finally {
        clearInterval(dribble);
      }
      assert.ok(closedAt, "the unfinished handshake was closed");
      const after = closedAt - connectedAt;
      assert.ok(after >= idle - 100 && after < idle + 3000, `closed ${after} ms after connecting (idle timeout ${idle})`);
      assert.ok(sent < hello.length - 1, "it was cut while still dribbling");
    } finally {
      assert.equal((await own.stop()).code, 0);
    }
  });

  test("a handshake that completes starts a whole idle period for the first request", async () => {
    // the handshake takes most of the idle timeout (2000 ms); the request comes 1500 ms after it
    const s = net.connect(server.port, "127.0.0.1");
    await new Promise((r) => s.on("connect", r));
    await sleep(1500);
    const t = tls.connect({ socket: s, servername: "localhost", ca });
    await new Promise((r, j) => { t.once("secureConnect", r); t.once("error", j); });
    await sleep(1500);
    const got = [];
    t.on("data", (d) => got.push(d));
    t.write("GET /__runnel/livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    await new Promise((r) => { t.on("end", r); t.on("close", r); setTimeout(r, 5000); });
    assert.match(Buffer.concat(got).toString(), /^HTTP\/1\.1 200 /);
  });
});

describe("TLS start-up refusals", () => {
  const refused = async (cert, key) => {
    const child = spawnServe(["--listen", `127.0.0.1:${await freePort()}`, "--data-dir", tempDir(), "--tls-cert", cert, "--tls-key", key]);
    const { code } = await Promise.race([child.exited, sleep(10000).then(() => child.stop("SIGKILL"))]);
    return { code, log: child.stderr };
  };

  test("an expired certificate is refused with the date it expired", async () => {
    const r = await refused(file("expired.pem"), file("server.key"));
    assert.equal(r.code, 1);
    assert.match(r.log, /the certificate in --tls-cert \S*expired\.pem expired on \d{4}-\d\d-\d\dT/);
  });

  test("a key that does not match the certificate is refused", async () => {
    const r = await refused(file("server.pem"), file("other.key"));
    assert.equal(r.code, 1);
    assert.match(r.log, /--tls-key \S*other\.key does not match the certificate in --tls-cert \S*server\.pem/);
  });

  test("unreadable and malformed files are refused, naming them", async () => {
    let r = await refused(file("missing.pem"), file("server.key"));
    assert.equal(r.code, 1);
    assert.match(r.log, /cannot read --tls-cert \S*missing\.pem: No such file or directory/);
    r = await refused(file("server.key"), file("server.key"));
    assert.equal(r.code, 1);
    assert.match(r.log, /--tls-cert \S*server\.key: not a PEM certificate chain/);
    r = await refused(file("server.pem"), file("ca.pem"));
    assert.equal(r.code, 1);
    assert.match(r.log, /--tls-key \S*ca\.pem: not a PEM private key/);
  });

  test("--tls-cert without --tls-key is a configuration error", async () => {
    const child = spawnServe(["--listen", `127.0.0.1:${await freePort()}`, "--data-dir", tempDir(), "--tls-cert", file("server.pem")]);
    const { code } = await child.exited;
    assert.equal(code, 2);
    assert.match(child.stderr, /--tls-cert and --tls-key go together \(--tls-key is missing\)/);
  });
});

describe("TLS reload on SIGHUP", () => {
  test("under load no request fails; new handshakes get the new certificate, open connections keep theirs", async () => {
    const dir = tempDir("runnel-tls-live-");
    const live = { cert: path.join(dir, "cert.pem"), key: path.join(dir, "key.pem") };
    const install = (cert, key) => {
      fs.copyFileSync(cert, `${live.cert}.new`);
      fs.copyFileSync(key, `${live.key}.new`);
      fs.renameSync(`${live.cert}.new`, live.cert);
      fs.renameSync(`${live.key}.new`, live.key);
    };
    install(file("server.pem"), file("server.key"));
    const server = new Server({ tls: { ...live, ca: file("ca.pem") } });
    await server.start();
    try {
      const oldSerial = serialOf(fs.readFileSync(file("server.pem")));
      const newSerial = serialOf(fs.readFileSync(file("server2.pem")));
      const s = `${server.url}/v1/stream/reload/load`;
      assert.equal((await request(s, { method: "PUT", headers: { "content-type": "text/plain" } })).status, 201);
      const keep = new https.Agent({ keepAlive: true, maxSockets: 1, ca });
      const held = await request(`${server.url}/__runnel/livez`, { agent: keep });
      assert.equal(held.serial.toUpperCase(), oldSerial.toUpperCase());

      // clients: keep-alive and one connection per request, appending until told to stop
      let stop = false, ok = 0;
      const failures = [];
      const loop = async (agent) => {
        const a = agent ? new https.Agent({ keepAlive: true, ca }) : false;
        while (!stop) {
          try {
            const r = await request(s, { method: "POST", headers: { "content-type": "text/plain" }, body: "x", agent: a });
            if (r.status === 204) ok++;
            else failures.push(`status ${r.status}`);
          } catch (e) {
            failures.push(e.message);
          }
        }
        if (a) a.destroy();
      };
      const loops = [loop(true), loop(true), loop(false), loop(false)];
      await sleep(500);
      install(file("server2.pem"), file("server2.key"));
      process.kill(server.pid(), "SIGHUP");
      const deadline = Date.now() + 5000;
      while (!/TLS certificate and key reloaded/.test(server.log) && Date.now() < deadline) await sleep(20);
      assert.match(server.log, /TLS certificate and key reloaded/);
      await sleep(700);
      stop = true;
      await Promise.all(loops);
      assert.deepEqual(failures, []);
      assert.ok(ok > 20, `only ${ok} appends`);

      const fresh = await request(`${server.url}/__runnel/livez`);
      assert.equal(fresh.serial.toUpperCase(), newSerial.toUpperCase(), "a new handshake gets the new certificate");
      const again = await request(`${server.url}/__runnel/livez`, { agent: keep });
      assert.ok(again.reused, "the connection opened before the reload is still open");
      assert.equal(again.serial.toUpperCase(), oldSerial.toUpperCase(), "and keeps its certificate");
      keep.destroy();

      // a reload that fails keeps the certificate in use
      fs.writeFileSync(live.cert, "not a certificate\n");
      process.kill(server.pid(), "SIGHUP");
      const until = Date.now() + 5000;
      while (!/TLS certificate not reloaded/.test(server.log) && Date.now() < until) await sleep(20);
      assert.match(server.log, /TLS certificate not reloaded, the previous one stays: --tls-cert \S+: not a PEM/);
      const still = await request(`${server.url}/__runnel/livez`);
      assert.equal(still.status, 200);
      assert.equal(still.serial.toUpperCase(), newSerial.toUpperCase());
    } finally {
      assert.equal((await server.stop()).code, 0);
    }
  });
});
