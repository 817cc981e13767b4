// The chaos checker: judges a run's history (history.mjs) against the
// final state of every replica after healing (final_state.mjs). Pure: no
// I/O, so its self-tests (checker.test.mjs) feed it synthetic histories.
//
// Final state: {converged, note, nodes: [ids], streams: {[s]: {[node]:
// {bytes: Buffer, boundaries: [[pos, token], ...], head: {name: value},
// error: string|null}}}}, where boundaries are the offset tokens the node
// answered at each record boundary of its walk (pos 0 = the first token).
//
// Each property answers {name, ok, checked, failures, messages, known}; a
// property that found nothing to check where the run must produce
// something (acknowledged writes, leader reads, streams) fails. `known`
// lists violations of a known bug, tied to its issue, that do not fail the
// property but are reported (none today).
import crypto from "node:crypto";
import { describe, seconds } from "./history.mjs";
import { RECORD_BYTES, parseRecords } from "./records.mjs";

const WRITES = new Set(["pwrite", "append"]);
const READS = new Set(["read", "head", "live"]);
const ACKED = new Set(["applied", "repeat"]);
const REFUSED = new Set(["refused", "redirected"]);
const sha256 = (buf) => crypto.createHash("sha256").update(buf).digest("hex");

class Property {
  constructor(name, maxMessages) {
    Object.assign(this, { name, maxMessages, checked: 0, failures: 0, messages: [], known: [] });
  }

  fail(message) {
    this.failures++;
    if (this.messages.length < this.maxMessages) this.messages.push(message);
  }

  // A violation of a known bug (issue: its number and title): reported,
  // not failed.
  knownFailure(issue, message) {
    let k = this.known.find((x) => x.issue === issue);
    if (!k) this.known.push((k = { issue, count: 0, messages: [] }));
    k.count++;
    if (k.messages.length < this.maxMessages) k.messages.push(message);
  }

  result(requireChecked = null) {
    if (requireChecked && this.checked === 0) this.fail(requireChecked);
    const { name, checked, failures, messages, known } = this;
    return { name, ok: failures === 0, checked, failures, messages, known };
  }
}

// One replica's copy of one stream, indexed.
function indexReplica(copy) {
  const tokenPos = new Map();
  for (const [pos, token] of copy.boundaries) tokenPos.set(token, pos);
  const { records, garbage } = parseRecords(copy.bytes);
  const positions = new Map(); // record id -> [pos]
  for (const r of records) {
    if (!positions.has(r.id)) positions.set(r.id, []);
    positions.get(r.id).push(r.pos);
  }
  return { ...copy, tokenPos, records, garbage, positions, digest: sha256(copy.bytes) };
}

function buildContext(history, final) {
  const streams = new Map(); // s -> {replicas: Map(node -> index), ref}
  for (const [s, copies] of Object.entries(final.streams ?? {})) {
    const replicas = new Map();
    for (const node of final.nodes) {
      const copy = copies[node];
      if (copy && !copy.error) replicas.set(node, indexReplica(copy));
    }
    streams.set(Number(s), { replicas, copies, ref: replicas.values().next().value ?? null });
  }
  const byRecord = new Map(); // "s|rec" -> [entries]
  const byKey = new Map(); // "s|key" -> {entries, recs}
  for (const e of history.entries) {
    if (!WRITES.has(e.t)) continue;
    const rk = `${e.s}|${e.rec}`;
    if (!byRecord.has(rk)) byRecord.set(rk, []);
    byRecord.get(rk).push(e);
    if (e.t === "pwrite") {
      const kk = `${e.s}|${e.key}`;
      if (!byKey.has(kk)) byKey.set(kk, { s: e.s, key: e.key, entries: [], recs: new Set() });
      const k = byKey.get(kk);
      k.entries.push(e);
      k.recs.add(e.rec);
    }
  }
  return { history, final, streams, byRecord, byKey };
}

const where = (replica, token) => {
  const pos = replica.tokenPos.get(token);
  return pos === undefined ? "no record boundary" : `byte ${pos}`;
};

