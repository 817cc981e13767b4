// Forks across restarts (issue 3): fork structure, stitched data, soft
// deletes and cascading cleanup must survive both a graceful restart
// (checkpoint) and a SIGKILL (log replay), and cleanup must remove files.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Server, readAll } from "./lib/server.mjs";

async function put(url, headers = {}, body) {
  return fetch(url, { method: "PUT", headers: { "content-type": "text/plain", ...headers }, body });
}
async function post(url, body, headers = {}) {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "text/plain", ...headers }, body });
  assert.ok(res.status === 204 || res.status === 200, `append answered ${res.status}`);
  return res.headers.get("stream-next-offset");
}
function streamFiles(dataDir) {
  const root = path.join(dataDir, "streams");
  if (!fs.existsSync(root)) return [];
  return fs.readdirSync(root).flatMap((d) => fs.readdirSync(path.join(root, d)));
}

for (const signal of ["SIGTERM", "SIGKILL"]) {
  describe(`forks after a ${signal} restart`, () => {
    const server = new Server();
    before(() => server.start());
    after(() => server.stop());

    test("fork data, sub-offset boundary and own appends survive", async () => {
      const src = server.stream("fk/src");
      const created = await put(src, {}, "hello ");
      assert.equal(created.status, 201);
      const mid = created.headers.get("stream-next-offset"); // where the next append starts
      await post(src, "wonderful world");
      await post(src, " and more");
      // Fork at `mid` plus 9 bytes into the append there: "hello wonderful".
      const fork = server.stream("fk/fork");
      const res = await put(fork, {
        "stream-forked-from": "/v1/stream/fk/src",
        "stream-fork-offset": mid,
        "stream-fork-sub-offset": "9",
      }, "!");
      assert.equal(res.status, 201);
      await post(fork, " (fork)");
      await post(src, " (source)");
      await server.restart(signal);
      assert.equal((await readAll(fork)).body.toString(), "hello wonderful! (fork)");
      assert.equal((await readAll(src)).body.toString(), "hello wonderful world and more (source)");
      // The fork keeps accepting appends after the restart, at its own tail.
      await post(fork, "+");
      assert.equal((await readAll(fork)).body.toString(), "hello wonderful! (fork)+");
      // Re-creating the fork with the same headers is idempotent across restarts.
      const again = await put(fork, {
        "stream-forked-from": "/v1/stream/fk/src",
        "stream-fork-offset": mid,
        "stream-fork-sub-offset": "9",
      });
      assert.equal(again.status, 200);
    });

    test("soft delete and cascading cleanup survive, and free the files", async () => {
      const a = server.stream("cas/a"), b = server.stream("cas/b"), c = server.stream("cas/c");
      assert.equal((await put(a, {}, "aaa")).status, 201);
      assert.equal((await put(b, { "stream-forked-from": "/v1/stream/cas/a" }, "bbb")).status, 201);
      assert.equal((await put(c, { "stream-forked-from": "/v1/stream/cas/b" }, "ccc")).status, 201);
      const filesBefore = streamFiles(server.dataDir).length;
      assert.equal((await fetch(a, { method: "DELETE" })).status, 204);
      assert.equal((await fetch(b, { method: "DELETE" })).status, 204);
      await server.restart(signal);
      // Both are soft-deleted: 410 on their URLs, 409 on re-create, and c still reads through them.
      assert.equal((await fetch(a, { method: "HEAD" })).status, 410);
      assert.equal((await fetch(b)).status, 410);
      assert.equal((await put(a)).status, 409);
      assert.equal((await readAll(c)).body.toString(), "aaabbbccc");
      // Deleting the last fork cleans up the whole chain.
      assert.equal((await fetch(c, { method: "DELETE" })).status, 204);
      for (const u of [a, b, c]) assert.equal((await fetch(u, { method: "HEAD" })).status, 404);
      assert.ok(streamFiles(server.dataDir).length < filesBefore, "cleanup removed data files");
      await server.restart(signal);
      for (const u of [a, b, c]) assert.equal((await fetch(u, { method: "HEAD" })).status, 404);
      assert.equal((await put(a, {}, "new")).status, 201);
      assert.equal((await readAll(a)).body.toString(), "new");
    });
  });
}
