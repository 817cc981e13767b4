// A live SSE read whose JWT expires (docs/GATEWAY.md "Writes through the
// gateway (§11.1)", last point; "Credentials" for access_token), through a
// standalone gateway in front of a real node and through the embedded gate,
// with the token as a bearer header and as the access_token parameter an
// EventSource sends: while appends keep coming, the read ends with `event:
// credential-expired` after a whole event (a data event and its control
// event) once the token's exp passed, not before; resuming with a new token
// from the offset of the last control event loses nothing and repeats
// nothing (the two reads' data is the stream's content).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Issuer, MODES, bearer, call, content, openSse, seed, sleep, startDeployment, tenant, tenantsDoc } from "./lib.mjs";

const iss = new Issuer({ issuer: "https://id.test/", leeway: 0 });
const T = { full: tenant({ "*": "rwa" }) };
const TTL = 3;

// The data of a read's data events, in order (text: joined as sent).
const dataOf = (events) => events.filter((e) => e.type === "message" || e.type === "data").map((e) => e.data).join("");

for (const mode of MODES) {
  describe(`SSE and an expiring JWT (${mode})`, () => {
    let d;
    before(async () => {
      d = await startDeployment(mode, { tenants: tenantsDoc({ ...T, acme: tenant({ orders: "rw" }) }, { issuers: [iss.entry()] }) });
    });
    after(async () => {
      await d?.stop();
    });

    for (const how of ["header", "access_token"]) {
      test(`ends with credential-expired after a whole event; resumes losing nothing (${how})`, async () => {
        const p = `/orders/live-${how}`;
        await seed(d, T.full.key, [[p, "e0;"]]);
        let writing = true;
        let n = 1;
        const writer = (async () => {
          for (; writing; n++) {
            const r = await call(`${d.url}${p}`, { method: "POST", headers: { ...bearer(T.full.key), "content-type": "text/plain" }, body: `e${n};` });
            assert.equal(r.status, 204, r.text);
            await sleep(150);
          }
        })();
        try {
          const open = (token, offset) => {
            const q = how === "access_token" ? `&access_token=${token}` : "";
            return openSse(`${d.url}${p}?offset=${encodeURIComponent(offset)}&live=sse${q}`, { headers: how === "header" ? bearer(token) : {}, timeoutMs: 20000 });
          };
          const exp = Date.now() + TTL * 1000;
          const first = await open(iss.mint({ tenant: "acme", ttl: TTL }), "-1");
          assert.equal(first.status, 200, first.text);
          assert.ok(await first.waitEnd(TTL * 1000 + 8000), "the read ended after the token expired");
          const endedAt = Date.now();
          assert.ok(endedAt >= exp - 1000, `not ended before the token's exp (${exp - endedAt} ms early)`);
          const types = first.events.map((e) => e.type);
          assert.equal(types.at(-1), "credential-expired", `the last event: ${types.slice(-4)}`);
          assert.equal(types.filter((t) => t === "credential-expired").length, 1);
          assert.equal(types.at(-2), "control", "credential-expired comes after a whole event (its control)");
          const last = first.controls.at(-1);
          assert.ok(last?.streamNextOffset, "a control event with streamNextOffset before the end");

          const second = await open(iss.mint({ tenant: "acme", ttl: 60 }), last.streamNextOffset);
          assert.equal(second.status, 200, second.text);
          await sleep(600);
          writing = false;
          await writer;
          const want = await content(d, T.full.key, p);
          assert.ok(await second.waitFor(() => dataOf(first.events) + dataOf(second.events) === want, 5000),
            `the two reads hold the stream: ${JSON.stringify(dataOf(first.events))} + ${JSON.stringify(dataOf(second.events))} vs ${JSON.stringify(want)}`);
          second.close();
          assert.ok(want.length > 0 && n > TTL * 4, "appends kept coming across the expiry");
        } finally {
          writing = false;
          await writer.catch(() => {});
        }
      });
    }
  });
}
