// The harness's HTTP client: one request to one node, answered with status,
// lowercased headers, body, the extensions §11 error code and the routing
// headers; it never follows a redirect (the workload decides, and records
// each hop). A network error or a timeout is an answer too: status null.
import http from "node:http";

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

// request(url, {method, headers, body, timeoutMs}) -> {status, headers,
// body: Buffer, code, err}. Never throws.
export function request(url, { method = "GET", headers = {}, body = null, timeoutMs = 10000 } = {}) {
  return new Promise((resolve) => {
    let settled = false;
    const finish = (answer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(answer);
    };
    const failed = (err) => finish({ status: null, headers: {}, body: Buffer.alloc(0), code: null, err: err.code ?? err.message });
    let req;
    try {
      const h = { ...headers };
      if (body !== null) h["content-length"] = Buffer.byteLength(body);
      req = http.request(url, { method, headers: h, agent });
    } catch (err) {
      failed(err);
      return;
    }
    const timer = setTimeout(() => req.destroy(Object.assign(new Error("timeout"), { code: "TIMEOUT" })), timeoutMs);
    req.on("error", failed);
    req.on("response", (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("error", failed);
      res.on("aborted", () => failed(Object.assign(new Error("aborted"), { code: "ABORTED" })));
      res.on("end", () => {
        const buf = Buffer.concat(chunks);
        finish({ status: res.statusCode, headers: res.headers, body: buf, code: errorCode(res, buf), err: null });
      });
    });
    req.end(body ?? undefined);
  });
}

// The code of an extensions §11 error body, or null.
function errorCode(res, buf) {
  if (res.statusCode < 400 || !/^application\/json/i.test(res.headers["content-type"] ?? "")) return null;
  try {
    const code = JSON.parse(buf.toString("utf8"))?.error?.code;
    return typeof code === "string" ? code : null;
  } catch {
    return null;
  }
}

// The routing headers a history entry keeps (history.mjs, field h).
export function routingHeaders(headers) {
  const h = {};
  const take = (key, name) => {
    if (headers[name] !== undefined) h[key] = headers[name];
  };
  take("loc", "location");
  take("leader", "x-ursula-raft-leader-id");
  take("group", "x-ursula-raft-group");
  take("term", "x-ursula-raft-term");
  take("ra", "retry-after");
  take("pout", "producer-outcome");
  return h;
}

// Milliseconds a Retry-After value asks for (seconds), bounded to [lo, hi].
export function retryAfterMs(value, lo = 50, hi = 1000) {
  const s = Number(value);
  return Number.isFinite(s) ? Math.min(hi, Math.max(lo, s * 1000)) : lo;
}
