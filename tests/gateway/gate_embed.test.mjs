// The gate embedded in a program of its own (tests/gateway/gate_embed.c):
// its refusal hook answers ext §11.1's embedding refusals with the shape of
// an intermediary's own answers (the §11 body, Cache-Control: no-store, no
// producer header, no server identity), and a tenant the hook lets through
// reaches the program's handler.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { BIN, freePort, tempDir } from "../lib/server.mjs";

const EMBED = path.join(path.dirname(BIN), "tests", "runnel-gate-embed");

function tenantsFile(dir, names) {
  const keys = {};
  const tenants = {};
  for (const name of names) {
    const key = "rnk_" + crypto.randomBytes(32).toString("hex");
    keys[name] = key;
    tenants[name] = {
      keys: [{ id: name, sha256: crypto.createHash("sha256").update(key).digest("hex") }],
      rights: { orders: "rw" },
    };
  }
  const file = path.join(dir, "tenants.json");
  fs.writeFileSync(file, JSON.stringify({ tenants }));
  return { file, keys };
}

async function start(file) {
  const port = await freePort();
  const proc = spawn(EMBED, [file, String(port)], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise((resolve, reject) => {
    proc.stdout.on("data", (d) => d.toString().includes("listening") && resolve());
    proc.on("exit", (code) => reject(new Error(`gate_embed exited ${code}`)));
  });
  return { proc, url: `http://127.0.0.1:${port}` };
}

const CASES = [
  ["hook-unpaid", 402, "PAYMENT_REQUIRED"],
  ["hook-revoked", 403, "ACCOUNT_REVOKED"],
  ["hook-denied", 403, "FORBIDDEN"],
  ["hook-limited", 429, "RATE_LIMITED"],
];

test("an embedding program's refusal hook answers §11.1's refusals", async (t) => {
  const dir = tempDir();
  const { file, keys } = tenantsFile(dir, ["hook-ok", ...CASES.map((c) => c[0])]);
  const { proc, url } = await start(file);
  t.after(() => proc.kill("SIGTERM"));
  for (const [tenant, status, code] of CASES) {
    for (const method of ["GET", "POST"]) {
      const res = await fetch(`${url}/orders/s1`, {
        method,
        headers: { authorization: `Bearer ${keys[tenant]}`, "content-type": "text/plain" },
        body: method === "POST" ? "x" : undefined,
      });
      const body = await res.json();
      assert.equal(res.status, status, `${tenant} ${method}`);
      assert.equal(body.error.code, code);
      assert.equal(typeof body.error.message, "string");
      assert.equal(res.headers.get("content-type"), "application/json");
      assert.equal(res.headers.get("cache-control"), "no-store");
      assert.equal(res.headers.get("ursula-protocol"), null);
      assert.equal(res.headers.get("ursula-cluster-id"), null);
      assert.equal(res.headers.get("producer-epoch"), null);
      assert.equal(res.headers.get("producer-outcome"), null);
      assert.equal(res.headers.get("retry-after"), code === "RATE_LIMITED" ? "7" : null);
      assert.ok(!JSON.stringify(body).includes(keys[tenant]), "no credential in the body");
    }
  }
  const ok = await fetch(`${url}/orders/s1`, { headers: { authorization: `Bearer ${keys["hook-ok"]}` } });
  assert.equal(ok.status, 200);
  assert.equal(await ok.text(), "served\n");
  const none = await fetch(`${url}/orders/s1`);
  assert.equal(none.status, 401, "the hook sees only identified tenants");
});
