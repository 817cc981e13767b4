// The official TypeScript client (@durable-streams/client, installed with
// the conformance suite in tests/conformance/node_modules) through a
// standalone gateway in front of a real node and through the embedded
// gate, with an API key in its headers, on the /v1/stream/ surface it
// speaks (a tenant with rw on v1:app/): it creates a JSON stream, appends,
// reads everything back, tails it live over SSE and over long-poll,
// writes through an IdempotentProducer, and without the key its create
// fails (401) and nothing is created. Skipped, saying so, when the client
// is not installed (scripts/setup.sh test installs it).
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { MODES, bearer, call, sleep, startDeployment, tenant, tenantsDoc } from "./lib.mjs";

const CLIENT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../conformance/node_modules/@durable-streams/client/dist/index.js");
const missing = fs.existsSync(CLIENT) ? false : "@durable-streams/client is not installed (scripts/setup.sh test)";
const T = { full: tenant({ "*": "rwa" }), app: tenant({ "v1:app/": "rw" }) };

for (const mode of MODES) {
  describe(`the TypeScript client (${mode})`, { skip: missing }, () => {
    let d;
    let ds;
    const headers = { Authorization: `Bearer ${T.app.key}` };
    before(async () => {
      ds = await import(CLIENT);
      d = await startDeployment(mode, { tenants: tenantsDoc(T) });
    });
    after(async () => {
      await d?.stop();
    });

    test("create, append, read back", async () => {
      const h = await ds.DurableStream.create({ url: `${d.url}/v1/stream/app/c-1`, headers, contentType: "application/json" });
      for (let i = 0; i < 3; i++) await h.append(JSON.stringify({ n: i }));
      const res = await h.stream({ live: false });
      assert.deepEqual(await res.json(), [{ n: 0 }, { n: 1 }, { n: 2 }]);
    });

    for (const live of ["sse", "long-poll"]) {
      test(`a live tail (${live})`, async () => {
        const url = `${d.url}/v1/stream/app/tail-${live}`;
        const h = await ds.DurableStream.create({ url, headers, contentType: "application/json" });
        await h.append(JSON.stringify({ n: 0 }));
        const ctrl = new AbortController();
        const got = [];
        const res = await ds.stream({ url, headers, live, signal: ctrl.signal });
        res.subscribeJson(async (batch) => {
          got.push(...batch.items);
        });
        await sleep(300);
        for (let i = 1; i < 4; i++) await h.append(JSON.stringify({ n: i }));
        for (let i = 0; i < 100 && got.length < 4; i++) await sleep(50);
        ctrl.abort();
        assert.deepEqual(got, [0, 1, 2, 3].map((n) => ({ n })));
      });
    }

    test("an IdempotentProducer writes once", async () => {
      const h = await ds.DurableStream.create({ url: `${d.url}/v1/stream/app/prod-1`, headers, contentType: "application/json" });
      const errors = [];
      const p = new ds.IdempotentProducer(h, "gw-producer", { autoClaim: true, onError: (e) => errors.push(e) });
      for (let i = 0; i < 10; i++) p.append(JSON.stringify({ n: i }));
      await p.flush();
      await p.close();
      assert.deepEqual(errors, []);
      const res = await h.stream({ live: false });
      assert.deepEqual(await res.json(), Array.from({ length: 10 }, (_, n) => ({ n })));
    });

    test("without the key the create fails and creates nothing", async () => {
      await assert.rejects(ds.DurableStream.create({ url: `${d.url}/v1/stream/app/nokey`, contentType: "application/json" }), (e) => {
        assert.match(String(e?.status ?? e?.message ?? e), /401|credential|unauthori/i);
        return true;
      });
      assert.equal((await call(`${d.url}/v1/stream/app/nokey`, { method: "HEAD", headers: bearer(T.full.key) })).status, 404);
    });
  });
}
