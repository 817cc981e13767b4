// Self-tests of the chaos checker (checker.mjs), without a cluster: a
// synthetic clean history must pass every property with something checked,
// and each anomaly injected into it must fail exactly the properties that
// it breaks, with a message naming the write, request, node or offset;
// plus the record format, the reading of answers (§11.1) and the rule that
// decides when the replicas have converged.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import test from "node:test";
import { check } from "./checker.mjs";
import { convergenceGap } from "./cluster.mjs";
import { classifyWrite } from "./outcomes.mjs";
import { RECORD_BYTES, makeRecord, parseRecords } from "./records.mjs";

const NODES = [1, 2, 3];
const tok = (pos) => `0000000000000000_${String(pos).padStart(16, "0")}`;
const sha256 = (buf) => crypto.createHash("sha256").update(buf).digest("hex");

const P = {
  converge: "replicas converge to identical bytes, offsets and metadata",
  acked: "acknowledged writes present exactly once at their offsets on every replica",
  refused: "writes answered NO_LEADER, redirected or refused are not applied",
  unknown: "OUTCOME_UNKNOWN writes resolved by a producer retry to exactly one apply",
  leader: "consistency=leader reads reflect every write acknowledged before them",
  reads: "reads return the final history's bytes between their offsets",
  integrity: "streams hold only records the clients sent, none applied twice",
  answers: "answers have the documented shapes (§5.7, §9.2, §11)",
};

// A small run on two streams: producers p0 (stream 0) and p1 (stream 1),
// appender a1 (stream 0), readers; every kind of answer the workload meets.
function scenario() {
  const history = { entries: [], events: [] };
  const applied = { 0: [], 1: [] }; // record ids in stream order
  let clock = 0;
  const add = (e) => {
    e.i = history.entries.length;
    e.sent ??= clock += 10;
    e.done ??= clock += 4;
    e.h ??= {};
    history.entries.push(e);
    return e;
  };
  const apply = (s, rec) => {
    applied[s].push(rec);
    const end = applied[s].length * RECORD_BYTES;
    return { start: tok(end - RECORD_BYTES), end: tok(end) };
  };
  const pwrite = (s, c, seq, v, n, answer, { applies = false } = {}) => {
    const rec = `${c}:${seq}:${v}`;
    const range = applies ? apply(s, rec) : null;
    return add({ t: "pwrite", c, s, n, rec, key: `chaos-${c}/0/${seq}`, ...answer(range) });
  };
  const append = (s, c, k, n, answer, { applies = false } = {}) => {
    const rec = `${c}:${k}:0`;
    const range = applies ? apply(s, rec) : null;
    return add({ t: "append", c, s, n, rec, ...answer(range) });
  };
  const ok200 = (r) => ({ st: 200, out: "applied", ack: r });
  const noLeader = () => ({ st: 503, code: "NO_LEADER", out: "refused", ack: null, h: { group: "3", ra: "1" } });
  const redirect = () => ({ st: 307, out: "redirected", ack: null, h: { loc: "http://10.77.0.1:4437/chaos/s0", leader: "1", group: "3", term: "4" } });
  const unknown503 = () => ({ st: 503, code: "OUTCOME_UNKNOWN", out: "unknown", ack: null, h: { ra: "1" } });
  const lost = () => ({ st: null, err: "ECONNRESET", out: "unknown", ack: null });

  pwrite(0, "p0", 0, 0, 1, ok200, { applies: true });
  pwrite(0, "p0", 1, 0, 2, noLeader);
  pwrite(0, "p0", 1, 1, 2, redirect);
  pwrite(0, "p0", 1, 2, 1, ok200, { applies: true });
  const applied2 = apply(0, "p0:2:0"); // OUTCOME_UNKNOWN that did apply, then a repeat
  pwrite(0, "p0", 2, 0, 1, unknown503);
  pwrite(0, "p0", 2, 0, 3, () => ({ st: 204, out: "repeat", ack: applied2 }));
  pwrite(0, "p0", 3, 0, 1, lost); // lost answer, not applied, retried
  pwrite(0, "p0", 3, 0, 1, ok200, { applies: true });
  append(0, "a1", 0, 2, (r) => ({ st: 204, out: "applied", ack: { end: r.end } }), { applies: true });
  append(0, "a1", 1, 2, unknown503);
  append(0, "a1", 2, 3, lost, { applies: true });
  append(0, "a1", 3, 3, redirect);
  const lastAppend = append(0, "a1", 4, 1, (r) => ({ st: 204, out: "applied", ack: { end: r.end } }), { applies: true });
  for (let seq = 0; seq < 3; seq++) pwrite(1, "p1", seq, 0, 2, ok200, { applies: true });

  const bytesOf = (s) => Buffer.from(applied[s].map((rec) => makeRecord(s, rec)).join(""), "latin1");
  const read = (s, t, cons, n, off, endPos, extra = {}) => {
    const startPos = off === "-1" ? 0 : Number(off.slice(17));
    const body = bytesOf(s).subarray(startPos, endPos);
    return add({ t, c: "r0", s, n, cons, off, st: 200, next: tok(endPos), utd: true, len: body.length, dig: sha256(body), ...extra });
  };
  read(0, "read", "leader", 2, "-1", 7 * RECORD_BYTES);
  add({ t: "head", c: "r0", s: 1, n: 3, cons: "leader", st: 200, next: tok(3 * RECORD_BYTES) });
  read(0, "read", "local", 3, tok(RECORD_BYTES), 3 * RECORD_BYTES, { utd: false });
  read(1, "live", "local", 1, tok(RECORD_BYTES), 3 * RECORD_BYTES);
  add({ t: "live", c: "l0", s: 1, n: 1, cons: "local", off: tok(3 * RECORD_BYTES), st: 204, next: tok(3 * RECORD_BYTES), utd: true });
  add({ t: "read", c: "r1", s: 1, n: 2, cons: "leader", off: "-1", ...redirect() });
  add({ t: "read", c: "r1", s: 1, n: 2, cons: "leader", off: "-1", st: 503, code: "NO_LEADER", h: { ra: "1", group: "3" } });

  const final = { converged: true, note: "", nodes: NODES, streams: {} };
  for (const s of [0, 1]) {
    final.streams[s] = {};
    for (const node of NODES) {
      const bytes = bytesOf(s);
      const boundaries = [];
      for (let pos = 0; pos <= bytes.length; pos += RECORD_BYTES) boundaries.push([pos, tok(pos)]);
      final.streams[s][node] = { bytes, boundaries, head: { "content-type": "text/plain", "stream-next-offset": tok(bytes.length) }, error: null };
    }
  }
  return { history, final, add, lastAppend, bytesOf, tok };
}

