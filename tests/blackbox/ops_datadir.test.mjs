// The data directory's own files (docs/ARCHITECTURE.md "Data directory
// layout"): LOCK keeps a second server out; FORMAT names the on-disk format,
// is written at the first start and refuses a build of another format or a
// damaged marker without touching the data; a directory written before the
// marker existed starts with its data intact and gains it; format 1 (the log
// before batch headers and wal/HEAD) is taken over when a clean stop left
// its log empty and refused, unchanged, when its log holds records;
// cluster-id is kept across restarts and a damaged one refuses to start. The directory is
// created with every missing parent; one holding files runnel never writes
// is refused (naming them) and left untouched; an empty one, one with only
// lost+found, and one runnel wrote with every kind of file are accepted.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { Server, readAll, tempDir } from "./lib/server.mjs";
import { runCli } from "./lib/ops.mjs";
import { stagePart } from "./lib/snap.mjs";

const FORMAT_LINE = "runnel data format 3\n";

// Runs `runnel serve` on dir expecting a refusal: exit code 1, one error line
// naming every fragment. Returns stderr.
function assertRefusesToStart(dir, ...fragments) {
  const r = runCli(["serve", "--listen", "127.0.0.1:1", "--data-dir", dir]);
  assert.equal(r.code, 1, `exit code 1 (got ${r.code}); stderr: ${r.stderr}`);
  for (const f of fragments) assert.ok(r.stderr.includes(f), `the message names ${JSON.stringify(f)}: ${r.stderr}`);
  return r.stderr;
}

// The names and contents of every file under dir, for "nothing changed".
function snapshotTree(dir) {
  const out = {};
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out[path.relative(dir, p)] = fs.readFileSync(p).toString("base64");
    }
  };
  walk(dir);
  return out;
}

// A data directory with one stream of known bytes, stopped cleanly.
async function dirWithData() {
  const srv = new Server();
  await srv.start();
  const url = srv.stream("datadir/s");
  assert.equal((await fetch(url, { method: "PUT", headers: { "content-type": "text/plain" } })).status, 201);
  const post = await fetch(url, { method: "POST", headers: { "content-type": "text/plain" }, body: "kept bytes" });
  assert.equal(post.status, 204);
  await srv.stop();
  return { srv, url };
}

describe("FORMAT", () => {
  test("a new data directory gets FORMAT naming this build's format", async () => {
    const srv = new Server();
    await srv.start();
    assert.equal(fs.readFileSync(path.join(srv.dataDir, "FORMAT"), "utf8"), FORMAT_LINE);
    assert.ok(!fs.existsSync(path.join(srv.dataDir, "FORMAT.tmp")), "no temporary file is left");
    await srv.stop();
  });

  test("another format: refuses to start, names both formats, changes nothing", async () => {
    const { srv } = await dirWithData();
    fs.writeFileSync(path.join(srv.dataDir, "FORMAT"), "runnel data format 7\n");
    const before = snapshotTree(srv.dataDir);
    assertRefusesToStart(srv.dataDir, "format 7", "format 3", "refusing to start");
    assert.deepEqual(snapshotTree(srv.dataDir), before);
  });

  for (const [what, text] of [
    ["an empty marker", ""],
    ["a marker of something else", "sqlite format 3\n"],
    ["trailing garbage", "runnel data format 3x\n"],
    ["a signed number", "runnel data format +3\n"],
    ["a leading zero", "runnel data format 03\n"],
    ["words run together", "runneldataformat1\n"],
  ]) {
    test(`${what}: refuses to start as damaged, changes nothing`, async () => {
      const { srv } = await dirWithData();
      fs.writeFileSync(path.join(srv.dataDir, "FORMAT"), text);
      const before = snapshotTree(srv.dataDir);
      assertRefusesToStart(srv.dataDir, "FORMAT is damaged", "refusing to start");
      assert.deepEqual(snapshotTree(srv.dataDir), before);
    });
  }

  test("a directory written before the marker existed starts with its data and gains FORMAT", async () => {
    const { srv, url } = await dirWithData();
    fs.rmSync(path.join(srv.dataDir, "FORMAT"));
    await srv.start();
    assert.equal((await readAll(url)).body.toString(), "kept bytes");
    assert.equal(fs.readFileSync(path.join(srv.dataDir, "FORMAT"), "utf8"), FORMAT_LINE);
    await srv.stop();
  });
});

