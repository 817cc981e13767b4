// The operator's commands of the runnel command, end to end against a node
// with an admin token (docs/ADMIN.md "The commands"): `runnel ls` of
// buckets and of a bucket's streams (with --prefix, walking pages of 2),
// `runnel stat` of a bucket and of a stream, `runnel usage`, each in human
// form and with --json (the routes' answers, one per line); the credential
// from --admin-token, RUNNEL_ADMIN_TOKEN or --token, and exit 1 with the
// refusal without it; `runnel purge` refused without a confirmation (no
// terminal, no --yes: exit 2, nothing purged), refused when the name typed
// on a terminal differs (a pty from script(1)), done with the name typed
// and with --yes (exit 0, the bucket fenced). About 3 s.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { BIN, Server, tempDir } from "../lib/server.mjs";

const TOKEN = "cli-admin-token-0123456789abcdef";
const work = tempDir("runnel-cli-admin-");
const tokenFile = path.join(work, "admin.token");
fs.writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
const server = new Server({ args: ["--admin-token-file", tokenFile] });

before(async () => {
  await server.start();
  for (const [p, body] of [["ops1/s-a", "aaaa"], ["ops1/s-b", "bb"], ["ops1/t-c", "c"], ["ops2/x", "x"], ["ops3/y", "y"], ["ops4/z", "z"]]) {
    const r = await fetch(`${server.url}/${p}`, { method: "PUT", headers: { "content-type": "text/plain" }, body });
    assert.equal(r.status, 201);
  }
});
after(async () => {
  const r = await server.stop();
  assert.equal(r?.code, 0, `graceful stop: ${JSON.stringify(r)}`);
  assert.ok(!/Sanitizer|runtime error/.test(server.log), `no sanitizer report:\n${server.logTail(40)}`);
});

function run(args, { env = {}, input } = {}) {
  const r = spawnSync(BIN, args, {
    env: { PATH: process.env.PATH, RUNNEL_URL: server.url, ...env }, input, encoding: "utf8", timeout: 30000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
const as = { RUNNEL_ADMIN_TOKEN: TOKEN };

describe("listings", () => {
  test("runnel ls: buckets, then a bucket's streams by prefix, across pages", () => {
    const b = run(["ls", "--limit", "2"], { env: as });
    assert.equal(b.code, 0, b.stderr);
    assert.deepEqual(b.stdout.trim().split("\n").map((l) => l.split(/\s+/)[0]), ["ops1", "ops2", "ops3", "ops4"]);
    assert.match(b.stdout, /^ops1\s+3 streams\s+7 bytes$/m);
    const s = run(["ls", "ops1", "--prefix", "s-", "--limit", "1"], { env: as });
    assert.equal(s.code, 0, s.stderr);
    assert.deepEqual(s.stdout.trim().split("\n").map((l) => l.split(/\s+/)[0]), ["s-a", "s-b"]);
    const j = run(["ls", "--limit", "3", "--json"], { env: as });
    const pages = j.stdout.trim().split("\n").map((l) => JSON.parse(l));
    assert.equal(pages.length, 2, "one JSON document per page");
    assert.deepEqual(pages.flatMap((p) => p.buckets.map((x) => x.bucket)), ["ops1", "ops2", "ops3", "ops4"]);
    assert.equal(pages[1].next_cursor, null);
  });

  test("runnel stat and runnel usage", () => {
    const st = run(["stat", "ops1/s-a", "--json"], { env: as });
    assert.equal(st.code, 0, st.stderr);
    const doc = JSON.parse(st.stdout);
    assert.equal(doc.path, "ops1/s-a");
    assert.equal(doc.bytes, 4);
    const human = run(["stat", "ops1"], { env: as });
    assert.match(human.stdout, /^streams: 3$/m);
    assert.match(human.stdout, /^bytes:\n {2}hot: 7$/m);
    const missing = run(["stat", "ops1/none"], { env: as });
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /404 STREAM_NOT_FOUND/);
    const u = run(["usage", "--json"], { env: as });
    assert.equal(u.code, 0, u.stderr);
    const usage = JSON.parse(u.stdout.trim().split("\n")[0]);
    assert.equal(usage.usage_version, 1);
    assert.equal(usage.buckets.find((x) => x.bucket === "ops1").requests.writes, 3);
    assert.match(run(["usage"], { env: as }).stdout, /^ops1\s+7 bytes\s+0 staged\s+\d+ reads 3 writes/m);
  });

  test("the credential: --admin-token, RUNNEL_ADMIN_TOKEN, --token; refused without one", () => {
    assert.equal(run(["ls", "--admin-token", TOKEN]).code, 0);
    assert.equal(run(["ls", "--token", TOKEN]).code, 0);
    const none = run(["ls"]);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /401 INVALID_CREDENTIAL/);
    const wrong = run(["ls", "--admin-token", "not-the-token"]);
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /403 FORBIDDEN/);
  });
});

describe("runnel purge", () => {
  const fenced = async (bucket) => (await fetch(`${server.url}/${bucket}/again`, { method: "PUT" })).status === 404;

  test("without a terminal or --yes nothing is purged", async () => {
    const r = run(["purge", "ops2"], { env: as, input: "ops2\n" });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--yes/);
    assert.equal(await fenced("ops2"), false);
  });

  // Runs the command on a pseudo-terminal (script(1)) with `typed` as input.
  function onTerminal(args, typed) {
    const cmd = [BIN, ...args].map((a) => `'${a}'`).join(" ");
    return spawnSync("script", ["-qec", cmd, "/dev/null"], {
      env: { PATH: process.env.PATH, RUNNEL_URL: server.url, ...as }, input: typed, encoding: "utf8", timeout: 30000,
    });
  }

  test("a name typed on a terminal that differs purges nothing; the right one purges", async () => {
    const wrong = onTerminal(["purge", "ops3"], "ops2\n");
    assert.equal(wrong.status, 2, wrong.stdout);
    assert.match(wrong.stdout, /Type the bucket's name/);
    assert.equal(await fenced("ops3"), false);
    const right = onTerminal(["purge", "ops3"], "ops3\n");
    assert.equal(right.status, 0, right.stdout);
    assert.match(right.stdout, /purged/);
    assert.equal(await fenced("ops3"), true);
  });

  test("--yes purges at once and waits for the end; a repeat is done too", async () => {
    const r = run(["purge", "ops4", "--yes", "--json"], { env: as });
    assert.equal(r.code, 0, r.stderr);
    const doc = JSON.parse(r.stdout);
    assert.equal(doc.erased, true);
    assert.equal(doc.purge.done, true);
    assert.equal(await fenced("ops4"), true);
    assert.equal(run(["purge", "ops4", "--yes"], { env: as }).code, 0);
    assert.equal(run(["ls", "ops1"], { env: as }).stdout.trim().split("\n").length, 3, "other buckets stay");
  });
});
