// The runnel command's client subcommands, end to end: data piped through
// `runnel append` (plain and --producer) comes back byte for byte from
// `runnel read` and `runnel tail -f`; a producer killed with SIGKILL
// mid-stream and run again on the same input leaves every line once, in
// order; exit codes tell applied, refused, unknown, usage, unreachable and
// a changed stream apart; --json prints what scripts parse; a tail below the
// retained offset says how to go on (bootstrap); over https with a private
// CA named by --cacert or RUNNEL_CACERT.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { BIN, Server, sleep, tempDir } from "../lib/server.mjs";
import { makePki } from "../lib/tls.mjs";

const server = new Server({ args: ["--test-hooks"] });
let work;
before(async () => {
  await server.start();
  work = tempDir("runnel-cli-");
});
after(() => server.stop());

const env = () => ({ ...process.env, RUNNEL_URL: server.url, XDG_STATE_HOME: path.join(work, "state") });

// Runs `runnel args...` to the end (30 s at most).
function run(args, { input, timeout = 30000 } = {}) {
  const r = spawnSync(BIN, args, { input, env: env(), timeout, maxBuffer: 256 << 20 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr.toString() };
}

function ok(args, opts) {
  const r = run(args, opts);
  assert.equal(r.code, 0, `runnel ${args.join(" ")} exited ${r.code}: ${r.stderr}`);
  return r;
}

// n lines of about 100 bytes, numbered.
function lines(n, from = 0) {
  let s = "";
  for (let i = from; i < from + n; i++) s += `line ${String(i).padStart(8, "0")} ${"x".repeat(84)}\n`;
  return Buffer.from(s);
}

let n = 0;
const name = (p) => `cli/${p}${++n}`;

describe("runnel append and read", () => {
  test("a producer's stdin lines come back byte for byte", () => {
    const s = name("text");
    ok(["create", s, "--type", "text/plain"]);
    const input = lines(5000);
    const r = ok(["append", s, "--producer", "p1", "--json"], { input });
    const summary = JSON.parse(r.stdout.toString());
    assert.equal(summary.outcome, "applied");
    assert.equal(summary.bytes, input.length);
    assert.ok(fs.existsSync(summary.state), "the state file is under XDG_STATE_HOME");
    assert.deepEqual(ok(["read", s]).stdout, input);
  });

  test("JSON lines stay one message each, read as NDJSON on the bucket surface", () => {
    const s = "clib/json";
    ok(["--bucket", "create", s, "--type", "application/json"]);
    const input = '{"a":1}\n[1,2]\n\n  {"b": "two"}\n"s"\n';
    ok(["--bucket", "append", s, "--producer", "j"], { input });
    assert.equal(ok(["--bucket", "read", s]).stdout.toString(), '{"a":1}\n[1,2]\n{"b":"two"}\n"s"\n');
    const bad = run(["--bucket", "append", s], { input: '{"ok":1}\nnot json\n' });
    assert.equal(bad.code, 5, bad.stderr);
    assert.match(bad.stderr, /line 2 is not JSON/);
  });

  test("plain appends: a body, a file, stdin", () => {
    const s = name("plain");
    ok(["create", s, "--type", "application/octet-stream", "start:"]);
    ok(["append", s, "body;"]);
    const file = path.join(work, "blob.bin");
    const blob = Buffer.from(Array.from({ length: 70000 }, (_, i) => (i * 31) & 255));
    fs.writeFileSync(file, blob);
    ok(["append", s, "--file", file]);
    ok(["append", s, "-"], { input: blob });
    assert.deepEqual(ok(["read", s]).stdout, Buffer.concat([Buffer.from("start:body;"), blob, blob]));
  });
});

describe("runnel tail", () => {
  for (const mode of [[], ["--long-poll"]]) {
    test(`tail -f ${mode.join(" ") || "(SSE)"} delivers what append pipes in, and ends at the close`, async () => {
      const s = name("tail");
      ok(["create", s, "--type", "text/plain"]);
      const tail = spawn(BIN, ["tail", "-f", s, "-q", ...mode], { env: env() });
      const chunks = [];
      tail.stdout.on("data", (d) => chunks.push(d));
      const exited = new Promise((r) => tail.on("exit", (code) => r(code)));
      const input = lines(20000);
      ok(["append", s, "--producer", "t"], { input });
      ok(["close", s]);
      const code = await Promise.race([exited, sleep(30000).then(() => "timeout")]);
      assert.equal(code, 0);
      assert.deepEqual(Buffer.concat(chunks), input);
    });
  }

  test("tail stops with exit code 6 when the stream is deleted", async () => {
    const s = name("gone");
    ok(["create", s, "--type", "text/plain", "x"]);
    const tail = spawn(BIN, ["tail", "-f", s], { env: env() });
    let err = "";
    tail.stderr.on("data", (d) => (err += d));
    await sleep(500);
    ok(["rm", s]);
    const code = await Promise.race([new Promise((r) => tail.on("exit", r)), sleep(20000).then(() => "timeout")]);
    assert.equal(code, 6, err);
    assert.match(err, /gone/);
  });
});

describe("a producer killed mid-stream", () => {
  test("resumes from its state file: every line once, in order", async () => {
    const s = name("kill");
    ok(["create", s, "--type", "text/plain"]);
    const input = lines(60000);
    const file = path.join(work, "input.txt");
    fs.writeFileSync(file, input);
    const state = path.join(work, "kill.state");
    const args = ["append", s, "--producer", "k", "--state", state, "--batch-bytes", "8192", "--file", file, "-q"];
    // each run is killed once the stream holds another eighth of the input,
    // so every kill lands mid-stream however fast the machine is (a run that
    // finished would make the next one a new input, by design)
    const held = async () => {
      const r = await fetch(`${server.url}/v1/stream/${s}`, { method: "HEAD" });
      return Number(r.headers.get("stream-next-offset")?.split("_")[1] ?? 0);
    };
    for (let round = 0; round < 4; round++) {
      const p = spawn(BIN, args, { env: env() });
      const exited = new Promise((r) => p.on("exit", (code, signal) => r({ code, signal })));
      const target = ((round + 1) * input.length) / 8;
      for (let i = 0; i < 4000 && p.exitCode === null && (await held()) < target; i++) await sleep(5);
      p.kill("SIGKILL");
      const e = await exited;
      assert.equal(e.signal, "SIGKILL", `run ${round} was killed mid-stream (it ended with ${e.code})`);
    }
    const partial = ok(["read", s]).stdout;
    assert.ok(input.subarray(0, partial.length).equals(partial), "what holds is a prefix of the input");
    const r = ok(args.filter((a) => a !== "-q").concat(["--json"]));
    assert.equal(JSON.parse(r.stdout.toString()).outcome, "applied");
    const got = ok(["read", s]).stdout;
    assert.equal(got.length, input.length, "no line twice, none missing");
    assert.deepEqual(got, input);
  });

  test("a finished input makes the next run a new one; an interrupted one needs the same input", async () => {
    const s = name("other");
    ok(["create", s, "--type", "text/plain"]);
    const state = path.join(work, "other.state");
    ok(["append", s, "--producer", "o", "--state", state], { input: lines(10) });
    ok(["append", s, "--producer", "o", "--state", state], { input: lines(3, 10) });
    assert.deepEqual(ok(["read", s]).stdout, lines(13), "a second input after a finished one");
    // a run whose writes stay unknown (every log sync fails) stops with exit 3
    const hook = await fetch(`${server.url}/__runnel/test/fail-syncs?n=1000`, { method: "POST" });
    assert.equal(hook.status, 204);
    const stuck = run(["append", s, "--producer", "o", "--state", state, "--retry-for-ms", "300"], { input: lines(5, 13) });
    assert.equal(stuck.code, 3, stuck.stderr);
    assert.match(stuck.stderr, /run the same command on the same input to resume/);
    await fetch(`${server.url}/__runnel/test/fail-syncs?n=0`, { method: "POST" });
    const other = run(["append", s, "--producer", "o", "--state", state], { input: lines(5, 100) });
    assert.equal(other.code, 5, other.stderr);
    assert.match(other.stderr, /differs from the one the (state file|producer state) recorded/);
    ok(["append", s, "--producer", "o", "--state", state], { input: lines(5, 13) });
    assert.deepEqual(ok(["read", s]).stdout, lines(18), "the interrupted input, once");
  });
});

describe("exit codes and --json", () => {
  test("usage 2, refused 1, unknown 3, unreachable 4", async () => {
    assert.equal(run(["append"]).code, 2);
    assert.equal(run(["nosuch"]).code, 2);
    assert.equal(run(["read", "x", "--max-bytes", "ten"]).code, 2);
    const missing = run(["append", "cli/none", "data", "--type", "text/plain"]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /404 STREAM_NOT_FOUND/);
    const s = name("codes");
    ok(["create", s, "--type", "text/plain"]);
    const hook = await fetch(`${server.url}/__runnel/test/fail-syncs?n=1`, { method: "POST" });
    assert.equal(hook.status, 204);
    const unknown = run(["append", s, "maybe", "--json"]);
    assert.equal(unknown.code, 3, unknown.stderr);
    assert.equal(JSON.parse(unknown.stdout.toString()).outcome, "unknown");
    assert.match(unknown.stderr, /outcome unknown/);
    const dead = spawnSync(BIN, ["read", s, "--url", "http://127.0.0.1:1"], { env: env() });
    assert.equal(dead.status, 4);
  });

  test("head --json and create --json", () => {
    const s = name("json");
    const c = JSON.parse(ok(["create", s, "--type", "text/plain", "--json"]).stdout.toString());
    assert.equal(c.status, 201);
    assert.equal(c.outcome, "applied");
    const h = JSON.parse(ok(["head", s, "--json"]).stdout.toString());
    assert.equal(h.incarnation, c.incarnation);
    assert.equal(h.content_type, "text/plain");
    assert.match(ok(["head", s]).stdout.toString(), /^content-type\s+text\/plain$/m);
  });

  test("publish and bootstrap", () => {
    const s = "clib/snap";
    ok(["--bucket", "create", s, "--type", "application/json", '[{"n":1},{"n":2}]']);
    const p = JSON.parse(ok(["--bucket", "publish", s, '{"sum":3}', "--type", "application/x-sum", "--json"]).stdout.toString());
    assert.equal(p.outcome, "applied");
    ok(["--bucket", "append", s, '{"n":3}']);
    const out = path.join(work, "boot");
    const b = JSON.parse(ok(["--bucket", "bootstrap", s, "--out", out, "--json"]).stdout.toString());
    assert.equal(b.parts.length, 2);
    assert.equal(b.parts[0].content_type, "application/x-sum");
    assert.equal(fs.readFileSync(path.join(out, "0000.snapshot"), "utf8"), '{"sum":3}');
    assert.equal(fs.readFileSync(path.join(out, "0001.update"), "utf8"), '{"n":3}');
    const big = path.join(work, "big.snap");
    fs.writeFileSync(big, Buffer.alloc(3 << 20, 7));
    const parts = JSON.parse(ok(["--bucket", "publish", s, "--file", big, "--parts", "--part-bytes", "1048576", "--json"]).stdout.toString());
    assert.equal(parts.outcome, "applied");
  });
});

describe("a tail below the retained offset (extensions §3)", () => {
  test("exit 1 and the commands that go on: bootstrap, then tail from its next offset", async () => {
    const s = "clib/retained";
    ok(["--bucket", "create", s, "--type", "text/plain", "abcdef"]);
    const tail = (await fetch(`${server.url}/${s}`, { method: "HEAD" })).headers.get("stream-next-offset");
    ok(["--bucket", "publish", s, "state", "--type", "text/plain"]);
    const r = await fetch(`${server.url}/${s}/retention/${encodeURIComponent(tail)}`, { method: "PUT" });
    assert.equal(r.status, 204);
    const t = run(["--bucket", "tail", s, "--offset", "0000000000000000_0000000000000000"]);
    assert.equal(t.code, 1, t.stderr);
    assert.match(t.stderr, new RegExp(`retained offset ${tail}`));
    assert.match(t.stderr, /runnel --bucket bootstrap clib\/retained/);
    ok(["--bucket", "bootstrap", s, "--out", path.join(work, "boot")]);
  });
});

describe("https with a private CA: --cacert and RUNNEL_CACERT", () => {
  let pki;
  let tls;
  before(async () => {
    pki = makePki();
    tls = new Server({ tls: { cert: pki.file("server.pem"), key: pki.file("server.key"), ca: pki.file("ca.pem") } });
    await tls.start();
  });
  after(() => tls.stop());

  test("without the CA the certificate is refused: no answer, exit 4", () => {
    const r = run(["--url", tls.url, "read", "tls/none"]);
    assert.equal(r.code, 4, r.stderr);
    assert.match(r.stderr, /certificate|SSL/i);
  });

  test("--cacert FILE (before or after the command) and RUNNEL_CACERT trust it", () => {
    const s = "tls/s";
    ok(["--url", tls.url, "--cacert", pki.file("ca.pem"), "create", s, "--type", "text/plain"]);
    ok(["--url", tls.url, "append", s, "over TLS", `--cacert=${pki.file("ca.pem")}`]);
    assert.equal(ok(["--url", tls.url, "read", s, "--cacert", pki.file("ca.pem")]).stdout.toString(), "over TLS");
    const r = spawnSync(BIN, ["--url", tls.url, "read", s], { env: { ...env(), RUNNEL_CACERT: pki.file("ca.pem") } });
    assert.equal(r.status, 0, r.stderr.toString());
    assert.equal(r.stdout.toString(), "over TLS");
  });

  test("a CA file that cannot be read is a usage error (exit 2) naming it", () => {
    const r = run(["--url", tls.url, "--cacert", path.join(work, "missing.pem"), "read", "tls/s"]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /missing\.pem/);
  });
});
