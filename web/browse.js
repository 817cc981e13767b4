// browse.js: the bucket and stream browser: buckets with their usage, a
// bucket's streams (with a name prefix, page by page), one stream with its
// producers, subscriptions and a live tail, and the purge behind a typed
// confirmation.

import { admin, bytes, el, segments, table } from "./api.js";
import { Tail } from "./tail.js";

const PAGE = 50;
const link = (href, text) => el("a", { href }, text);
const bucketHref = (b) => `#/bucket/${encodeURIComponent(b)}`;
const streamHref = (b, s) => `#/stream/${encodeURIComponent(b)}/${segments(s)}`;

function unreachable(doc) {
  return doc.unreachable_groups?.length
    ? el("p", { class: "error", role: "alert" }, `Groups ${doc.unreachable_groups.join(", ")} could not be reached: their part is missing.`)
    : null;
}

// A listing shown page by page with a "Load more" button.
function pager(box, load, render) {
  let cursor = null;
  const more = el("button", { type: "button" }, "Load more");
  const rows = el("div");
  async function next() {
    more.disabled = true;
    const doc = await load(cursor);
    rows.append(render(doc));
    cursor = doc.next_cursor;
    more.hidden = !cursor;
    more.disabled = false;
  }
  more.addEventListener("click", next);
  box.replaceChildren(rows, more);
  return next();
}

export function buckets(root) {
  const box = el("div");
  root.replaceChildren(el("h2", {}, "Buckets"), box);
  return pager(box, (c) => admin(`usage?limit=${PAGE}${c ? `&cursor=${encodeURIComponent(c)}` : ""}`), (doc) =>
    el("div", {}, unreachable(doc), table(
      [{ label: "bucket" }, { label: "streams", num: true }, { label: "hot", num: true }, { label: "cold", num: true },
        { label: "snapshots", num: true }, { label: "staged parts", num: true }, { label: "reads", num: true },
        { label: "writes", num: true }, { label: "in", num: true }, { label: "out", num: true }, { label: "state" }],
      doc.buckets.map((b) => [
        link(bucketHref(b.bucket), b.bucket), String(b.streams), bytes(b.bytes.hot), bytes(b.bytes.cold),
        bytes(b.bytes.snapshots + b.bytes.cold_snapshots),
        bytes(b.staged_parts.reduce((t, p) => t + p.bytes, 0)), String(b.requests.reads), String(b.requests.writes),
        bytes(b.bytes_in), bytes(b.bytes_out),
        b.erased ? el("span", { class: `badge ${b.purge?.done ? "bad" : "warn"}` }, b.purge?.done ? "erased" : "purging") : "",
      ]),
    )));
}

function bucketSummary(b) {
  const p = b.purge;
  return el("dl", { class: "kv", id: "bucket-summary" },
    el("dt", {}, "streams"), el("dd", {}, String(b.streams)),
    el("dt", {}, "bytes"), el("dd", {}, `${bytes(b.bytes.hot)} hot · ${bytes(b.bytes.cold)} cold · ${bytes(b.bytes.snapshots + b.bytes.cold_snapshots)} snapshots`),
    el("dt", {}, "state"), el("dd", { id: "bucket-state" }, b.erased
      ? `erased ${b.erased_at}${p && !p.done ? ` · removing: ${p.streams_left} streams, ${bytes(p.bytes_left)} left` : ""}`
      : "live"));
}

export async function bucket(root, name, openPurge) {
  const b = await admin(`buckets/${encodeURIComponent(name)}`);
  const prefix = el("input", { id: "prefix", placeholder: "name prefix" });
  const list = el("div");
  const purge = el("button", { type: "button", class: "danger", id: "purge-open", disabled: b.erased && b.purge?.done }, "Purge bucket…");
  purge.addEventListener("click", () => openPurge(name));
  const show = () => pager(list,
    (c) => admin(`buckets/${encodeURIComponent(name)}/streams?limit=${PAGE}${prefix.value ? `&prefix=${encodeURIComponent(prefix.value)}` : ""}${c ? `&cursor=${encodeURIComponent(c)}` : ""}`),
    (doc) => table(
      [{ label: "stream" }, { label: "bytes", num: true }, { label: "tail" }, { label: "type" }, { label: "" }],
      doc.streams.map((s) => [link(streamHref(name, s.stream), s.stream), bytes(s.bytes), el("span", { class: "mono" }, s.tail),
        s.content_type, s.closed ? "closed" : ""]),
    ));
  const form = el("form", { class: "row", role: "search" }, el("label", { for: "prefix" }, "Streams whose name starts with"), prefix,
    el("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    show();
  });
  root.replaceChildren(...[el("h2", {}, "Bucket ", el("span", { class: "mono" }, name)), unreachable(b),
    el("div", { class: "panel" }, bucketSummary(b), el("div", { class: "row" }, purge)),
    form, list].filter(Boolean));
  await show();
}

