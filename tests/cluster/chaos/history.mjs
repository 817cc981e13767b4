// The history of a chaos run: one entry per HTTP request the workload sent
// (send and answer times, status, error code, what was acknowledged) and
// one per nemesis event. The checker reads only this and the final state.
//
// Entry fields (all requests):
//   i       sequence number           t     "create" | "pwrite" | "append" |
//   c       client name ("p3", "a1")          "read" | "head" | "live"
//   s       stream index              n     node id the request went to
//   sent    ms since the run started  done  ms when the answer (or error) came
//   st      HTTP status, null for a network error or timeout
//   code    the extensions §11 error code of the body, or null
//   err     the network error, or null
//   h       routing headers: loc (Location), leader, group, term
//           (x-ursula-raft-*), ra (Retry-After), pout (Producer-Outcome)
// Writes (pwrite, append, create):
//   rec     the record id the body carries (records.mjs)
//   key     producer key "<Producer-Id>/<epoch>/<seq>" (pwrite)
//   out     applied | repeat | refused | redirected | unknown (outcomes.mjs)
//   ack     {start?, end?} offsets acknowledged, or null
// Reads (read = catch-up GET, head = HEAD, live = long-poll GET):
//   cons    "leader" | "local"        off   the offset requested
//   next    Stream-Next-Offset        utd   Stream-Up-To-Date: true
//   len,dig the body's length and sha256 (hex) (GET)
//
// Nemesis events: {kind, nodes, group, at, healed, note}.
import fs from "node:fs";
import { performance } from "node:perf_hooks";

export class History {
  constructor() {
    this.origin = performance.now();
    this.entries = [];
    this.events = [];
  }

  // Milliseconds since the run started (monotonic).
  now() {
    return performance.now() - this.origin;
  }

  add(entry) {
    entry.i = this.entries.length;
    this.entries.push(entry);
    return entry;
  }

  event(e) {
    this.events.push(e);
    return e;
  }

  // Writes the history as JSON lines (entries, then events) for a look
  // after the run.
  save(file) {
    const fd = fs.openSync(file, "w");
    try {
      for (const e of this.entries) fs.writeSync(fd, JSON.stringify(e) + "\n");
      for (const e of this.events) fs.writeSync(fd, JSON.stringify({ event: e }) + "\n");
    } finally {
      fs.closeSync(fd);
    }
  }
}

export const seconds = (ms) => (ms / 1000).toFixed(3);

// A request in a message: "#12 pwrite to node 2 at 3.456 s answered 503 NO_LEADER".
export function describe(e) {
  const answer = e.st === null || e.st === undefined ? `no answer (${e.err ?? "?"})` : `${e.st}${e.code ? " " + e.code : ""}`;
  return `#${e.i} ${e.t}${e.cons ? "(" + e.cons + ")" : ""} to node ${e.n} at ${seconds(e.sent)} s answered ${answer}`;
}