// Replicas hold identical bytes, offsets and metadata, after the cluster
// showed equal applied indexes.
function converge(ctx, max) {
  const p = new Property("replicas converge to identical bytes, offsets and metadata", max);
  if (!ctx.final.converged) p.fail(`the cluster did not converge after healing: ${ctx.final.note ?? "?"}`);
  for (const [s, { replicas, copies, ref }] of ctx.streams) {
    for (const node of ctx.final.nodes) {
      p.checked++;
      const copy = copies[node];
      if (!copy) p.fail(`stream ${s}: node ${node} was not read`);
      else if (copy.error) p.fail(`stream ${s}: node ${node} could not be read: ${copy.error}`);
    }
    if (!ref) continue;
    for (const [node, r] of replicas) {
      if (r === ref) continue;
      const refNode = [...replicas.keys()][0];
      if (r.digest !== ref.digest) {
        let at = 0;
        while (at < r.bytes.length && at < ref.bytes.length && r.bytes[at] === ref.bytes[at]) at++;
        const slot = (b) => JSON.stringify(b.subarray(at - (at % RECORD_BYTES), at - (at % RECORD_BYTES) + 24).toString("latin1"));
        p.fail(`stream ${s}: node ${node} holds ${r.bytes.length} bytes (sha256 ${r.digest.slice(0, 12)}), ` +
          `node ${refNode} ${ref.bytes.length} (sha256 ${ref.digest.slice(0, 12)}); first difference at byte ${at}: ` +
          `${slot(r.bytes)} vs ${slot(ref.bytes)}`);
      }
      const tokens = new Map(r.boundaries);
      for (const [pos, token] of ref.boundaries) {
        if (tokens.has(pos) && tokens.get(pos) !== token) {
          p.fail(`stream ${s}: the offset at byte ${pos} is ${tokens.get(pos)} on node ${node} but ${token} on node ${refNode}`);
          break;
        }
      }
      const names = new Set([...Object.keys(r.head), ...Object.keys(ref.head)]);
      for (const name of [...names].sort()) {
        if (r.head[name] !== ref.head[name])
          p.fail(`stream ${s}: ${name} is ${JSON.stringify(r.head[name] ?? null)} on node ${node} but ` +
            `${JSON.stringify(ref.head[name] ?? null)} on node ${refNode}`);
      }
    }
  }
  return p.result("no stream was read: nothing checked");
}

// Every acknowledged write is present exactly once, at the offsets its
// answer named, on every replica.
function acknowledged(ctx, max) {
  const p = new Property("acknowledged writes present exactly once at their offsets on every replica", max);
  const checkOne = (s, label, recs, acks) => {
    p.checked++;
    const stream = ctx.streams.get(s);
    if (!stream) return p.fail(`stream ${s}: ${label} acknowledged (${describe(acks[0])}) but the stream was not read`);
    const missing = [];
    for (const [node, r] of stream.replicas) {
      const found = [];
      for (const rec of recs) for (const pos of r.positions.get(rec) ?? []) found.push({ rec, pos });
      if (found.length === 0) {
        missing.push(node);
        continue;
      }
      if (found.length > 1) {
        p.fail(`stream ${s}: ${label} acknowledged (${describe(acks[0])}) is applied ${found.length} times on node ` +
          `${node} (${found.map((f) => `${f.rec} at byte ${f.pos}`).join(", ")})`);
        continue;
      }
      const { rec, pos } = found[0];
      for (const a of acks) {
        if (!a.ack) continue;
        if (a.ack.start !== undefined && r.tokenPos.get(a.ack.start) !== pos)
          p.fail(`stream ${s}: ${label}: ${describe(a)} acknowledged Stream-Offset ${a.ack.start}, which is ` +
            `${where(r, a.ack.start)} on node ${node}, but its record ${rec} is at byte ${pos}`);
        if (a.ack.end !== undefined && r.tokenPos.get(a.ack.end) !== pos + RECORD_BYTES)
          p.fail(`stream ${s}: ${label}: ${describe(a)} acknowledged Stream-Next-Offset ${a.ack.end}, which is ` +
            `${where(r, a.ack.end)} on node ${node}, but its record ${rec} ends at byte ${pos + RECORD_BYTES}`);
      }
    }
    if (missing.length)
      p.fail(`stream ${s}: ${label} acknowledged (${describe(acks[0])}) is missing on node${missing.length > 1 ? "s" : ""} ${missing.join(", ")}`);
  };
  for (const k of ctx.byKey.values()) {
    const acks = k.entries.filter((e) => ACKED.has(e.out));
    if (acks.length) checkOne(k.s, `producer write ${k.key}`, k.recs, acks);
  }
  for (const entries of ctx.byRecord.values()) {
    const acks = entries.filter((e) => e.t === "append" && ACKED.has(e.out));
    if (acks.length) checkOne(acks[0].s, `append ${acks[0].rec}`, [acks[0].rec], acks);
  }
  return p.result("no write was acknowledged: nothing checked");
}

