// The figures a chaos run prints beside the checker's verdict: faults by
// kind, writes and what they were answered, reads, leader changes, and
// recovery times (after each fault, how long until every stream had a
// write acknowledged again that was sent after the fault).
import { lagging } from "./checker.mjs";

const WRITES = new Set(["pwrite", "append"]);

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const ms = (x) => (Number.isFinite(x) ? `${(x / 1000).toFixed(2)} s` : "never");

// Per stream: acknowledged writes by send time, with the earliest answer
// among those sent at or after each one (a suffix minimum).
function ackIndex(entries) {
  const by = new Map();
  for (const e of entries) {
    if (!WRITES.has(e.t) || !(e.out === "applied" || e.out === "repeat")) continue;
    if (!by.has(e.s)) by.set(e.s, []);
    by.get(e.s).push({ sent: e.sent, done: e.done });
  }
  for (const list of by.values()) {
    list.sort((a, b) => a.sent - b.sent);
    let min = Infinity;
    for (let k = list.length - 1; k >= 0; k--) list[k].minDone = min = Math.min(min, list[k].done);
  }
  return by;
}

// Time from `at` until every stream that took writes had one sent at or
// after `at` acknowledged (Infinity if one never did).
function recoveryAfter(index, at) {
  let worst = 0;
  for (const list of index.values()) {
    let lo = 0;
    let hi = list.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (list[mid].sent < at) lo = mid + 1;
      else hi = mid;
    }
    worst = Math.max(worst, lo < list.length ? list[lo].minDone - at : Infinity);
  }
  return worst;
}

export function figures(history, { leaderChanges = 0, durationMs = 0 } = {}) {
  const f = { faults: history.events.length, byKind: {}, writes: 0, keys: new Set(), acks: 0, unknowns: 0,
    outcomeUnknown: 0, noLeader: 0, redirects: 0, networkErrors: 0, leaderReads: 0, localReads: 0, liveReads: 0, lagging: 0,
    leaderChanges, durationMs };
  for (const e of history.entries) {
    if (WRITES.has(e.t)) {
      f.writes++;
      if (e.key) f.keys.add(e.key);
      if (e.out === "applied" || e.out === "repeat") f.acks++;
      if (e.out === "unknown") f.unknowns++;
    }
    if (e.code === "OUTCOME_UNKNOWN") f.outcomeUnknown++;
    if (e.code === "NO_LEADER") f.noLeader++;
    if (e.st === 307) f.redirects++;
    if (e.st === null) f.networkErrors++;
    if (lagging(e)) f.lagging++;
    if (e.st === 200 || e.st === 204) {
      if (e.t === "live") f.liveReads++;
      else if ((e.t === "read" || e.t === "head") && e.c !== "setup") e.cons === "leader" ? f.leaderReads++ : f.localReads++;
    }
  }
  const index = ackIndex(history.entries);
  for (const ev of history.events) {
    const k = (f.byKind[ev.kind] ??= { count: 0, recovery: [] });
    k.count++;
    k.recovery.push(recoveryAfter(index, ev.at));
  }
  return f;
}

export function formatFigures(f) {
  const lines = [];
  lines.push(`duration ${(f.durationMs / 1000).toFixed(0)} s; faults ${f.faults} (` +
    Object.entries(f.byKind).map(([k, v]) => `${k} ${v.count}`).join(", ") + ")");
  lines.push(`writes ${f.writes} attempts (${f.keys.size} producer keys), acks ${f.acks}, unknowns ${f.unknowns} ` +
    `(OUTCOME_UNKNOWN ${f.outcomeUnknown}), NO_LEADER ${f.noLeader}, redirects ${f.redirects}, network errors/timeouts ${f.networkErrors}`);
  lines.push(`reads answered: consistency=leader ${f.leaderReads}, consistency=local ${f.localReads}, live ${f.liveReads}; ` +
    `refused by a lagging replica ${f.lagging}`);
  lines.push(`leader changes observed ${f.leaderChanges}`);
  for (const [kind, v] of Object.entries(f.byKind)) {
    const r = [...v.recovery].sort((a, b) => a - b);
    lines.push(`recovery after ${kind} (every stream acknowledging again): median ${ms(quantile(r, 0.5))}, ` +
      `p90 ${ms(quantile(r, 0.9))}, max ${ms(r[r.length - 1])} (n=${r.length})`);
  }
  return lines;
}