describe("format 2", () => {
  // Format 3 only added a log record (a large append written once): a
  // format-2 directory is taken over as it is, log records included.
  test("with records in its log: taken over as format 3, every record replayed", async () => {
    const srv = new Server();
    await srv.start();
    const url = srv.stream("datadir/f2");
    assert.equal((await fetch(url, { method: "PUT", headers: { "content-type": "text/plain" }, body: "logged " })).status, 201);
    assert.equal((await fetch(url, { method: "POST", headers: { "content-type": "text/plain" }, body: "twice" })).status, 204);
    await srv.stop("SIGKILL"); // both stay in the log
    fs.writeFileSync(path.join(srv.dataDir, "FORMAT"), "runnel data format 2\n");
    await srv.start();
    assert.equal((await readAll(url)).body.toString(), "logged twice");
    assert.equal(fs.readFileSync(path.join(srv.dataDir, "FORMAT"), "utf8"), FORMAT_LINE);
    await srv.stop();
  });
});

describe("format 1", () => {
  // A format-1 directory as the previous build leaves it: FORMAT says 1 and
  // the log has no wal/HEAD (format 1 had none).
  const asFormat1 = (dir) => {
    fs.writeFileSync(path.join(dir, "FORMAT"), "runnel data format 1\n");
    fs.rmSync(path.join(dir, "wal", "HEAD"));
  };

  test("stopped cleanly (an empty log): taken over as format 3, data intact", async () => {
    const { srv, url } = await dirWithData();
    asFormat1(srv.dataDir);
    await srv.start();
    assert.equal((await readAll(url)).body.toString(), "kept bytes");
    assert.equal(fs.readFileSync(path.join(srv.dataDir, "FORMAT"), "utf8"), FORMAT_LINE);
    assert.ok(fs.existsSync(path.join(srv.dataDir, "wal", "HEAD")), "the log gained its head");
    await srv.restart();
    assert.equal((await readAll(url)).body.toString(), "kept bytes");
    await srv.stop();
  });

  test("with records in its log: refuses to start, says how to go on, changes nothing", async () => {
    const srv = new Server();
    await srv.start();
    const url = srv.stream("datadir/f1");
    assert.equal((await fetch(url, { method: "PUT", headers: { "content-type": "text/plain" }, body: "logged" })).status, 201);
    await srv.stop("SIGKILL"); // the create stays in the log
    asFormat1(srv.dataDir);
    const before = snapshotTree(srv.dataDir);
    assertRefusesToStart(srv.dataDir, "format 1", "records in its log", "stop the directory cleanly");
    assert.deepEqual(snapshotTree(srv.dataDir), before);
  });
});

describe("LOCK and cluster-id", () => {
  test("a second server on the same directory refuses to start; the first keeps serving", async () => {
    const srv = new Server();
    await srv.start();
    assertRefusesToStart(srv.dataDir, "in use by another runnel process");
    assert.equal((await fetch(`${srv.url}/__runnel/readyz`)).status, 200);
    await srv.stop();
  });

  test("the generated cluster id is kept across restarts", async () => {
    const srv = new Server();
    await srv.start();
    const id = fs.readFileSync(path.join(srv.dataDir, "cluster-id"), "utf8");
    assert.match(id, /^runnel-[0-9a-f]{16}$/);
    await srv.restart();
    assert.equal(fs.readFileSync(path.join(srv.dataDir, "cluster-id"), "utf8"), id);
    await srv.stop();
  });

  test("a damaged cluster-id refuses to start", () => {
    const dir = tempDir();
    fs.writeFileSync(path.join(dir, "cluster-id"), "not a valid id!\n");
    assertRefusesToStart(dir, "cluster-id is damaged");
  });
});