function kv(pairs) {
  return el("dl", { class: "kv" }, pairs.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v ?? "–")]));
}

export async function stream(root, name, path) {
  const s = await admin(`buckets/${encodeURIComponent(name)}/streams/${segments(path)}`);
  const tailBox = el("div", { class: "tail", id: "tail", role: "log", "aria-live": "polite", tabindex: "0" });
  const tailStatus = el("p", { class: "muted", id: "tail-status", role: "status" });
  const tail = new Tail(`${name}/${path}`, tailBox, tailStatus);
  const toggle = el("button", { type: "button", id: "tail-toggle" }, "Pause");
  toggle.addEventListener("click", () => {
    if (tail.ctrl) {
      tail.stop();
      toggle.textContent = "Resume";
    } else {
      tail.start();
      toggle.textContent = "Pause";
    }
  });
  root.replaceChildren(...[
    el("h2", {}, "Stream ", el("span", { class: "mono" }, s.path)), unreachable(s),
    el("div", { class: "split" },
      el("div", { class: "panel" }, kv([
        ["content type", s.content_type], ["tail", el("span", { class: "mono" }, s.tail)], ["bytes", bytes(s.bytes)],
        ["by tier", `${bytes(s.bytes_by_tier.hot)} hot · ${bytes(s.bytes_by_tier.cold)} cold`],
        ["closed", s.closed ? "yes" : "no"], ["incarnation", s.incarnation], ["retained from", s.retained_offset],
        ["created", s.created_at], ["expires", s.expires_at], ["snapshot", s.snapshot ? `${bytes(s.snapshot.size)} at ${s.snapshot.offset} (${s.snapshot.tier})` : null],
        ["fork of", s.fork_of ? `${s.fork_of.path} at ${s.fork_of.offset}` : null], ["forks", String(s.forks)],
        ["live readers", String(s.live_readers)], ["id", s.id], ["group", s.group === null ? null : String(s.group)],
      ])),
      el("section", { class: "panel", "aria-labelledby": "tail-title" },
        el("div", { class: "row" }, el("h3", { id: "tail-title" }, "Live tail"), toggle), tailStatus, tailBox)),
    el("h3", {}, "Producers"),
    s.producers.length ? table([{ label: "id" }, { label: "epoch", num: true }, { label: "last seq", num: true }, { label: "last write" }],
      s.producers.map((p) => [p.id, String(p.epoch), String(p.last_seq), p.last_write_at])) : el("p", { class: "muted" }, "None."),
    el("h3", {}, "Subscriptions"),
    s.subscriptions.length ? table([{ label: "id" }, { label: "type" }, { label: "link" }, { label: "acked offset" }],
      s.subscriptions.map((x) => [x.id, x.type, x.link_type, el("span", { class: "mono" }, x.acked_offset)])) : el("p", { class: "muted" }, "None."),
  ].filter(Boolean));
  tail.start();
  return () => tail.stop();
}

// The purge dialog: the button works only once the bucket's name is typed.
export function purgeDialog(done) {
  const dialog = document.getElementById("purge-dialog");
  const input = document.getElementById("purge-confirm");
  const go = document.getElementById("purge-go");
  const status = document.getElementById("purge-status");
  let name = null;
  input.addEventListener("input", () => {
    go.disabled = input.value !== name;
  });
  document.getElementById("purge-cancel").addEventListener("click", () => dialog.close());
  document.getElementById("purge-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    if (input.value !== name) return;
    go.disabled = input.disabled = true;
    try {
      let b = await admin(`buckets/${encodeURIComponent(name)}/purge`, { method: "POST" });
      while (!b.purge?.done) {
        status.textContent = `Fenced; removing ${b.purge?.streams_left ?? "?"} streams…`;
        await new Promise((r) => setTimeout(r, 500));
        b = await admin(`buckets/${encodeURIComponent(name)}`);
      }
      status.textContent = "Purged: nothing of it is left, and it stays fenced.";
      done(name);
    } catch (err) {
      status.textContent = `The purge was not completed: ${err.message}. Repeat it.`;
      go.disabled = input.disabled = false;
    }
  });
  return (bucketName) => {
    name = bucketName;
    document.getElementById("purge-name").textContent = bucketName;
    input.value = "";
    input.disabled = false;
    go.disabled = true;
    status.textContent = "";
    dialog.showModal();
    input.focus();
  };
}
