// End-to-end test of the chaos harness (run.mjs) before the real cluster
// exists: short runs against the fake cluster of fake_runnel.mjs (node 1
// fronts a real single-node runnel, RUNNEL_BIN; the others redirect to it)
// must pass every property; the same fake with planted bugs (a follower
// that applies a write and then redirects it, a node that exits by itself)
// must fail the properties those bugs break; a binary that refuses the cluster flags must fail at once
// with a clear message. Each run must leave no namespace behind. Needs
// root and ip netns; skips, saying why, without them.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import test from "node:test";
import { fileURLToPath } from "node:url";
import { tempDir } from "../../lib/server.mjs";
import { listNamespaces, netnsUnavailable } from "./netns.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const BIN = path.resolve(process.env.RUNNEL_BIN ?? "build/runnel");
const FAKE = path.join(here, "fake_runnel.mjs");

const skip = netnsUnavailable() ?? (fs.existsSync(BIN) ? false : `no runnel at ${BIN} (set RUNNEL_BIN)`);

// Runs run.mjs with args (bounded); resolves {code, out, ms} once it exited,
// after checking that it left no namespace of its own.
function runHarness(args, env = {}, timeoutMs = 240000) {
  const started = Date.now();
  const child = spawn(process.execPath, [path.join(here, "run.mjs"), ...args], {
    env: { ...process.env, RUNNEL_FAKE_BACKEND: BIN, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const timer = setTimeout(() => child.kill("SIGTERM"), timeoutMs);
  return new Promise((resolve) => {
    child.on("exit", (code) => {
      clearTimeout(timer);
      assert.deepEqual(listNamespaces().filter((ns) => ns.startsWith(`rnchaos-${child.pid}-`)), [], "the run left namespaces");
      resolve({ code, out, ms: Date.now() - started });
    });
  });
}

test("a short run on a consistent fake cluster passes every property", { skip }, async () => {
  const r = await runHarness(["--bin", FAKE, "--schedule", "short", "--faults", "3", "--seed", "11"]);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /^10 passed, 0 failed$/m);
  assert.match(r.out, /^figures: duration \d+ s; faults 3 \(/m);
  const acks = Number(/acks (\d+)/.exec(r.out)[1]);
  assert.ok(acks > 100, `only ${acks} writes acknowledged:\n${r.out}`);
  for (const line of r.out.split("\n").filter((l) => /^(ok|FAILED) /.test(l)))
    assert.match(line, /^ok +.*\((?!0 checked)\d+ checked\)$/, `a property checked nothing: ${line}`);
});

test("a fake follower that applies writes it redirects, or exits by itself, is caught", { skip }, async () => {
  const r = await runHarness(["--bin", FAKE, "--schedule", "short", "--faults", "1", "--seed", "12"],
    { RUNNEL_FAKE_BUG: "apply-then-redirect,exit-by-itself" });
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /^FAILED writes answered NO_LEADER, redirected or refused are not applied/m);
  assert.match(r.out, /record [ap]\d+:\d+:\d+ \(#\d+ (pwrite|append) to node [23] at [0-9.]+ s answered 307\) is applied on nodes 1 at byte \d+; 2 at byte \d+; 3 at byte \d+/);
  assert.match(r.out, /^FAILED nodes exit only when killed, and with status 0 on SIGTERM/m);
  assert.match(r.out, /^ +node 3 exited by itself \(status 3\); its log ends:$/m);
  assert.match(r.out, /^8 passed, 2 failed$/m);
});

test("a binary without the cluster flags fails at once, saying so", { skip }, async () => {
  const dir = tempDir("chaos-noflags-");
  const bin = path.join(dir, "runnel");
  fs.writeFileSync(bin, '#!/bin/sh\necho "runnel: unknown option \\"--node-id\\"" >&2\nexit 2\n', { mode: 0o755 });
  try {
    const r = await runHarness(["--bin", bin, "--schedule", "short"], {}, 60000);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /^chaos: the cluster did not start: node 1 exited \(status 2\) right after start; does this runnel accept the cluster flags/m);
    assert.match(r.out, /runnel: unknown option "--node-id"/);
    assert.match(r.out, /^0 passed, 1 failed$/m);
    assert.ok(r.ms < 30000, `took ${r.ms} ms`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