describe("creating the data directory", () => {
  test("--data-dir a/b/c creates every missing component (like mkdir -p) and serves", async () => {
    const root = tempDir();
    const dir = path.join(root, "a", "b", "c");
    const srv = new Server({ dataDir: dir });
    await srv.start();
    assert.ok(fs.statSync(dir).isDirectory());
    assert.equal(fs.readFileSync(path.join(dir, "FORMAT"), "utf8"), FORMAT_LINE);
    await srv.stop();
  });

  test("a trailing slash is fine", async () => {
    const dir = path.join(tempDir(), "x", "y");
    const srv = new Server({ dataDir: `${dir}/` });
    await srv.start();
    assert.ok(fs.existsSync(path.join(dir, "FORMAT")));
    await srv.stop();
  });

  test("a component that is a file: refuses to start naming it", () => {
    const root = tempDir();
    fs.writeFileSync(path.join(root, "a"), "not a directory");
    assertRefusesToStart(path.join(root, "a", "b", "c"), "cannot create data directory", `${path.join(root, "a")} exists and is not a directory`);
    assert.equal(fs.readFileSync(path.join(root, "a"), "utf8"), "not a directory");
  });

  test("a component the system refuses: refuses to start naming the component and the reason", () => {
    const root = tempDir();
    const long = path.join(root, "n".repeat(300)); // longer than a file name may be
    assertRefusesToStart(path.join(long, "c"), "cannot create data directory", `mkdir ${long}: File name too long`);
    assert.deepEqual(fs.readdirSync(root), []);
  });
});

describe("a directory that is not runnel's", () => {
  test("unrelated files: refuses to start naming the first five and how many more, changes nothing", () => {
    const dir = tempDir();
    const names = ["notes.txt", "photos", "a.out", "Makefile", "zeta", "beta.md", "report.pdf"];
    for (const n of names) {
      if (n === "photos") fs.mkdirSync(path.join(dir, n));
      else fs.writeFileSync(path.join(dir, n), n);
    }
    const before = snapshotTree(dir);
    const err = assertRefusesToStart(dir, "holds files runnel did not write", "Makefile, a.out, beta.md, notes.txt, photos and 2 more", "refusing to start");
    assert.ok(!err.includes("zeta"), err);
    assert.deepEqual(snapshotTree(dir), before);
    assert.deepEqual(fs.readdirSync(dir).sort(), names.slice().sort(), "no LOCK or FORMAT was written");
  });

  test("one unrelated file next to runnel's own: refused, naming it alone", async () => {
    const { srv } = await dirWithData();
    fs.writeFileSync(path.join(srv.dataDir, "backup.tar"), "x");
    const before = snapshotTree(srv.dataDir);
    const err = assertRefusesToStart(srv.dataDir, "holds files runnel did not write: backup.tar;");
    assert.ok(!/more/.test(err), err);
    assert.deepEqual(snapshotTree(srv.dataDir), before);
  });

  test("an empty existing directory and one with only lost+found are accepted", async () => {
    const empty = new Server();
    await empty.start();
    await empty.stop();
    const mounted = tempDir();
    fs.mkdirSync(path.join(mounted, "lost+found"));
    const srv = new Server({ dataDir: mounted });
    await srv.start();
    await srv.stop();
  });

  test("a directory runnel wrote with every kind of file (streams, checkpoint, snapshots, parts, subscriptions) restarts", async () => {
    const srv = new Server({ args: ["--checkpoint-bytes", String(1 << 20)] });
    await srv.start();
    const s = `${srv.url}/dirs/all`;
    assert.equal((await fetch(s, { method: "PUT", headers: { "content-type": "text/plain" }, body: "x".repeat(1 << 20) })).status, 201);
    const off = (await fetch(s, { method: "HEAD" })).headers.get("stream-next-offset");
    const snap = await fetch(`${s}/snapshot/${off}`, { method: "PUT", headers: { "content-type": "text/plain" }, body: "state" });
    assert.ok(snap.status === 201 || snap.status === 204, `snapshot: ${snap.status}`);
    await stagePart(s, off, "a staged part");
    assert.equal((await fetch(`${srv.url}/dirs/wake`, { method: "PUT", headers: { "content-type": "application/json" } })).status, 201);
    const sub = await fetch(`${srv.url}/v1/stream/__ds/subscriptions/dirs`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ type: "pull-wake", pattern: "dirs/*", wake_stream: "dirs/wake" }),
    });
    assert.ok(sub.status === 201 || sub.status === 200, `subscription: ${sub.status} ${await sub.text()}`);
    await srv.stop();
    const top = fs.readdirSync(srv.dataDir).sort();
    for (const name of ["FORMAT", "LOCK", "checkpoint", "cluster-id", "cold", "snapshots", "streams", "subs", "wal"]) assert.ok(top.includes(name), `${name} in ${top}`);
    await srv.start();
    assert.equal((await fetch(`${s}?offset=-1`)).status, 200);
    await srv.stop();
  });
});
