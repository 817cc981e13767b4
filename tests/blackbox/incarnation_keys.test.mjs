// Stream-Incarnation tokens differ between data directories (extensions
// §2.4: the token MUST change when a stream is recreated at the same URL).
// Before, every fresh server gave its first stream the same token
// (4519808308187955), so a deployment wiped and made again handed a client
// holding old offsets the token it knew, for other bytes. Each data
// directory now draws a random key at its first start, kept in
// <data>/incarnation-key and mixed into every token: two fresh servers,
// and one directory wiped and made again, give the same first stream other
// tokens; a restart keeps every token (SIGTERM and SIGKILL, a history
// rewrite's too); a directory holding a store of a build without the key
// keeps key 0 (its tokens came from it); a damaged key refuses the start.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, describe, test } from "node:test";
import { Server, tempDir } from "./lib/server.mjs";
import { head, put, req } from "./lib/bucket.mjs";

const servers = [];
after(() => Promise.all(servers.map((s) => s.stop())));
async function serve(dataDir, args = []) {
  const s = new Server({ dataDir, args });
  servers.push(s);
  return s.start();
}

const token = (r) => r.headers.get("stream-incarnation");
async function firstStreams(s) {
  const b = await put(`${s.url}/firstbk/s`);
  const v = await put(`${s.url}/v1/stream/first`);
  assert.equal(b.status, 201);
  assert.equal(v.status, 201);
  return [token(b), token(v)];
}
const keyFile = (dir) => path.join(dir, "incarnation-key");

describe("fresh data directories", () => {
  test("two fresh servers give the same first streams other tokens", async () => {
    const a = await serve(tempDir("runnel-inc-"));
    const b = await serve(tempDir("runnel-inc-"));
    const [ta, tb] = [await firstStreams(a), await firstStreams(b)];
    assert.notEqual(ta[0], tb[0], "the first bucket stream");
    assert.notEqual(ta[1], tb[1], "the first v1 stream");
    for (const s of [a, b]) assert.match(fs.readFileSync(keyFile(s.dataDir), "utf8"), /^[0-9a-f]{16}\n$/);
  });

  test("a directory wiped and made again gives other tokens; a restart keeps them", async () => {
    const dir = tempDir("runnel-inc-");
    const s = await serve(dir, ["--test-hooks"]);
    const before = await firstStreams(s);
    await put(`${s.url}/firstbk/r`, { body: "0123456789" });
    const rw = await req(`${s.url}/__runnel/test/rewrite/firstbk/r?keep=0000000000000000_0000000000000004`, { method: "POST" });
    assert.ok(rw.status < 300, `rewrite: ${rw.status} ${rw.text}`);
    const rewritten = token(await head(`${s.url}/firstbk/r`));
    for (const signal of ["SIGKILL", "SIGTERM"]) {
      await s.restart(signal);
      assert.equal(token(await head(`${s.url}/firstbk/s`)), before[0], `after ${signal}`);
      assert.equal(token(await head(`${s.url}/v1/stream/first`)), before[1], `after ${signal}`);
      assert.equal(token(await head(`${s.url}/firstbk/r`)), rewritten, `the rewrite's token after ${signal}`);
    }
    await s.stop();
    fs.rmSync(dir, { recursive: true, force: true });
    await s.start();
    const again = await firstStreams(s);
    assert.notEqual(again[0], before[0]);
    assert.notEqual(again[1], before[1]);
  });
});

describe("the key file", () => {
  test("a store without a key (a build before it) keeps key 0 and its tokens", async () => {
    const dir = tempDir("runnel-inc-");
    const s = await serve(dir);
    const before = await firstStreams(s);
    await s.stop();
    fs.rmSync(keyFile(dir));
    await s.start();
    assert.equal(fs.readFileSync(keyFile(dir), "utf8"), "0000000000000000\n");
    assert.equal(token(await head(`${s.url}/firstbk/s`)), before[0]);
    assert.equal(token(await head(`${s.url}/v1/stream/first`)), before[1]);
  });

  test("a damaged key refuses the start and changes nothing", async () => {
    const dir = tempDir("runnel-inc-");
    const s = await serve(dir);
    await s.stop();
    fs.writeFileSync(keyFile(dir), "not a key\n");
    await assert.rejects(s.start({ readyMs: 5000 }), /incarnation-key is damaged/);
    assert.equal(fs.readFileSync(keyFile(dir), "utf8"), "not a key\n");
  });
});
