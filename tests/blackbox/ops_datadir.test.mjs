// The data directory's own files (docs/ARCHITECTURE.md "Data directory
// layout"): LOCK keeps a second server out; FORMAT names the on-disk format,
// is written at the first start and refuses a build of another format or a
// damaged marker without touching the data; a directory written before the
// marker existed starts with its data intact and gains it; format 1 (the log
// before batch headers and wal/HEAD) is taken over when a clean stop left
// its log empty and refused, unchanged, when its log holds records;
// cluster-id is kept across restarts and a damaged one refuses to start.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { Server, readAll, tempDir } from "./lib/server.mjs";
import { runCli } from "./lib/ops.mjs";

const FORMAT_LINE = "runnel data format 2\n";

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
    assertRefusesToStart(srv.dataDir, "format 7", "format 2", "refusing to start");
    assert.deepEqual(snapshotTree(srv.dataDir), before);
  });

  for (const [what, text] of [
    ["an empty marker", ""],
    ["a marker of something else", "sqlite format 3\n"],
    ["trailing garbage", "runnel data format 2x\n"],
    ["a signed number", "runnel data format +2\n"],
    ["a leading zero", "runnel data format 02\n"],
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

describe("format 1", () => {
  // A format-1 directory as the previous build leaves it: FORMAT says 1 and
  // the log has no wal/HEAD (format 1 had none).
  const asFormat1 = (dir) => {
    fs.writeFileSync(path.join(dir, "FORMAT"), "runnel data format 1\n");
    fs.rmSync(path.join(dir, "wal", "HEAD"));
  };

  test("stopped cleanly (an empty log): taken over as format 2, data intact", async () => {
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
