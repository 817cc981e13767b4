// The shell examples of README.md and docs/*.md run as written, in order,
// against a fresh server (one per file), so the documentation cannot drift
// from the server.
//
// An example is every command of a ```sh block that uses curl (blocks
// without curl, such as `scripts/run.sh`, are not run); a line ending in
// `\` continues on the next. The commands of one file run in one bash, so
// variables set by one (S=..., OFF=$(...)) serve the next; only the
// server's address changes (127.0.0.1:4437 becomes the test server's).
// Every command must exit 0, and every HTTP answer curl receives must be
// 2xx or 3xx, and a comment after the command states its result:
//   `# 404`, `# 404 NOT_FOUND`, `# 206: why`  the status of the command's
//       (last) answer, and the error code in its body when one is named;
//   `# 204, Name: value, Name: value`  the status and those headers of the
//       last answer, exactly (the command prints its headers: -i or -I);
//   `# TEXT`  the answer's body (or the command's output) is exactly TEXT
//       (`\n` a line end); `# TEXT…` it starts with TEXT.
// Every command states its result but a variable assignment (S=...,
// OFF=$(...)), whose value the next commands check. A comment on a
// line of its own describes what follows and checks nothing.
// The server runs with --long-poll-timeout-ms 1000 and
// --sse-max-duration-ms 1000, so the long-poll and SSE examples end by
// themselves, and with --backup-to "$BACKUPS" (a fresh directory the
// examples see as BACKUPS; `runnel` on their PATH is the binary tested).
// Commands that name https://127.0.0.1:4437 go to a second server of the
// same settings (without backups) that speaks TLS with a certificate made
// by tests/lib/test_pki.sh, its files in ./pki as the README makes them (so
// `--cacert pki/ca.pem` works as written). Each curl is bounded by
// `max-time` in a .curlrc (the same file makes curl report every answer's
// status on stderr).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, describe, test } from "node:test";
import { BIN, Server, tempDir } from "./lib/server.mjs";
import { makePki } from "../lib/tls.mjs";

const REPO = fileURLToPath(new URL("../..", import.meta.url));
const DOC_ADDRESS = "127.0.0.1:4437";
const DOC_TLS_URL = `https://${DOC_ADDRESS}`;
const STATUS_MARK = "RUNNEL_EXAMPLE_STATUS";

// Splits a line into its command and the comment after it (outside quotes).
function splitComment(line) {
  let quote = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === "\\" && quote === '"') i++;
      else if (c === quote) quote = null;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === "\\") i++;
    else if (c === "#" && (i === 0 || /\s/.test(line[i - 1]))) return [line.slice(0, i).trimEnd(), line.slice(i + 1).trim()];
  }
  return [line, null];
}

// The example commands of a Markdown file: [{text, expect, line}] where
// expect is null, {status, code} or {body}.
export function extractExamples(markdown) {
  const lines = markdown.split("\n");
  const commands = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/^```(sh|bash|shell)\s*$/.test(lines[i])) continue;
    const block = [];
    let j = i + 1;
    for (; j < lines.length && !/^```\s*$/.test(lines[j]); j++) block.push({ text: lines[j], line: j + 1 });
    i = j;
    if (!block.some((l) => /\bcurl\b/.test(l.text))) continue;
    for (let k = 0; k < block.length; k++) {
      const first = block[k];
      if (/^\s*(#.*)?$/.test(first.text)) continue; // blank or a comment line
      const parts = [];
      while (block[k].text.endsWith("\\") && k + 1 < block.length) parts.push(block[k++].text);
      const [last, comment] = splitComment(block[k].text);
      parts.push(last);
      commands.push({ text: parts.join("\n"), expect: parseExpectation(comment), line: first.line });
    }
  }
  return commands;
}

