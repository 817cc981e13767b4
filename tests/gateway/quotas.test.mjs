// The gate's quotas (docs/GATEWAY.md "Limits"), through a standalone
// gateway in front of a real node and through the embedded gate, the same
// table in both with identical answers: 408 BODY_TOO_SLOW for a small body
// dribbled below the tenant's floor (nothing applied); 429 RATE_LIMITED
// with Retry-After for the request rate (a token bucket that refills) and
// for the byte rates in and out (the Retry-After repays the debt: a
// request after it passes); 429 LIVE_READS_EXHAUSTED, UPLOADS_EXHAUSTED
// and UPLOAD_BYTES_EXHAUSTED for the concurrency limits (a slot freed is
// usable again, other kinds of request pass meanwhile); and 503
// UPLOAD_BUDGET_EXHAUSTED with Retry-After for the gate-wide
// --upload-budget-bytes (given to `runnel serve` too in the embedded form:
// GATEWAY.md names the flag for the gateway only).
import assert from "node:assert/strict";
import { assertFromNode, assertOwn } from "./checks.mjs";
import { modeTable } from "./table.mjs";
import { Conn, bearer, content, openSse, rawRequest, requestHead, seed, sleep, startDeployment, tenant, tenantsDoc } from "./lib.mjs";

const T = {
  full: tenant({ "*": "rwa" }),
  acme: tenant({ orders: "rw" }),
  slow: tenant({ orders: "rw" }, { limits: { min_body_bytes_per_second: 2000 } }),
  rl: tenant({ orders: "rw" }, { limits: { requests_per_second: 1, burst: 2 } }),
  bin: tenant({ orders: "rw" }, { limits: { bytes_in_per_second: 2000 } }),
  bout: tenant({ orders: "rw" }, { limits: { bytes_out_per_second: 2000 } }),
  live: tenant({ orders: "rw" }, { limits: { live_reads: 1 } }),
  up: tenant({ orders: "rw" }, { limits: { uploads: 1 } }),
  upb: tenant({ orders: "rw" }, { limits: { upload_bytes: 10000 } }),
};
const BUDGET = 20000;

async function start(mode, gateArgs = []) {
  const d = await startDeployment(mode, { tenants: tenantsDoc(T), gateArgs });
  await seed(d, T.full.key, [["/orders/o-1", "hello\n"], ["/orders/big", "b".repeat(6000)]]);
  return { d };
}

const ask = (ctx, method, path, key, { headers = {}, body } = {}) =>
  rawRequest(ctx.d.port, method, path, { headers: { ...bearer(key), ...headers }, body });
const append = (ctx, key, body) => ask(ctx, "POST", "/orders/o-1", key, { headers: { "Content-Type": "text/plain" }, body });

// A POST of `length` declared bytes of which only the first 10 are sent;
// finish() sends the rest and resolves to the answer.
async function heldUpload(ctx, key, length) {
  const c = await Conn.open(ctx.d.port);
  c.write(requestHead("POST", "/orders/o-1", { ...bearer(key), "Content-Type": "text/plain", "Content-Length": String(length) }));
  c.write("h".repeat(10));
  await sleep(300); // the gate has seen its head
  return {
    finish: async () => {
      c.write("h".repeat(length - 10));
      try {
        return await c.answer();
      } finally {
        c.close();
      }
    },
  };
}

// Asserts that a RATE_LIMITED's Retry-After repays the debt: a request of
// the same tenant after that many seconds passes.
async function afterRetry(ctx, key, r, maxSeconds) {
  const ra = Number(r.header("retry-after"));
  assert.ok(ra >= 1 && ra <= maxSeconds, `Retry-After ${ra} within 1..${maxSeconds}`);
  await sleep(ra * 1000 + 200);
  assertFromNode(await ask(ctx, "GET", "/orders/o-1?offset=-1&max_bytes=1", key), 200, "after Retry-After");
}

