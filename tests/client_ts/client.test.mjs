// The official TypeScript client, @durable-streams/client (pinned by
// tests/client_ts/package-lock.json), against a single node and against a
// 3-node cluster through a node that leads no group (issue 28). Every check
// of checks.mjs (one per capability the client documents) runs on both; the
// last test lists each check's result on each and fails if a check that
// passes on the single node does not pass on the cluster. A check that fails
// on both because of the client itself is marked `todo` with the reason.
//
// Needs tests/client_ts/node_modules (scripts/setup.sh test: npm ci). The
// cluster's extra serve flags come from CLIENT_TS_CLUSTER_ARGS (targets.mjs).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { CHECKS } from "./checks.mjs";
import { CLUSTER_ARGS, ClusterThroughFollower, SingleNode } from "./targets.mjs";

const CHECK_MS = 20000; // a check that takes longer failed (a client retrying forever, a lost live read)
const run = randomBytes(4).toString("hex");
const results = new Map(CHECKS.map((c) => [c.name, {}])); // name -> {single, cluster}: "pass" or the failure

function suite(target) {
  describe(`${target.name}${target.name === "cluster" ? ` (${CLUSTER_ARGS.join(" ") || "the nodes' defaults"})` : ""}`, () => {
    before(() => target.start());
    after(async () => assert.ok(await target.stop(), `${target.name}: every server stopped cleanly`));

    CHECKS.forEach((c, i) => {
      test(`${c.name} [${target.name}]`, { timeout: CHECK_MS + 10000, todo: c.todo }, async (t) => {
        await target.pick?.();
        const base = target.base();
        // aborted when the check ends or runs out of time: every request and
        // retry loop of the client the check started stops with it
        const ac = new AbortController();
        const late = new Error(`no result within ${CHECK_MS} ms`);
        const timer = setTimeout(() => ac.abort(late), CHECK_MS);
        const timedOut = new Promise((_, reject) => ac.signal.addEventListener("abort", () => reject(late)));
        const ctx = { url: (name) => `${base}/v1/stream/clientts/${run}/${i}/${name}`, signal: ac.signal };
        try {
          await Promise.race([c.run(ctx), timedOut]);
          results.get(c.name)[target.name] = "pass";
        } catch (e) {
          results.get(c.name)[target.name] = String(e?.message ?? e).split("\n")[0];
          throw e;
        } finally {
          clearTimeout(timer);
          timedOut.catch(() => {});
          ac.abort();
          if (!(await target.stillFollower())) t.diagnostic(`${base} became a leader during the check`);
        }
      });
    });
  });
}

suite(new SingleNode());
suite(new ClusterThroughFollower());

test("every check that passes on the single node passes on the cluster", (t) => {
  const worse = [];
  const mark = (r) => (r === "pass" ? "pass" : "FAIL");
  for (const c of CHECKS) {
    const { single = "not run", cluster = "not run" } = results.get(c.name);
    t.diagnostic(`${mark(single)} / ${mark(cluster)}  ${c.name}`);
    if (single !== "pass") t.diagnostic(`    single: ${single}`);
    if (cluster !== "pass") t.diagnostic(`    cluster: ${cluster}`);
    if (c.todo) t.diagnostic(`    known: ${c.todo}`);
    if (single === "pass" && cluster !== "pass") worse.push(`${c.name}: ${cluster}`);
  }
  const passed = (target) => CHECKS.filter((c) => results.get(c.name)[target] === "pass").length;
  t.diagnostic(`single node ${passed("single")}/${CHECKS.length}, cluster ${passed("cluster")}/${CHECKS.length}`);
  assert.deepEqual(worse, [], "checks passing on the single node but not on the cluster");
});
