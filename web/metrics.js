// metrics.js: the server's Prometheus text (/__runnel/metrics) read into
// numbers, and the rates the console charts: appends a second, bytes in and
// out a second, the p99 of the log's sync time over the interval, and the
// live readers now.

// name{labels} -> value; histogram buckets keep their le.
export function parse(text) {
  const values = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)/.exec(line);
    if (m) values.set(m[1] + (m[2] ?? ""), Number(m[3]));
  }
  return values;
}

function sum(values, name) {
  let total = 0;
  for (const [k, v] of values) if (k === name || k.startsWith(`${name}{`)) total += v;
  return total;
}

// The histogram's buckets as [le, cumulative count], in order.
function buckets(values, name) {
  const out = [];
  for (const [k, v] of values) {
    const m = new RegExp(`^${name}_bucket\\{le="([^"]+)"\\}$`).exec(k);
    if (m) out.push([m[1] === "+Inf" ? Infinity : Number(m[1]), v]);
  }
  return out.sort((a, b) => a[0] - b[0]);
}

// The p99 (seconds) of a histogram's observations between two scrapes:
// the smallest bucket bound holding 99 % of them; null without any.
function p99(prev, cur, name) {
  const a = buckets(prev, name), b = buckets(cur, name);
  if (!b.length || a.length !== b.length) return null;
  const total = b[b.length - 1][1] - a[a.length - 1][1];
  if (total <= 0) return null;
  for (let i = 0; i < b.length; i++)
    if (b[i][1] - a[i][1] >= 0.99 * total) return Number.isFinite(b[i][0]) ? b[i][0] : b[Math.max(0, i - 1)][0];
  return null;
}

// The rates between two scrapes taken dt seconds apart.
export function rates(prev, cur, dt) {
  const rate = (n) => Math.max(0, (sum(cur, n) - sum(prev, n)) / dt);
  return {
    appends: rate("runnel_appends_total"),
    bytesIn: rate("runnel_append_bytes_total"),
    bytesOut: rate("runnel_read_bytes_total") + rate("runnel_sse_bytes_total"),
    p99ms: (() => {
      const s = p99(prev, cur, "runnel_wal_sync_seconds") ?? p99(prev, cur, "runnel_cluster_proposal_seconds");
      return s === null ? null : s * 1000;
    })(),
    liveReaders: sum(cur, "runnel_live_readers"),
  };
}
