// Helpers for the operations black-box tests (ops_*.test.mjs): a strict
// parser of the Prometheus text exposition format, scrapes with deltas,
// requests on their own connections (so connection gauges stay exact),
// spawning the binary directly (for readiness and log tests, where
// Server.start()'s wait for readyz would hide what is being tested) and
// running the CLI to completion.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import http from "node:http";
import { BIN, Server, freePort, sleep } from "./server.mjs";

// ---- the exposition format ----

const NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
const LABEL = `[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"`;
const SAMPLE_RE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL})(?:,${LABEL})*)?,?\\})? (\\S+)(?: (-?[0-9]+))?$`);
const VALUE_RE = /^(?:[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?Inf|NaN)$/;
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);

function parseLabels(text) {
  const labels = {};
  if (!text) return labels;
  const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"/g;
  let m;
  while ((m = re.exec(text)) !== null) {
    assert.ok(!(m[1] in labels), `label ${m[1]} repeated in {${text}}`);
    labels[m[1]] = m[2].replace(/\\(["\\n])/g, (_, c) => (c === "n" ? "\n" : c));
  }
  return labels;
}

// The key of a sample: name{k="v",...} with the labels sorted.
export function sampleKey(name, labels = {}) {
  const ks = Object.keys(labels).sort();
  return ks.length ? `${name}{${ks.map((k) => `${k}="${labels[k]}"`).join(",")}}` : name;
}

// Parses a whole exposition and checks its grammar: every line is a
// `# HELP`, a `# TYPE` or a sample `name{labels} value`; a family's HELP
// and TYPE come before its samples and only once; samples of a family are
// contiguous and belong to it (histograms: _bucket with le, _sum, _count);
// no sample is repeated; the text ends with a newline. Returns
// { families: Map(name -> {type, help, samples: [...]}), values: Map(key -> number) }.
export function parseExposition(text) {
  assert.ok(text.endsWith("\n"), "the exposition ends with a newline");
  const families = new Map();
  const values = new Map();
  let current = null; // family the last sample belonged to
  const closed = new Set(); // families whose samples ended
  const lines = text.slice(0, -1).split("\n");
  lines.forEach((line, i) => {
    const at = `line ${i + 1}: ${JSON.stringify(line)}`;
    if (line.startsWith("#")) {
      const m = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line);
      if (!m) {
        assert.ok(!/^# (HELP|TYPE)/.test(line), `malformed ${at}`);
        return; // a plain comment
      }
      const [, kind, name, rest] = m;
      assert.match(name, new RegExp(`^${NAME}$`), `metric name ${at}`);
      let f = families.get(name);
      if (!f) families.set(name, (f = { name, type: null, help: null, samples: [] }));
      assert.equal(f.samples.length, 0, `${kind} after the samples of ${name}: ${at}`);
      if (kind === "HELP") {
        assert.equal(f.help, null, `second HELP for ${name}: ${at}`);
        f.help = rest;
      } else {
        assert.equal(f.type, null, `second TYPE for ${name}: ${at}`);
        assert.ok(TYPES.has(rest), `unknown type ${at}`);
        f.type = rest;
      }
      return;
    }
    assert.notEqual(line.trim(), "", `empty ${at}`);
    const m = SAMPLE_RE.exec(line);
    assert.ok(m, `not a sample line \`name{labels} value\`: ${at}`);
    const [, name, labelText, value] = m;
    assert.match(value, VALUE_RE, `value ${at}`);
    let fam = families.get(name);
    let base = name;
    if (!fam) {
      const h = /^(.*)_(bucket|sum|count)$/.exec(name);
      if (h && families.get(h[1])?.type === "histogram") {
        base = h[1];
        fam = families.get(base);
      }
    }
    assert.ok(fam, `sample before any HELP/TYPE of its family: ${at}`);
    assert.ok(fam.type !== null && fam.help !== null, `sample of ${base} without both HELP and TYPE before it: ${at}`);
    if (current !== base) {
      assert.ok(!closed.has(base), `samples of ${base} are not contiguous: ${at}`);
      if (current) closed.add(current);
      current = base;
    }
    const labels = parseLabels(labelText);
    if (fam.type === "histogram" && name.endsWith("_bucket")) assert.ok("le" in labels, `bucket without le: ${at}`);
    const key = sampleKey(name, labels);
    assert.ok(!values.has(key), `sample repeated: ${at}`);
    const v = Number(value.replace(/^\+?Inf$/, "Infinity").replace(/^-Inf$/, "-Infinity"));
    values.set(key, v);
    fam.samples.push({ name, labels, value: v });
  });
  return { families, values };
}

// ---- scraping ----