// A body every attempt of which was refused (NO_LEADER, 307, another
// refusal §11.1 names) is on no replica.
function refusedNotApplied(ctx, max) {
  const p = new Property("writes answered NO_LEADER, redirected or refused are not applied", max);
  for (const entries of ctx.byRecord.values()) {
    if (!entries.every((e) => REFUSED.has(e.out))) continue;
    p.checked++;
    const { s, rec } = entries[0];
    const stream = ctx.streams.get(s);
    if (!stream) continue;
    const on = [...stream.replicas].filter(([, r]) => r.positions.has(rec));
    if (on.length)
      p.fail(`stream ${s}: record ${rec} (${entries.map(describe).join("; ")}) is applied on node${on.length > 1 ? "s" : ""} ` +
        `${on.map(([node, r]) => `${node} at byte ${r.positions.get(rec).join(", ")}`).join("; ")}`);
  }
  return p.result();
}

// Every producer write whose outcome was unknown was resolved by a retry
// with its key to a receipt, and applied exactly once; an unknown append
// (no key: not retried) applied at most once.
function unknownsResolved(ctx, max) {
  const p = new Property("OUTCOME_UNKNOWN writes resolved by a producer retry to exactly one apply", max);
  for (const k of ctx.byKey.values()) {
    const unknown = k.entries.find((e) => e.out === "unknown");
    if (!unknown) continue;
    p.checked++;
    if (!k.entries.some((e) => ACKED.has(e.out))) {
      const last = k.entries[k.entries.length - 1];
      p.fail(`stream ${k.s}: producer write ${k.key}, answered ${describe(unknown)}, was never resolved ` +
        `(${k.entries.length} attempts; the last ${describe(last)})`);
      continue;
    }
    const stream = ctx.streams.get(k.s);
    for (const [node, r] of stream?.replicas ?? []) {
      const n = [...k.recs].reduce((sum, rec) => sum + (r.positions.get(rec)?.length ?? 0), 0);
      if (n !== 1)
        p.fail(`stream ${k.s}: producer write ${k.key}, answered ${describe(unknown)} and resolved by a receipt, ` +
          `is applied ${n} times on node ${node}`);
    }
  }
  for (const entries of ctx.byRecord.values()) {
    const e = entries[0];
    if (e.t !== "append" || !entries.every((x) => x.out === "unknown")) continue;
    p.checked++;
    for (const [node, r] of ctx.streams.get(e.s)?.replicas ?? []) {
      const n = r.positions.get(e.rec)?.length ?? 0;
      if (n > 1) p.fail(`stream ${e.s}: append ${e.rec} (${describe(e)}) is applied ${n} times on node ${node}`);
    }
  }
  return p.result();
}

