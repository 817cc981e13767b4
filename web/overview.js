// overview.js: the overview: the node's health, version and uptime, the
// cluster's nodes, groups, leaders and replica lag (when the node is one of
// a cluster), and live charts from /__runnel/metrics every 2 s.

import { admin, bytes, duration, el, fetchText, headers, table } from "./api.js";
import { Chart } from "./chart.js";
import { parse, rates } from "./metrics.js";

const EVERY_MS = 2000;

function card(k, v, id) {
  return el("div", { class: "card" }, el("div", { class: "k" }, k), el("div", { class: "v", id }, v));
}

function clusterView(report) {
  const nodes = table(
    [{ label: "node" }, { label: "URL" }, { label: "Raft address" }],
    report.nodes.map((n) => [String(n.id), n.url, n.raft]),
  );
  nodes.id = "cluster-nodes";
  const groups = table(
    [{ label: "group" }, { label: "leader" }, { label: "term", num: true }, { label: "commit index", num: true },
      { label: "replicas (applied · lag · role)" }],
    report.groups.map((g) => [
      String(g.group),
      g.leader === null ? el("span", { class: "badge bad" }, "none") : String(g.leader),
      String(g.term),
      String(g.commit_index),
      el("div", {}, g.replicas.map((r) =>
        el("div", {}, `node ${r.node}: ${r.applied_index ?? "?"} · ${r.lag ?? "?"} · ${r.role}`))),
    ]),
  );
  groups.id = "cluster-groups";
  return el("section", { "aria-labelledby": "cluster-title" },
    el("h2", { id: "cluster-title" }, `Cluster ${report.cluster_id} (node ${report.node_id})`),
    el("div", { class: "split" }, nodes, groups));
}

// Renders into root; returns a function that stops its timers.
export function overview(root, setBadge) {
  const charts = {
    appends: new Chart("Appends / s", (v) => v.toFixed(v < 10 ? 1 : 0)),
    bytes: new Chart("Bytes / s", (v) => bytes(Math.round(v)), ["in", "out"]),
    p99: new Chart("p99 log sync latency", (v) => `${v.toFixed(v < 10 ? 2 : 0)} ms`),
    readers: new Chart("Live readers", (v) => String(Math.round(v))),
  };
  const cards = el("div", { class: "cards" });
  const clusterBox = el("div");
  const status = el("p", { class: "muted", role: "status", "aria-live": "polite" });
  root.replaceChildren(
    el("h2", {}, "Node"), cards,
    el("h2", {}, "Now"), el("div", { class: "charts", id: "charts" }, Object.values(charts).map((c) => c.figure)),
    status, clusterBox);
  let prev = null, prevAt = 0, stopped = false, timer = null;

  async function refresh() {
    try {
      const [node, ready] = await Promise.all([
        admin("node"),
        fetch("/__runnel/readyz", { headers: headers(), cache: "no-store" }).then(async (r) => ({ ok: r.ok, text: (await r.text()).trim() })),
      ]);
      setBadge(`${node.version}${node.node ? ` · node ${node.node}` : ""}`);
      cards.replaceChildren(
        card("Health", el("span", { class: `badge ${ready.ok ? "ok" : "bad"}` }, ready.text), "health"),
        card("Version", node.version, "version"),
        card("Uptime", duration(node.uptime_ms), "uptime"),
        card("Streams", String(node.streams), "streams"),
        card("Buckets", String(node.buckets), "buckets"),
        card("Live readers", String(node.live_readers), "live-readers"),
        card("Connections", String(node.connections)),
      );
      const m = parse((await fetchText("/__runnel/metrics")).text);
      const at = performance.now();
      if (prev) {
        const r = rates(prev, m, (at - prevAt) / 1000);
        charts.appends.push(r.appends);
        charts.bytes.push(r.bytesIn, r.bytesOut);
        charts.p99.push(r.p99ms);
        charts.readers.push(r.liveReaders);
      }
      prev = m;
      prevAt = at;
      if (node.node !== null) { /* a cluster node: its report */
        const c = await fetch("/__runnel/cluster", { headers: headers(), cache: "no-store" });
        if (c.ok) clusterBox.replaceChildren(clusterView(await c.json()));
      }
      status.textContent = `Updated ${new Date().toLocaleTimeString()}`;
    } catch (e) {
      status.textContent = `Could not update: ${e.message}`;
    }
    if (!stopped) timer = setTimeout(refresh, EVERY_MS);
  }
  refresh();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