const cases = [
  {
    name: "408 BODY_TOO_SLOW: a small body below the floor, nothing applied",
    run: async (ctx) => {
      const c = await Conn.open(ctx.d.port, { timeoutMs: 20000 });
      c.write(requestHead("POST", "/orders/o-1", { ...bearer(T.slow.key), "Content-Type": "text/plain", "Content-Length": "4000" }));
      let answered = null;
      const pending = c.answer({ timeoutMs: 20000 }).then((r) => (answered = r), (e) => (answered = e));
      for (let sent = 0; !answered && sent < 4000; sent += 20) { // 100 bytes/s
        c.write("S".repeat(20));
        await sleep(200);
      }
      await pending;
      c.close();
      if (answered instanceof Error) throw answered;
      assertOwn(answered, 408, "BODY_TOO_SLOW", { what: "a dribbled body" });
      assert.ok(!(await content(ctx.d, T.full.key, "/orders/o-1")).includes("S"), "nothing of the slow body applied");
      return answered;
    },
  },
  {
    name: "429 RATE_LIMITED: the request rate",
    run: async (ctx) => {
      const rs = await Promise.all(Array.from({ length: 10 }, () => ask(ctx, "GET", "/orders/o-1?offset=-1", T.rl.key)));
      const refused = rs.filter((r) => r.status === 429);
      assert.ok(rs.filter((r) => r.status === 200).length >= 1, "the burst lets some through");
      assert.ok(refused.length >= 5, `10 requests at once over a burst of 2 at 1/s: ${rs.map((r) => r.status)}`);
      assertOwn(refused[0], 429, "RATE_LIMITED", { what: "over the request rate" });
      await afterRetry(ctx, T.rl.key, refused[0], 2);
      return refused[0];
    },
  },
  {
    name: "429 RATE_LIMITED: the byte rate in",
    run: async (ctx) => {
      assertFromNode(await append(ctx, T.bin.key, "i".repeat(6000)), 204, "a body over a second's worth passes");
      const r = await ask(ctx, "GET", "/orders/o-1?offset=-1&max_bytes=1", T.bin.key);
      assertOwn(r, 429, "RATE_LIMITED", { what: "a tenant owing bytes in" });
      await afterRetry(ctx, T.bin.key, r, 4);
      return r;
    },
  },
  {
    name: "429 RATE_LIMITED: the byte rate out",
    run: async (ctx) => {
      const big = await ask(ctx, "GET", "/orders/big?offset=-1", T.bout.key);
      assertFromNode(big, 200, "a read over a second's worth passes");
      assert.equal(big.body.length, 6000);
      const r = await ask(ctx, "GET", "/orders/o-1?offset=-1&max_bytes=1", T.bout.key);
      assertOwn(r, 429, "RATE_LIMITED", { what: "a tenant owing bytes out" });
      await afterRetry(ctx, T.bout.key, r, 4);
      return r;
    },
  },
  {
    name: "429 LIVE_READS_EXHAUSTED: concurrent live reads",
    run: async (ctx) => {
      const sse = await openSse(`${ctx.d.url}/orders/o-1?offset=now&live=sse`, { headers: bearer(T.live.key) });
      try {
        assert.equal(sse.status, 200, `the first live read: ${sse.text ?? ""}`);
        const r = await ask(ctx, "GET", "/orders/o-1?offset=now&live=long-poll&timeout_ms=100", T.live.key);
        assertOwn(r, 429, "LIVE_READS_EXHAUSTED", { what: "a second live read" });
        assertFromNode(await ask(ctx, "GET", "/orders/o-1?offset=-1", T.live.key), 200, "a catch-up read meanwhile");
        sse.close();
        let again = null;
        for (let i = 0; i < 50 && again?.status !== 204; i++) {
          await sleep(100);
          again = await ask(ctx, "GET", "/orders/o-1?offset=now&live=long-poll&timeout_ms=100", T.live.key);
        }
        assertFromNode(again, 204, "a live read once the first ended");
        return r;
      } finally {
        sse.close();
      }
    },
  },
  {
    name: "429 UPLOADS_EXHAUSTED: concurrent uploads",
    run: async (ctx) => {
      const held = await heldUpload(ctx, T.up.key, 100);
      const r = await append(ctx, T.up.key, "second\n");
      assertOwn(r, 429, "UPLOADS_EXHAUSTED", { what: "a second upload" });
      assertFromNode(await ask(ctx, "GET", "/orders/o-1?offset=-1", T.up.key), 200, "a read meanwhile");
      assertFromNode(await held.finish(), 204, "the held upload");
      assertFromNode(await append(ctx, T.up.key, "third\n"), 204, "an upload once the first ended");
      assert.ok(!(await content(ctx.d, T.full.key, "/orders/o-1")).includes("second"), "the refused upload applied nothing");
      return r;
    },
  },
  {
    name: "429 UPLOAD_BYTES_EXHAUSTED: concurrent upload bytes",
    run: async (ctx) => {
      const held = await heldUpload(ctx, T.upb.key, 8000);
      const r = await append(ctx, T.upb.key, "u".repeat(4000));
      assertOwn(r, 429, "UPLOAD_BYTES_EXHAUSTED", { what: "8000 + 4000 declared bytes over 10000" });
      assertFromNode(await append(ctx, T.upb.key, "v".repeat(1000)), 204, "8000 + 1000 declared bytes fit");
      assertFromNode(await held.finish(), 204, "the held upload");
      assert.ok(!(await content(ctx.d, T.full.key, "/orders/o-1")).includes("u".repeat(4000)), "the refused upload applied nothing");
      return r;
    },
  },
];

modeTable("quotas", { start: (mode) => start(mode), cases });

modeTable("the upload budget", {
  start: (mode) => start(mode, ["--upload-budget-bytes", String(BUDGET)]),
  cases: [
    {
      name: "503 UPLOAD_BUDGET_EXHAUSTED: declared bytes of all tenants",
      run: async (ctx) => {
        const held = await heldUpload(ctx, T.full.key, 15000);
        const r = await append(ctx, T.acme.key, "w".repeat(8000));
        assertOwn(r, 503, "UPLOAD_BUDGET_EXHAUSTED", { what: "15000 + 8000 declared bytes over 20000" });
        assertFromNode(await append(ctx, T.acme.key, "x".repeat(4000)), 204, "15000 + 4000 declared bytes fit");
        assertFromNode(await held.finish(), 204, "the held upload");
        assert.ok(!(await content(ctx.d, T.full.key, "/orders/o-1")).includes("w".repeat(8000)), "the refused upload applied nothing");
        return r;
      },
    },
  ],
});