// Every consistency=leader read that answered the stream's tail (a GET
// with Stream-Up-To-Date, a HEAD) reflects every write acknowledged before
// the read was sent: its Stream-Next-Offset is at or past their ends
// (offsets sort as strings, PROTOCOL.md §8).
function leaderReads(ctx, max) {
  const p = new Property("consistency=leader reads reflect every write acknowledged before them", max);
  const acks = new Map(); // s -> [{done, best}] by done; best: the ack with the highest end so far
  for (const e of ctx.history.entries) {
    if (!WRITES.has(e.t) || !ACKED.has(e.out) || !e.ack?.end) continue;
    if (!acks.has(e.s)) acks.set(e.s, []);
    acks.get(e.s).push({ done: e.done, e });
  }
  for (const list of acks.values()) {
    list.sort((a, b) => a.done - b.done);
    let best = null;
    for (const a of list) a.best = best = !best || a.e.ack.end > best.ack.end ? a.e : best;
  }
  for (const r of ctx.history.entries) {
    if (r.cons !== "leader" || r.st !== 200 || !(r.t === "head" || (r.t === "read" && r.utd))) continue;
    p.checked++;
    const list = acks.get(r.s) ?? [];
    let lo = 0;
    let hi = list.length; // first ack with done >= sent
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (list[mid].done < r.sent) lo = mid + 1;
      else hi = mid;
    }
    const w = lo > 0 ? list[lo - 1].best : null;
    if (w && !(r.next >= w.ack.end)) {
      const m = `stream ${r.s}: ${describe(r)} with Stream-Next-Offset ${r.next ?? "(none)"} misses ${w.rec} ` +
        `acknowledged at ${seconds(w.done)} s (${describe(w)}), which ends at ${w.ack.end}`;
      p.fail(r.v1 ? `${m} (on /v1/stream/)` : m);
    }
  }
  return p.result("no consistency=leader read answered the stream's tail: nothing checked");
}

// Every read's bytes are the final stream's bytes between the offsets it
// named, and every Stream-Next-Offset is a record boundary of it.
function readsMatchHistory(ctx, max) {
  const p = new Property("reads return the final history's bytes between their offsets", max);
  for (const r of ctx.history.entries) {
    if (!READS.has(r.t) || !(r.st === 200 || (r.t === "live" && r.st === 204))) continue;
    const ref = ctx.streams.get(r.s)?.ref;
    if (!ref) continue;
    p.checked++;
    const end = r.next === undefined ? undefined : ref.tokenPos.get(r.next);
    if (end === undefined) {
      p.fail(`stream ${r.s}: ${describe(r)} named Stream-Next-Offset ${r.next ?? "(none)"}, no record boundary of the final stream`);
      continue;
    }
    if (r.t === "head" || r.st === 204) continue;
    const start = r.off === "-1" ? 0 : ref.tokenPos.get(r.off);
    if (start === undefined || start > end) {
      p.fail(`stream ${r.s}: ${describe(r)} read from ${r.off}, ${start === undefined ? "no record boundary" : "past its end"} of the final stream`);
      continue;
    }
    const want = ref.bytes.subarray(start, end);
    if (want.length !== r.len || sha256(want) !== r.dig)
      p.fail(`stream ${r.s}: ${describe(r)} returned ${r.len} bytes (sha256 ${String(r.dig).slice(0, 12)}) between ` +
        `${r.off} and ${r.next}; the final stream holds ${want.length} bytes there (sha256 ${sha256(want).slice(0, 12)})`);
  }
  return p.result();
}

// Streams hold whole records only, each sent to that stream by some
// attempt, none twice, and at most one body per producer key.
function integrity(ctx, max) {
  const p = new Property("streams hold only records the clients sent, none applied twice", max);
  const keyOf = new Map(); // "s|rec" -> key
  for (const k of ctx.byKey.values()) for (const rec of k.recs) keyOf.set(`${k.s}|${rec}`, k.key);
  for (const [s, { replicas }] of ctx.streams) {
    for (const [node, r] of replicas) {
      for (const g of r.garbage) p.fail(`stream ${s}: node ${node} holds bytes no client sent at byte ${g.pos}: ${JSON.stringify(g.text.slice(0, 40))}`);
      const keysSeen = new Map();
      for (const rec of r.records) {
        p.checked++;
        if (rec.stream !== s) p.fail(`stream ${s}: node ${node} holds record ${rec.id} of stream ${rec.stream} at byte ${rec.pos}`);
        else if (!ctx.byRecord.has(`${s}|${rec.id}`)) p.fail(`stream ${s}: node ${node} holds record ${rec.id}, which no request sent, at byte ${rec.pos}`);
        const at = r.positions.get(rec.id);
        if (at.length > 1 && at[0] === rec.pos) p.fail(`stream ${s}: record ${rec.id} is applied ${at.length} times on node ${node} (bytes ${at.join(", ")})`);
        const key = keyOf.get(`${s}|${rec.id}`);
        if (key && keysSeen.has(key) && keysSeen.get(key) !== rec.id)
          p.fail(`stream ${s}: producer write ${key} is applied with two bodies on node ${node}: ${keysSeen.get(key)} and ${rec.id}`);
        if (key) keysSeen.set(key, rec.id);
      }
    }
  }
  return p.result();
}