// Rebuilds one replica's copy of stream s from a list of record ids.
function setCopy(final, s, node, recs) {
  const bytes = Buffer.from(recs.map((rec) => makeRecord(s, rec)).join(""), "latin1");
  const boundaries = [];
  for (let pos = 0; pos <= bytes.length; pos += RECORD_BYTES) boundaries.push([pos, tok(pos)]);
  final.streams[s][node] = { bytes, boundaries, head: { "content-type": "text/plain", "stream-next-offset": tok(bytes.length) }, error: null };
}
const recsOf = (final, s, node) => parseRecords(final.streams[s][node].bytes).records.map((r) => r.id);

// Runs the checker; asserts that exactly the properties in `failing` fail,
// and that the first one's messages include one matching `message`.
function expectFailures({ history, final }, failing, message) {
  const results = check(history, final);
  const failed = results.filter((r) => !r.ok).map((r) => r.name);
  assert.deepEqual(failed.sort(), failing.map((k) => P[k]).sort(), JSON.stringify(results.filter((r) => !r.ok), null, 1));
  const target = results.find((r) => r.name === P[failing[0]]);
  assert.ok(target.messages.some((m) => message.test(m)), `no message matches ${message}: ${JSON.stringify(target.messages, null, 1)}`);
  return results;
}

test("a clean history passes every property, each with something checked", () => {
  const results = check(scenario().history, scenario().final);
  assert.equal(results.length, Object.keys(P).length);
  for (const r of results) {
    assert.ok(r.ok, `${r.name}: ${r.messages.join("\n")}`);
    assert.ok(r.checked > 0, `${r.name} checked nothing`);
  }
});

