// app.js: the console's entry point: sign-in (the admin credential kept in
// this tab's sessionStorage), the hash routes (#/overview, #/buckets,
// #/bucket/NAME, #/stream/BUCKET/NAME) and the views they show.

import { admin, el, setToken, token, HttpError } from "./api.js";
import { bucket, buckets, purgeDialog, stream } from "./browse.js";
import { overview } from "./overview.js";

const view = document.getElementById("view");
const login = document.getElementById("login");
const badge = document.getElementById("node-badge");
const signOut = document.getElementById("sign-out");
let leave = null; // stops the current view's timers and tail

const setBadge = (text) => (badge.textContent = text);
const openPurge = purgeDialog(() => route());

function showLogin(message = "") {
  leave?.();
  leave = null;
  view.replaceChildren();
  login.hidden = false;
  signOut.hidden = true;
  document.getElementById("login-error").textContent = message;
  document.getElementById("token").focus();
}

async function route() {
  leave?.();
  leave = null;
  if (token() === null) return showLogin();
  login.hidden = true;
  signOut.hidden = false;
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  const section = parts[0] || "overview";
  const current = section === "overview" ? "overview" : "buckets";
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.section === current) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  try {
    if (section === "bucket" && parts[1]) await bucket(view, decodeURIComponent(parts[1]), openPurge);
    else if (section === "stream" && parts.length > 2)
      leave = await stream(view, decodeURIComponent(parts[1]), parts.slice(2).map(decodeURIComponent).join("/"));
    else if (section === "buckets") await buckets(view);
    else leave = overview(view, setBadge);
  } catch (e) {
    if (e instanceof HttpError && (e.status === 401 || e.status === 403)) {
      setToken(null);
      return showLogin(e.status === 401 ? "The server needs its admin credential." : "This credential is not the server's admin credential.");
    }
    view.replaceChildren(el("p", { class: "error", role: "alert" }, `Could not load this view: ${e.message}`));
  }
  document.getElementById("main").focus({ preventScroll: true });
}

document.getElementById("login-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  setToken(document.getElementById("token").value.trim());
  try {
    await admin("node");
    document.getElementById("token").value = "";
    route();
  } catch (err) {
    setToken(null);
    showLogin(err instanceof HttpError && err.status === 403 ? "This credential is not the server's admin credential."
      : err instanceof HttpError && err.status === 401 ? "The server needs its admin credential." : `The server did not answer: ${err.message}`);
  }
});
signOut.addEventListener("click", () => {
  setToken(null);
  showLogin();
});
window.addEventListener("hashchange", route);
route();
