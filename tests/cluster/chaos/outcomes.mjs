// How the harness reads an answer to a write (extensions.txt §11.1): one of
// applied, repeat, refused, redirected or unknown. The checker and the
// workload both rely on this one reading.

// 408/5xx codes that prove nothing of the write applied (§11.1 table).
export const REFUSAL_CODES = new Set([
  "BODY_TOO_SLOW", "NO_COLD_STORE", "NO_LEADER", "WAL_DISK_PRESSURE", "RAFT_LOG_PRESSURE",
  "INGRESS_BODY_BYTES_LIMIT_REACHED", "COLD_BACKPRESSURE", "RAFT_UNCOMMITTED_BACKPRESSURE",
  "APPLY_STOPPED", "GROUP_RESTARTING", "HISTORY_PENDING", "JSON_BOUNDARY_UNVERIFIED",
  "SNAPSHOT_COMMITS_BUSY", "AUTHENTICATION_UNAVAILABLE", "AUTHORIZATION_UNAVAILABLE",
  "NO_UPSTREAM", "UPSTREAM_UNREACHABLE", "UPLOAD_BUDGET_EXHAUSTED",
]);

// The receipt of a producer write (§5.3): {start, end} or null.
export function receiptOf(status, headers) {
  const start = headers["stream-offset"];
  const end = headers["stream-next-offset"];
  if ((status === 200 || status === 204) && start && end) return { start, end };
  return null;
}

// Classifies one answer. `kind` is "pwrite" (producer headers), "append"
// (no producer headers) or "create". A network error or timeout has
// status null. Returns {outcome, ack}: ack is {start?, end?} for applied
// and repeat (start only from a producer receipt; null for a
// receipt-evicted repeat).
export function classifyWrite(kind, status, headers = {}, code = null) {
  if (status === null || status === undefined) return { outcome: "unknown", ack: null };
  if (status >= 200 && status < 300) {
    if (kind === "pwrite") {
      const receipt = receiptOf(status, headers);
      if (receipt) return { outcome: status === 200 ? "applied" : "repeat", ack: receipt };
      if (status === 204 && /^receipt-evicted/.test(headers["producer-outcome"] ?? ""))
        return { outcome: "repeat", ack: null };
      return { outcome: "unknown", ack: null }; // a 2xx without its typed answer
    }
    if (kind === "append" && headers["stream-next-offset"])
      return { outcome: "applied", ack: { end: headers["stream-next-offset"] } };
    if (kind === "create" && (headers["stream-incarnation"] || headers["stream-next-offset"]))
      return { outcome: "applied", ack: null };
    return { outcome: "unknown", ack: null };
  }
  if (status === 307 || status === 308) return { outcome: "redirected", ack: null };
  if (status >= 400 && status < 500 && status !== 408) return { outcome: "refused", ack: null };
  if ((status === 408 || status >= 500) && REFUSAL_CODES.has(code)) return { outcome: "refused", ack: null };
  return { outcome: "unknown", ack: null };
}