test("a lost acknowledged write is caught on the replica that lacks it", () => {
  const sc = scenario();
  for (const node of NODES) setCopy(sc.final, 1, node, ["p1:0:0", "p1:1:0"]);
  // the reads of stream 1 named the tail at byte 192, which no longer exists
  expectFailures(sc, ["acked", "reads"],
    /^stream 1: producer write chaos-p1\/0\/2 acknowledged \(#\d+ pwrite to node 2 at [0-9.]+ s answered 200\) is missing on nodes 1, 2, 3$/);
});

test("a write lost on one replica only is caught there, and as divergence", () => {
  const sc = scenario();
  setCopy(sc.final, 1, 3, ["p1:0:0", "p1:1:0"]);
  expectFailures(sc, ["acked", "converge"], /producer write chaos-p1\/0\/2 acknowledged .* is missing on node 3$/);
});

test("a duplicated write is caught with both positions", () => {
  const sc = scenario();
  for (const node of NODES) setCopy(sc.final, 1, node, ["p1:0:0", "p1:1:0", "p1:2:0", "p1:1:0"]);
  expectFailures(sc, ["acked", "integrity"],
    /^stream 1: producer write chaos-p1\/0\/1 acknowledged .* is applied 2 times on node 1 \(p1:1:0 at byte 64, p1:1:0 at byte 192\)$/);
});

test("an acknowledged offset that is not where the write is is caught", () => {
  const sc = scenario();
  sc.history.entries.find((e) => e.key === "chaos-p0/0/0").ack.start = tok(RECORD_BYTES);
  expectFailures(sc, ["acked"],
    /acknowledged Stream-Offset 0000000000000000_0000000000000064, which is byte 64 on node 1, but its record p0:0:0 is at byte 0$/);
});

test("a write answered NO_LEADER that applied is caught", () => {
  const sc = scenario();
  for (const node of NODES) setCopy(sc.final, 0, node, [...recsOf(sc.final, 0, node), "p0:1:0"]);
  expectFailures(sc, ["refused", "acked", "integrity"],
    /^stream 0: record p0:1:0 \(#1 pwrite to node 2 at [0-9.]+ s answered 503 NO_LEADER\) is applied on nodes 1 at byte 448; 2 at byte 448; 3 at byte 448$/);
});

test("a redirected append that applied is caught", () => {
  const sc = scenario();
  for (const node of NODES) setCopy(sc.final, 0, node, [...recsOf(sc.final, 0, node), "a1:3:0"]);
  expectFailures(sc, ["refused"], /^stream 0: record a1:3:0 \(#\d+ append to node 3 at [0-9.]+ s answered 307\) is applied on nodes 1 at byte \d+; 2 at/);
});

test("an OUTCOME_UNKNOWN that no retry resolved is caught", () => {
  const sc = scenario();
  sc.add({ t: "pwrite", c: "p1", s: 1, n: 2, rec: "p1:3:0", key: "chaos-p1/0/3", st: 503, code: "OUTCOME_UNKNOWN", out: "unknown", ack: null, h: { ra: "1" } });
  sc.add({ t: "pwrite", c: "p1", s: 1, n: 1, rec: "p1:3:0", key: "chaos-p1/0/3", st: 503, code: "NO_LEADER", out: "refused", ack: null, h: { ra: "1", group: "2" } });
  expectFailures(sc, ["unknown"],
    /^stream 1: producer write chaos-p1\/0\/3, answered #\d+ pwrite to node 2 at [0-9.]+ s answered 503 OUTCOME_UNKNOWN, was never resolved \(2 attempts; the last #\d+ pwrite to node 1 at [0-9.]+ s answered 503 NO_LEADER\)$/);
});

test("an OUTCOME_UNKNOWN resolved by a receipt but applied twice is caught", () => {
  const sc = scenario();
  const recs = recsOf(sc.final, 0, 1);
  for (const node of NODES) setCopy(sc.final, 0, node, [...recs, "p0:2:0"]);
  expectFailures(sc, ["acked", "integrity", "unknown"], /producer write chaos-p0\/0\/2.*is applied 2 times on node 1/);
});

test("an unknown append applied twice is caught", () => {
  const sc = scenario();
  const recs = recsOf(sc.final, 0, 1);
  for (const node of NODES) setCopy(sc.final, 0, node, [...recs, "a1:2:0"]);
  expectFailures(sc, ["unknown", "integrity"], /^stream 0: append a1:2:0 \(#\d+ append .* answered no answer \(ECONNRESET\)\) is applied 2 times on node 1$/);
});

test("a stale consistency=leader read is caught, naming the write it missed", () => {
  const sc = scenario();
  const body = sc.bytesOf(0).subarray(0, 6 * RECORD_BYTES);
  sc.add({ t: "read", c: "r0", s: 0, n: 3, cons: "leader", off: "-1", st: 200, next: tok(6 * RECORD_BYTES), utd: true, len: body.length, dig: sha256(body) });
  expectFailures(sc, ["leader"],
    /^stream 0: #\d+ read\(leader\) to node 3 at [0-9.]+ s answered 200 with Stream-Next-Offset 0000000000000000_0000000000000384 misses a1:4:0 acknowledged at [0-9.]+ s \(#12 append .*\), which ends at 0000000000000000_0000000000000448$/);
});

test("a stale consistency=leader HEAD is caught", () => {
  const sc = scenario();
  sc.add({ t: "head", c: "r0", s: 1, n: 1, cons: "leader", st: 200, next: tok(2 * RECORD_BYTES) });
  expectFailures(sc, ["leader"], /^stream 1: #\d+ head\(leader\) to node 1 .* misses p1:2:0/);
});

test("a stale consistency=leader HEAD of a /v1/stream/ stream is caught", () => {
  const sc = scenario();
  sc.add({ t: "head", c: "r0", s: 1, n: 1, v1: 1, cons: "leader", st: 200, next: tok(2 * RECORD_BYTES) });
  expectFailures(sc, ["leader"], /^stream 1: #\d+ head\(leader\) to node 1 .* misses p1:2:0 .*\(on \/v1\/stream\/\)$/);
});

test("a lagging replica's answer to a consistency=leader read is caught on both surfaces", () => {
  const sc = scenario();
  sc.add({ t: "read", c: "r0", s: 1, n: 2, v1: 1, cons: "leader", off: tok(2 * RECORD_BYTES), st: 400, code: "INVALID_OFFSET" });
  sc.add({ t: "read", c: "r0", s: 1, n: 2, cons: "leader", off: tok(2 * RECORD_BYTES), st: 416, code: "OFFSET_OUT_OF_RANGE" });
  const results = check(sc.history, sc.final);
  const answers = results.find((r) => r.name === P.answers);
  assert.equal(answers.failures, 2);
  assert.match(answers.messages.join("\n"), /read\(leader\) to node 2 .* answered 400 INVALID_OFFSET: a lagging replica answered a consistency=leader read/);
});

test("a local read that lags is no violation, one with wrong bytes is", () => {
  const sc = scenario();
  sc.add({ t: "read", c: "r2", s: 0, n: 2, cons: "local", off: "-1", st: 200, next: tok(RECORD_BYTES), utd: true, len: RECORD_BYTES, dig: sha256(sc.bytesOf(0).subarray(0, RECORD_BYTES)) });
  assert.ok(check(sc.history, sc.final).every((r) => r.ok));
  sc.add({ t: "read", c: "r2", s: 0, n: 2, cons: "local", off: "-1", st: 200, next: tok(RECORD_BYTES), utd: true, len: RECORD_BYTES, dig: sha256(Buffer.from(makeRecord(0, "a1:1:0"))) });
  expectFailures(sc, ["reads"], /^stream 0: #\d+ read\(local\) to node 2 .* returned 64 bytes \(sha256 [0-9a-f]{12}\) between -1 and 0000000000000000_0000000000000064; the final stream holds 64 bytes there/);
});

test("a read that names an offset the final stream lacks is caught", () => {
  const sc = scenario();
  sc.add({ t: "live", c: "l1", s: 1, n: 2, cons: "local", off: tok(0), st: 204, next: tok(100), utd: true });
  expectFailures(sc, ["reads"], /named Stream-Next-Offset 0000000000000000_0000000000000100, no record boundary of the final stream$/);
});

test("a replica with divergent bytes is caught at the first differing byte", () => {
  const sc = scenario();
  setCopy(sc.final, 1, 2, ["p1:0:0", "p1:2:0", "p1:1:0"]);
  expectFailures(sc, ["converge", "acked"],
    /^stream 1: node 2 holds 192 bytes \(sha256 [0-9a-f]{12}\), node 1 192 \(sha256 [0-9a-f]{12}\); first difference at byte 69: "1\|p1:2:0\|/);
});

test("a replica with divergent metadata is caught", () => {
  const sc = scenario();
  sc.final.streams[0][3].head["stream-closed"] = "true";
  expectFailures(sc, ["converge"], /^stream 0: stream-closed is "true" on node 3 but null on node 1$/);
});

test("a replica with divergent offsets is caught", () => {
  const sc = scenario();
  sc.final.streams[1][3].boundaries[2][1] = "0000000000000001_0000000000000128";
  expectFailures(sc, ["converge", "acked"], /^stream 1: the offset at byte 128 is 0000000000000001_0000000000000128 on node 3 but 0000000000000000_0000000000000128 on node 1$/);
});

test("a cluster that never converged, or a replica not read, fails convergence", () => {
  const sc = scenario();
  sc.final.converged = false;
  sc.final.note = "group 3: applied 12/12/9";
  sc.final.streams[0][2] = { error: "ECONNREFUSED" };
  expectFailures(sc, ["converge"], /^stream 0: node 2 could not be read: ECONNREFUSED$/);
  assert.ok(check(sc.history, sc.final)[0].messages.includes("the cluster did not converge after healing: group 3: applied 12/12/9"));
});

test("bytes no client sent are caught", () => {
  const sc = scenario();
  for (const node of NODES) {
    const c = sc.final.streams[1][node];
    c.bytes = Buffer.concat([c.bytes, Buffer.from("x".repeat(RECORD_BYTES))]);
    c.boundaries.push([c.bytes.length, tok(c.bytes.length)]);
  }
  expectFailures(sc, ["integrity"], /^stream 1: node 1 holds bytes no client sent at byte 192: "x{40}"$/);
});

test("answers without their documented shape are caught", () => {
  const sc = scenario();
  sc.add({ t: "pwrite", c: "p1", s: 1, n: 1, rec: "p1:3:0", key: "chaos-p1/0/3", st: 307, out: "redirected", ack: null, h: { loc: "http://x/", leader: "2", group: "1" } });
  sc.add({ t: "read", c: "r0", s: 1, n: 1, cons: "leader", off: "-1", st: 503, code: "OUTCOME_UNKNOWN", h: { ra: "1" } });
  sc.add({ t: "append", c: "a1", s: 0, n: 1, rec: "a1:9:0", st: 503, code: "NO_LEADER", out: "refused", ack: null, h: {} });
  sc.add({ t: "head", c: "r0", s: 1, n: 2, cons: "leader", st: 503, h: { ra: "1" } }); // no body, no code: fine
  sc.add({ t: "read", c: "r3", s: 1, n: 2, cons: "local", off: tok(64), st: 416, code: "OFFSET_OUT_OF_RANGE" }); // a lagging replica: fine
  sc.add({ t: "live", c: "l3", s: 1, n: 2, cons: "local", off: "-1", st: 404, code: "STREAM_NOT_FOUND" }); // the same, before the create
  sc.add({ t: "head", c: "r0", s: 1, n: 3, cons: "leader", st: 503, h: {} });
  sc.add({ t: "read", c: "r0", s: 1, n: 3, cons: "leader", off: tok(64), st: 416, code: "OFFSET_OUT_OF_RANGE" });
  const results = expectFailures(sc, ["answers"], /pwrite to node 1 .* answered 307 with x-ursula-raft-leader-id 2, -group 1, -term -: neither all three nor the group alone$/);
  const messages = results.find((r) => r.name === P.answers).messages;
  assert.ok(messages.some((m) => /read\(leader\) .* answered 503 OUTCOME_UNKNOWN: a read proposes nothing$/.test(m)), messages.join("\n"));
  assert.ok(messages.some((m) => /append .* answered 503 NO_LEADER without Retry-After$/.test(m)), messages.join("\n"));
  assert.ok(messages.some((m) => /head\(leader\) to node 3 .* answered 503 without Retry-After$/.test(m)), messages.join("\n"));
  assert.ok(messages.some((m) => /read\(leader\) to node 3 .* answered 416 OFFSET_OUT_OF_RANGE: a lagging replica answered a consistency=leader read$/.test(m)), messages.join("\n"));
  assert.equal(messages.length, 5, messages.join("\n"));
});

test("an empty run fails instead of passing vacuously", () => {
  const results = check({ entries: [], events: [] }, { converged: true, nodes: NODES, streams: {} });
  const failed = results.filter((r) => !r.ok).map((r) => r.name).sort();
  assert.deepEqual(failed, [P.converge, P.acked, P.leader].sort());
});

test("records parse back, and garbage is told apart", () => {
  const rec = makeRecord(7, "p12:345:6");
  assert.equal(rec.length, RECORD_BYTES);
  const buf = Buffer.from(rec + rec.replace("p12", "q12") + "short", "latin1");
  const { records, garbage } = parseRecords(buf);
  assert.deepEqual(records, [{ pos: 0, stream: 7, id: "p12:345:6" }]);
  assert.deepEqual(garbage.map((g) => g.pos), [64, 128]);
});

test("answers are read as extensions §11.1 says", () => {
  const receipt = { "stream-offset": tok(0), "stream-next-offset": tok(64) };
  assert.deepEqual(classifyWrite("pwrite", 200, receipt), { outcome: "applied", ack: { start: tok(0), end: tok(64) } });
  assert.deepEqual(classifyWrite("pwrite", 204, receipt), { outcome: "repeat", ack: { start: tok(0), end: tok(64) } });
  assert.equal(classifyWrite("pwrite", 204, { "producer-outcome": "receipt-evicted" }).outcome, "repeat");
  assert.equal(classifyWrite("pwrite", 200, {}).outcome, "unknown");
  assert.deepEqual(classifyWrite("append", 204, { "stream-next-offset": tok(64) }), { outcome: "applied", ack: { end: tok(64) } });
  assert.equal(classifyWrite("append", 307, {}).outcome, "redirected");
  assert.equal(classifyWrite("append", 503, {}, "NO_LEADER").outcome, "refused");
  assert.equal(classifyWrite("append", 503, {}, "OUTCOME_UNKNOWN").outcome, "unknown");
  assert.equal(classifyWrite("append", 503, {}, "SOMETHING_NEW").outcome, "unknown");
  assert.equal(classifyWrite("append", 500, {}, "INTERNAL").outcome, "unknown");
  assert.equal(classifyWrite("append", 408, {}, null).outcome, "unknown");
  assert.equal(classifyWrite("append", 409, {}, "STREAM_CLOSED").outcome, "refused");
  assert.equal(classifyWrite("append", null).outcome, "unknown");
});

test("the final state is read only once every replica applied the leader's commit index", () => {
  const view = (node, leader, commit, applied) => ({
    node_id: node,
    groups: [{ group: 0, leader, term: 3, commit_index: commit, replicas: [1, 2, 3].map((n) => ({ node: n, applied_index: applied[n - 1], lag: 0 })) }],
  });
  const ids = [1, 2, 3];
  assert.equal(convergenceGap([view(1, 2, 9, [9, 9, 9]), view(2, 2, 9, [9, 9, 9]), view(3, 2, 9, [9, 9, 9])], 1, ids), "");
  assert.equal(convergenceGap([view(1, 2, 9, [9, 9, 9]), null, view(3, 2, 9, [9, 9, 9])], 1, ids), "node(s) 2 did not answer /__runnel/cluster");
  assert.equal(convergenceGap([view(1, 2, 9, [9, 9, 9]), view(2, 2, 9, [9, 9, 9]), view(3, null, 9, [9, 9, 9])], 1, ids), "group 0: leaders 2/2/null");
  // node 3 reports itself behind; what the leader believes of it does not count
  assert.equal(convergenceGap([view(1, 2, 9, [9, 9, 9]), view(2, 2, 9, [9, 9, 9]), view(3, 2, 9, [9, 9, 7])], 1, ids),
    "group 0: node 3 applied 7, leader 2 committed 9");
  assert.equal(convergenceGap([view(1, 2, 9, [9, 9, 9]), view(2, 2, 9, [9, 9, 4]), view(3, 2, 9, [9, 9, 9])], 1, ids), "");
  assert.equal(convergenceGap([view(1, 2, 9, [9, 9, 9]), view(2, 2, 9, [9, 9, 9]), view(3, 2, 9, [9, 9, 9])], 2, ids), "group 1 missing from a node's view");
});
