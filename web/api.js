// api.js: the console's requests to the server it came from. The admin
// credential lives in this tab's sessionStorage and goes out as
// Authorization: Bearer on every request (nothing when it is empty: a
// node without an admin token). Names are percent-encoded segment by
// segment.

const KEY = "runnel-console-token";

export function token() {
  return sessionStorage.getItem(KEY);
}

export function setToken(value) {
  if (value === null) sessionStorage.removeItem(KEY);
  else sessionStorage.setItem(KEY, value);
}

export function headers(extra = {}) {
  const t = token();
  return t ? { ...extra, authorization: `Bearer ${t}` } : extra;
}

// A path of segments, each percent-encoded (a name may hold "/").
export const segments = (name) => name.split("/").map(encodeURIComponent).join("/");

export class HttpError extends Error {
  constructor(status, code, message) {
    super(`${status}${code ? ` ${code}` : ""}${message ? `: ${message}` : ""}`);
    Object.assign(this, { status, code });
  }
}

// A request of the server; the answer's text, or HttpError.
export async function fetchText(path, { method = "GET", signal } = {}) {
  const r = await fetch(path, { method, headers: headers(), signal, cache: "no-store" });
  const text = await r.text();
  if (!r.ok) {
    let code = "", message = "";
    try {
      const e = JSON.parse(text).error;
      code = e.code;
      message = e.message;
    } catch { /* not an error body */ }
    throw new HttpError(r.status, code, message || text.slice(0, 200));
  }
  return { status: r.status, text };
}

// An operator route (docs/ADMIN.md) under /__runnel/admin/, parsed.
export async function admin(route, opts) {
  const { status, text } = await fetchText(`/__runnel/admin/${route}`, opts);
  const doc = JSON.parse(text);
  doc.httpStatus = status;
  return doc;
}

// Formatting helpers shared by the views.
export function bytes(n) {
  if (n === null || n === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0, v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i ? v.toFixed(1) : v} ${units[i]}`;
}

export function duration(ms) {
  const s = Math.floor(ms / 1000), d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  return d ? `${d}d ${h}h` : h ? `${h}h ${m}m` : m ? `${m}m ${s % 60}s` : `${s}s`;
}

// An element with attributes and children (text or elements): the views
// build the page with this, never from HTML text.
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

// A table with a header row and one row per item (cells: text or elements).
export function table(columns, rows, caption) {
  const head = el("tr", {}, columns.map((c) => el("th", { scope: "col", class: c.num ? "num" : null }, c.label)));
  const body = rows.map((r) => el("tr", {}, columns.map((c, i) => el("td", { class: c.num ? "num" : null }, r[i]))));
  return el("div", { class: "scroll" }, el("table", {}, caption ? el("caption", { class: "muted" }, caption) : null,
    el("thead", {}, head), el("tbody", {}, body)));
}