function parseExpectation(comment) {
  if (comment === null || comment === "") return null;
  const h = /^([1-5]\d\d)((?:, [A-Za-z][A-Za-z0-9-]*: [^\s,]+)+)$/.exec(comment);
  if (h) {
    const headers = Object.fromEntries(h[2].slice(2).split(", ").map((kv) => {
      const i = kv.indexOf(": ");
      return [kv.slice(0, i).toLowerCase(), kv.slice(i + 2)];
    }));
    return { status: Number(h[1]), code: null, headers };
  }
  const m = /^([1-5]\d\d)(?: ([A-Z][A-Z0-9_]+))?(?:$|[:;,( ])/.exec(comment);
  if (m) return { status: Number(m[1]), code: m[2] ?? null };
  const text = comment.replace(/\\n/g, "\n");
  return text.endsWith("…") ? { prefix: text.slice(0, -1) } : { body: text };
}

// A variable assignment (NAME=...): its value is checked by the commands
// that use it, so it states no result.
const isAssignment = (c) => /^[A-Za-z_][A-Za-z0-9_]*=/.test(c.text);

// The body of curl's output: after the headers of the last answer when it
// printed them (-i), else all of it.
function bodyOf(out) {
  if (!/^HTTP\/\d(\.\d)? \d{3}/.test(out)) return out;
  let rest = out;
  for (;;) {
    const end = rest.indexOf("\r\n\r\n");
    if (end < 0) return "";
    const after = rest.slice(end + 4);
    if (/^HTTP\/\d(\.\d)? \d{3}/.test(after) && /^HTTP\/\d(\.\d)? 1\d\d/.test(rest)) rest = after;
    else return after;
  }
}

// Runs the commands in one bash against baseUrl (the https ones against
// tls: {url, pkiDir}, when given; backups: the plain server's --backup-to);
// returns per command {rc, out, err, statuses}.
function runAll(commands, baseUrl, backups, tls = null) {
  const work = tempDir("runnel-docs-");
  fs.writeFileSync(path.join(work, ".curlrc"), `max-time = 30\nwrite-out = "%{stderr}${STATUS_MARK} %{http_code}\\n"\n`);
  if (tls) fs.symlinkSync(tls.pkiDir, path.join(work, "pki"));
  const address = baseUrl.replace(/^http:\/\//, "");
  const script = ["set +e", `cd ${JSON.stringify(work)}`];
  commands.forEach((c, n) => {
    const text = (tls ? c.text.split(DOC_TLS_URL).join(tls.url) : c.text).split(DOC_ADDRESS).join(address);
    script.push(`{\n${text}\n} >${n}.out 2>${n}.err </dev/null; echo $? >${n}.rc`);
  });
  const r = spawnSync("bash", ["-c", script.join("\n")], {
    cwd: work,
    env: {
      ...process.env,
      CURL_HOME: work,
      BACKUPS: backups,
      PATH: `${path.dirname(path.resolve(BIN))}:${process.env.PATH}`,
    },
    encoding: "utf8",
    timeout: 180000,
  });
  assert.equal(r.error, undefined, `the examples did not finish: ${r.error}`);
  return commands.map((_, n) => {
    const read = (ext) => (fs.existsSync(path.join(work, `${n}.${ext}`)) ? fs.readFileSync(path.join(work, `${n}.${ext}`), "utf8") : null);
    const err = read("err") ?? "";
    const statuses = [...err.matchAll(new RegExp(`^${STATUS_MARK} (\\d{3})$`, "gm"))].map((m) => Number(m[1]));
    return { rc: Number(read("rc")), out: read("out") ?? "", err, statuses };
  });
}

// The headers of the last answer curl printed (-i, -I): lowercased names;
// null when it printed none.
function headersOf(out) {
  const blocks = [...out.matchAll(/^HTTP\/\d(?:\.\d)? (\d{3})[^\r\n]*\r?\n([\s\S]*?)\r?\n\r?\n/gm)];
  const last = blocks.filter((b) => !b[1].startsWith("1")).at(-1);
  if (!last) return null;
  const headers = {};
  for (const line of last[2].split(/\r?\n/)) {
    const i = line.indexOf(":");
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return headers;
}

// Checks one command's result; returns a list of problems.
function problems(c, r) {
  const p = [];
  if (r.rc !== 0) p.push(`exit status ${r.rc}`);
  const usesCurl = /\bcurl\b/.test(c.text);
  if (usesCurl && r.statuses.length === 0) p.push("curl received no answer");
  const expect = c.expect;
  const last = r.statuses.at(-1);
  const earlier = expect?.status ? r.statuses.slice(0, -1) : r.statuses;
  for (const s of earlier) if (s < 200 || s >= 400) p.push(`an answer was ${s}`);
  if (expect?.status) {
    if (last !== expect.status) p.push(`status ${last}, the comment says ${expect.status}`);
    if (expect.code && !bodyOf(r.out).includes(`"code":"${expect.code}"`)) p.push(`the body does not name ${expect.code}: ${JSON.stringify(bodyOf(r.out).slice(0, 300))}`);
  }
  if (expect?.headers) {
    const got = headersOf(r.out);
    if (!got) p.push("the command prints no headers to check (curl -i or -I)");
    else {
      for (const [name, value] of Object.entries(expect.headers)) {
        if (got[name] !== value) p.push(`${name}: ${JSON.stringify(got[name] ?? null)}, the comment says ${JSON.stringify(value)}`);
      }
    }
  }
  if (expect?.body !== undefined && bodyOf(r.out) !== expect.body)
    p.push(`body ${JSON.stringify(bodyOf(r.out).slice(0, 300))}, the comment says ${JSON.stringify(expect.body)}`);
  if (expect?.prefix !== undefined && !bodyOf(r.out).startsWith(expect.prefix))
    p.push(`body ${JSON.stringify(bodyOf(r.out).slice(0, 300))}, the comment says it starts with ${JSON.stringify(expect.prefix)}`);
  return p;
}

const files = ["README.md", ...fs.readdirSync(path.join(REPO, "docs")).filter((f) => f.endsWith(".md")).sort().map((f) => `docs/${f}`)];
const servers = [];
after(async () => {
  for (const s of servers) await s.stop();
});

describe("the documentation's shell examples run as written", () => {
  test("the extraction finds the documents' examples, their continuation lines and stated results", () => {
    const cmds = files.flatMap((f) => extractExamples(fs.readFileSync(path.join(REPO, f), "utf8")).map((c) => ({ ...c, file: f })));
    assert.ok(cmds.length >= 60, `${cmds.length} commands`);
    assert.ok(cmds.some((c) => c.text.includes("\\\n")), "a command continued over lines");
    assert.ok(cmds.some((c) => c.expect?.status), "a stated status");
    assert.ok(cmds.some((c) => c.expect?.body !== undefined), "a stated body");
    assert.ok(!cmds.some((c) => /scripts\/(run|test)\.sh/.test(c.text)), "blocks without curl are not run");
    assert.ok(cmds.some((c) => c.text.includes("--http2-prior-knowledge ")), "an HTTP/2 (h2c) example");
    assert.ok(cmds.some((c) => c.text.includes("--http2 ") && c.text.includes(DOC_TLS_URL)), "an HTTP/2 over HTTPS example");
    assert.ok(cmds.some((c) => c.expect?.headers), "stated headers");
    const unstated = cmds.filter((c) => !c.expect && !isAssignment(c));
    assert.deepEqual(unstated.map((c) => `${c.file}:${c.line}: ${c.text}`), [], "every command but an assignment states its result");
  });

  test("the extraction's rules, on a sample", () => {
    const md = [
      "```sh",
      "# a description",
      "curl -i 'http://127.0.0.1:4437/x?a=#1'   # 404 NOT_FOUND: why",
      "curl -X PUT \\",
      "  -H 'A: b' http://127.0.0.1:4437/y     # two words\\nand a line",
      "B=1   # 200",
      "curl -I http://127.0.0.1:4437/z   # 200, Stream-Closed: true, ETag: x",
      "curl http://127.0.0.1:4437/z   # {\"a\":…",
      "```",
      "```sh",
      "scripts/run.sh   # not run",
      "```",
    ].join("\n");
    assert.deepEqual(extractExamples(md), [
      { text: "curl -i 'http://127.0.0.1:4437/x?a=#1'", expect: { status: 404, code: "NOT_FOUND" }, line: 3 },
      { text: "curl -X PUT \\\n  -H 'A: b' http://127.0.0.1:4437/y", expect: { body: "two words\nand a line" }, line: 4 },
      { text: "B=1", expect: { status: 200, code: null }, line: 6 },
      { text: "curl -I http://127.0.0.1:4437/z", expect: { status: 200, code: null, headers: { "stream-closed": "true", etag: "x" } }, line: 7 },
      { text: "curl http://127.0.0.1:4437/z", expect: { prefix: '{"a":' }, line: 8 },
    ]);
  });

  for (const file of files) {
    const commands = extractExamples(fs.readFileSync(path.join(REPO, file), "utf8"));
    if (commands.length === 0) continue;
    test(`${file}: ${commands.length} commands, in order, on a fresh server`, async () => {
      const args = ["--long-poll-timeout-ms", "1000", "--sse-max-duration-ms", "1000"];
      const backups = path.join(tempDir("runnel-docs-backups-"), "backups");
      const srv = new Server({ args: [...args, "--backup-to", backups] });
      servers.push(srv);
      await srv.start();
      let tls = null;
      let tlsSrv = null;
      if (commands.some((c) => c.text.includes(DOC_TLS_URL))) {
        const pki = makePki();
        tlsSrv = new Server({ args, tls: { cert: pki.file("server.pem"), key: pki.file("server.key"), ca: pki.file("ca.pem") } });
        servers.push(tlsSrv);
        await tlsSrv.start();
        tls = { url: tlsSrv.url, pkiDir: pki.dir };
      }
      const results = runAll(commands, srv.url, backups, tls);
      const report = [];
      commands.forEach((c, n) => {
        const p = problems(c, results[n]);
        const stderr = results[n].err.split("\n").filter((l) => l.trim() && !/% Total|Dload|--:--/.test(l)).join("\n  ");
        if (p.length) report.push(`${file}:${c.line}: ${c.text}\n  ${p.join("\n  ")}\n  stderr: ${stderr.slice(0, 300)}`);
      });
      await srv.stop();
      if (tlsSrv) await tlsSrv.stop();
      assert.equal(report.length, 0, `${report.length} example(s) do not run as written:\n${report.join("\n")}`);
    });
  }
});