// A read answered as a replica that lags answers it: 416
// OFFSET_OUT_OF_RANGE (behind an offset it served before a restart; 400
// INVALID_OFFSET on /v1/stream/, the base protocol's answer) or 404
// STREAM_NOT_FOUND (behind the create). A HEAD has no code to tell.
const laggingAnswer = (e) => (e.st === 416 && e.code === "OFFSET_OUT_OF_RANGE") ||
  (e.v1 && e.st === 400 && e.code === "INVALID_OFFSET") || (e.st === 404 && e.code === "STREAM_NOT_FOUND") ||
  (e.t === "head" && (e.st === 416 || e.st === 404));
// A local read may lag (§9.2).
export const lagging = (e) => e.cons === "local" && laggingAnswer(e);

// Answers have the shapes the documents give: a 307 with Location and the
// leader, group and term (or the group alone); a 503 with its error code
// (a HEAD, which has no body, with Retry-After), and with Retry-After for
// NO_LEADER and OUTCOME_UNKNOWN; a 2xx write with its typed answer; no
// read answered OUTCOME_UNKNOWN; no 4xx to the workload's valid requests
// (an existing stream, a sequential producer), except local reads a
// lagging replica refuses (lagging above).
function answerShapes(ctx, max) {
  const p = new Property("answers have the documented shapes (§5.7, §9.2, §11)", max);
  for (const e of ctx.history.entries) {
    if (e.st === null || e.st === undefined) continue;
    p.checked++;
    const h = e.h ?? {};
    if (e.st === 307) {
      const full = h.leader && h.group && h.term;
      const groupOnly = h.group && !h.leader && !h.term;
      if (!h.loc) p.fail(`${describe(e)} without Location`);
      if (!full && !groupOnly)
        p.fail(`${describe(e)} with x-ursula-raft-leader-id ${h.leader ?? "-"}, -group ${h.group ?? "-"}, -term ${h.term ?? "-"}: ` +
          "neither all three nor the group alone");
    } else if (e.st === 503) {
      // an answer to HEAD has no body, so no code (§11); its 503 still carries Retry-After (§9.2)
      if (e.t === "head" ? !h.ra : !e.code) p.fail(`${describe(e)} without ${e.t === "head" ? "Retry-After" : "an error code"}`);
      if ((e.code === "NO_LEADER" || e.code === "OUTCOME_UNKNOWN") && !h.ra) p.fail(`${describe(e)} without Retry-After`);
      if (READS.has(e.t) && e.code === "OUTCOME_UNKNOWN") p.fail(`${describe(e)}: a read proposes nothing`);
    } else if (lagging(e)) {
      // a replica behind the offset, or the create, local reads may lag (§9.2)
    } else if (e.cons === "leader" && laggingAnswer(e)) {
      p.fail(`stream ${e.s}: ${describe(e)}: a lagging replica answered a consistency=leader read`);
    } else if (e.st >= 400 && e.st < 500) {
      p.fail(`stream ${e.s}: ${describe(e)}: the workload sends only valid requests`);
    } else if (e.st >= 200 && e.st < 300 && WRITES.has(e.t) && e.out === "unknown") {
      p.fail(`stream ${e.s}: ${describe(e)} without its typed answer (§11.1)`);
    }
  }
  return p.result();
}

export const PROPERTY_CHECKS = [converge, acknowledged, refusedNotApplied, unknownsResolved, leaderReads,
  readsMatchHistory, integrity, answerShapes];

// Runs every property. Returns [{name, ok, checked, failures, messages}].
export function check(history, final, { maxMessages = 20 } = {}) {
  const ctx = buildContext(history, final);
  return PROPERTY_CHECKS.map((f) => f(ctx, maxMessages));
}