// GET on a fresh connection that is closed after the answer; resolves to
// {status, headers, text}. Never pooled, so it opens exactly one
// connection for its own duration.
export function rawGet(url, { method = "GET", headers = {}, timeoutMs = 10000 } = {}) {
  return new Promise((resolve, reject) => {
    const rq = http.request(url, { method, agent: false, headers: { connection: "close", ...headers }, timeout: timeoutMs }, (rs) => {
      const chunks = [];
      rs.on("data", (c) => chunks.push(c));
      rs.on("error", reject);
      rs.on("end", () => resolve({ status: rs.statusCode, headers: rs.headers, text: Buffer.concat(chunks).toString("utf8") }));
    });
    rq.on("timeout", () => rq.destroy(new Error(`${method} ${url} timed out`)));
    rq.on("error", reject);
    rq.end();
  });
}

// A scrape: the parsed exposition plus get(name, labels) (0 when absent).
export async function scrape(baseUrl) {
  const r = await rawGet(`${baseUrl}/__runnel/metrics`);
  assert.equal(r.status, 200, `metrics answered ${r.status}`);
  const parsed = parseExposition(r.text);
  return {
    ...parsed,
    text: r.text,
    contentType: r.headers["content-type"],
    get: (name, labels) => parsed.values.get(sampleKey(name, labels)) ?? 0,
  };
}

export const reqKey = (route, method, status) => sampleKey("runnel_http_requests_total", { method, route, status: String(status) });

// Every runnel_http_requests_total sample that changed from a to b, as
// { 'route method status': delta }.
export function requestDeltas(a, b) {
  const out = {};
  for (const [k, v] of b.values) {
    if (!k.startsWith("runnel_http_requests_total{")) continue;
    const d = v - (a.values.get(k) ?? 0);
    if (d !== 0) {
      const l = parseLabels(k.slice(k.indexOf("{") + 1, -1));
      out[`${l.route} ${l.method} ${l.status}`] = d;
    }
  }
  return out;
}

// ---- processes ----

// Spawns `runnel serve` with the given arguments (no --listen/--data-dir
// added) and environment additions; collects stderr and stdout.
export function spawnServe(args, { env = {} } = {}) {
  const proc = spawn(BIN, ["serve", ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...cleanEnv(), ...env } });
  const child = { proc, stdout: "", stderr: "" };
  proc.stdout.on("data", (d) => (child.stdout += d));
  proc.stderr.on("data", (d) => (child.stderr += d));
  child.exited = new Promise((resolve) => proc.on("exit", (code, signal) => resolve({ code, signal })));
  child.stop = async (signal = "SIGTERM") => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
    const timer = setTimeout(() => proc.kill("SIGKILL"), 15000);
    const r = await child.exited;
    clearTimeout(timer);
    return r;
  };
  return child;
}

// Waits until url answers 200 (bounded).
export async function waitReady(baseUrl, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await rawGet(`${baseUrl}/__runnel/readyz`, { timeoutMs: 1000 })).status === 200) return;
    } catch {
      // not listening yet
    }
    await sleep(20);
  }
  throw new Error(`${baseUrl} was not ready within ${timeoutMs} ms`);
}

// The environment without any RUNNEL_* variable, so the tests' own
// environment cannot leak into configuration checks.
export function cleanEnv() {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("RUNNEL_")) env[k] = v;
  return env;
}

// Runs the binary to completion: {code, stdout, stderr}.
export function runCli(args, { env = {}, cwd, timeoutMs = 10000 } = {}) {
  const r = spawnSync(BIN, args, { env: { ...cleanEnv(), ...env }, cwd, encoding: "utf8", timeout: timeoutMs });
  if (r.error) throw r.error;
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

// `runnel restore --from dest --name name --data-dir dir` (it must exit 0),
// then a server on dir, started; the caller stops it.
export async function restoreAndStart(dest, name, dir, serverOpts = {}) {
  const r = runCli(["restore", "--from", dest, "--name", name, "--data-dir", dir], { timeoutMs: 60000 });
  assert.equal(r.code, 0, `restore exited ${r.code}: ${r.stderr}`);
  const s = new Server({ ...serverOpts, dataDir: dir });
  await s.start();
  return s;
}

// `runnel serve --print-config ...` as a map key -> value.
export function printConfig(args = [], opts = {}) {
  const r = runCli(["serve", ...args, "--print-config"], opts);
  assert.equal(r.code, 0, `--print-config exited ${r.code}: ${r.stderr}`);
  const cfg = {};
  for (const line of r.stdout.split("\n")) {
    if (!line) continue;
    const i = line.indexOf("=");
    assert.ok(i > 0, `--print-config line is key=value: ${JSON.stringify(line)}`);
    cfg[line.slice(0, i)] = line.slice(i + 1);
  }
  return cfg;
}

export { BIN, freePort, sleep };
