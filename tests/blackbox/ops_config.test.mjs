// Operations: configuration and the command line (issue 9).
// A configuration file (`--config FILE` or RUNNEL_CONFIG) of `key = value`
// lines whose keys are the options' names; precedence flags > RUNNEL_*
// environment > file > defaults, checked through `runnel serve
// --print-config`; every option of --help is accepted in a file with its
// documented default, and --print-config shows exactly those defaults;
// validation before anything touches the disk: unknown keys, keys under a
// [section], bad values of every kind, lines that are not `key = value`, a
// missing file, unknown flags: exit code 2 and a message naming the file,
// the key and the reason; `runnel --version` names the build.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { tempDir } from "./lib/server.mjs";
import { freePort, printConfig, runCli, spawnServe, waitReady } from "./lib/ops.mjs";

const work = tempDir("runnel-config-");

let nfile = 0;
function confFile(text) {
  const p = path.join(work, `c${++nfile}.conf`);
  fs.writeFileSync(p, text);
  return p;
}

// The options of `runnel serve --help`: [{name, env, def}].
function helpOptions() {
  const r = runCli(["serve", "--help"]);
  assert.equal(r.code, 0);
  const lines = r.stdout.split("\n");
  const opts = [];
  for (let i = 0; i < lines.length; i++) {
    const m = /^ {2}--([a-z0-9-]+)\s/.exec(lines[i]);
    if (!m || m[1] === "help") continue;
    const d = /^\s+env (RUNNEL_[A-Z0-9_]+), default (.*)$/.exec(lines[i + 1] ?? "");
    assert.ok(d, `option --${m[1]} documents its variable and default: ${lines[i + 1]}`);
    opts.push({ name: m[1], env: d[1], def: d[2] });
  }
  return opts;
}

// A refused start: exit code 2, nothing on stdout, one message on stderr
// containing every fragment.
function assertRefused(r, ...fragments) {
  assert.equal(r.code, 2, `exit code 2 (got ${r.code}); stderr: ${r.stderr}`);
  assert.equal(r.stdout, "");
  const msg = r.stderr.trim();
  assert.equal(msg.split("\n").length, 1, `one line: ${msg}`);
  assert.match(msg, /^runnel: /);
  for (const f of fragments) assert.ok(msg.includes(f), `message names ${JSON.stringify(f)}: ${msg}`);
}

describe("--help and --print-config", () => {
  test("every option names its RUNNEL_ variable (the option's name in upper snake case)", () => {
    const opts = helpOptions();
    assert.ok(opts.length >= 25, `${opts.length} options`);
    for (const o of opts) assert.equal(o.env, `RUNNEL_${o.name.toUpperCase().replace(/-/g, "_")}`);
  });

  test("--print-config with nothing set shows exactly the defaults --help documents", () => {
    const cfg = printConfig();
    const opts = helpOptions();
    assert.deepEqual(Object.keys(cfg).sort(), opts.map((o) => o.name).sort(), "the same options");
    for (const o of opts) {
      let want = o.def;
      if (want === "none") want = "";
      if (o.name === "print-config") want = "true"; // it is being used
      assert.equal(cfg[o.name], want, `default of ${o.name}: --help says ${JSON.stringify(o.def)}, --print-config ${JSON.stringify(cfg[o.name])}`);
    }
  });

  test("a file setting every option to its documented default changes nothing", () => {
    const opts = helpOptions().filter((o) => o.name !== "config" && o.name !== "print-config");
    const text = opts.map((o) => `${o.name} = ${o.def === "none" ? "" : o.def}`).join("\n");
    const file = confFile(`${text}\n`);
    const cfg = printConfig(["--config", file]);
    assert.deepEqual({ ...cfg, config: "" }, printConfig());
    assert.equal(cfg.config, file);
  });
});

describe("the configuration file", () => {
  test("the output of --print-config, as a file, gives the same configuration", () => {
    const cfg = printConfig(["--max-headers", "33", "--log-format", "json", "--listen", "[::1]:4999", "--public-url", "http://x.example:81"]);
    const text = Object.entries(cfg)
      .filter(([k]) => k !== "config" && k !== "print-config")
      .map(([k, v]) => `${k} = ${v}`)
      .join("\n");
    const file = confFile(`${text}\n`);
    assert.deepEqual({ ...printConfig(["--config", file]), config: "" }, cfg);
  });


  // A non-default value for each option (the effective text when it differs).
  const VALUES = {
    "log-format": "json",
    "log-level": "warn",
    "access-log": ["1", "true"],
    listen: "127.0.0.2:5555",
    "data-dir": "/var/tmp/runnel-config-test",
    "cluster-id": "cluster-from-file",
    "public-url": ["https://streams.example.com/", "https://streams.example.com"],
    "webhook-allow-loopback": "true",
    "webhook-timeout-ms": "1234",
    "long-poll-timeout-ms": "2345",
    "sse-max-duration-ms": "3456",
    "max-body-bytes": "100000",
    "max-header-bytes": "2048",
    "max-headers": "50",
    "max-connections": "77",
    "request-timeout-ms": "500",
    "idle-timeout-ms": "600",
    "max-read-bytes": "2048",
    "sse-queue-bytes": "65536",
    "fanout-threads": "5",
    "wal-segment-bytes": "2097152",
    "checkpoint-bytes": "3145728",
    "max-open-files": "64",
    "expiry-sweep-ms": "100",
    "scrub-bytes-per-second": "0",
    "cold-store": "false",
    "producer-ttl-ms": "1000",
    "producer-cap": "10",
    "parts-grace-ms": "5000",
    "test-hooks": ["1", "true"], // also what lets max-body-bytes go below 32 MiB
    "shutdown-grace-ms": "0",
  };

  test("every key is applied (comments, blank lines, spaces around = and trailing spaces allowed)", () => {
    const known = new Set(helpOptions().map((o) => o.name));
    const entries = Object.entries(VALUES).filter(([k]) => known.has(k));
    assert.ok(entries.length >= 25);
    const text = ["# a comment", "; another", ""]
      .concat(entries.map(([k, v], i) => `${k}${i % 3 ? " = " : "="}${Array.isArray(v) ? v[0] : v}${i % 2 ? "  " : ""}`))
      .join("\n");
    const file = confFile(`${text}\n`);
    const cfg = printConfig(["--config", file]);
    for (const [k, v] of entries) assert.equal(cfg[k], Array.isArray(v) ? v[1] : v, k);
    assert.equal(cfg.config, file);
  });

  test("RUNNEL_CONFIG names the file; --config wins over it", () => {
    const a = confFile("max-headers = 21\n");
    const b = confFile("max-headers = 22\n");
    assert.equal(printConfig([], { env: { RUNNEL_CONFIG: a } })["max-headers"], "21");
    assert.equal(printConfig(["--config", b], { env: { RUNNEL_CONFIG: a } })["max-headers"], "22");
    assert.equal(printConfig([`--config=${b}`], { env: { RUNNEL_CONFIG: a } }).config, b);
  });

  test("print-config works from the file too (same keys as the flags)", () => {
    const file = confFile("print-config = true\nlog-level = error\n");
    const r = runCli(["serve", "--config", file]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^log-level=error$/m);
  });

  test("a served start applies the file: it listens where the file says and logs in its format", async () => {
    const port = await freePort();
    const dataDir = path.join(work, "served");
    const file = confFile(`listen = 127.0.0.1:${port}\ndata-dir = ${dataDir}\nlog-format = json\n`);
    const child = spawnServe(["--config", file]);
    try {
      await waitReady(`http://127.0.0.1:${port}`);
      assert.ok(fs.existsSync(dataDir));
    } finally {
      assert.deepEqual(await child.stop(), { code: 0, signal: null });
    }
    for (const line of child.stderr.trim().split("\n")) JSON.parse(line);
    assert.match(child.stderr, new RegExp(`config=${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`));
  });
});

describe("yes/no options: --NAME, --NAME=true|false, true|false in the file and the environment", () => {
  const BOOLS = ["access-log", "cold-store", "print-config", "test-hooks", "webhook-allow-loopback"];

  test("--help documents every yes/no option's default as true or false", () => {
    const opts = new Map(helpOptions().map((o) => [o.name, o.def]));
    for (const b of BOOLS) assert.ok(["true", "false"].includes(opts.get(b)), `--${b}: default ${opts.get(b)}`);
  });

  for (const b of BOOLS.filter((x) => x !== "print-config")) {
    test(`--${b}: alone is true; =true, =false, =1, =0; true/false in the file and the environment`, () => {
      assert.equal(printConfig([`--${b}`])[b], "true");
      assert.equal(printConfig([`--${b}=true`])[b], "true");
      assert.equal(printConfig([`--${b}=false`])[b], "false");
      assert.equal(printConfig([`--${b}=1`])[b], "true");
      assert.equal(printConfig([`--${b}=0`])[b], "false");
      for (const v of ["true", "false"]) {
        assert.equal(printConfig(["--config", confFile(`${b} = ${v}\n`)])[b], v);
        const env = { [`RUNNEL_${b.toUpperCase().replace(/-/g, "_")}`]: v };
        assert.equal(printConfig([], { env })[b], v);
      }
    });
  }

  test("--NAME 1 (a separate value) is refused, saying how yes/no options are written", () => {
    for (const [b, v] of [["test-hooks", "1"], ["access-log", "true"], ["cold-store", "0"]]) {
      assertRefused(runCli(["serve", "--data-dir", path.join(work, "never-bool"), `--${b}`, v]), `unexpected argument "${v}" after --${b}`, `--${b}=true|false`);
    }
    assert.ok(!fs.existsSync(path.join(work, "never-bool")));
  });

  test("an empty value or another word is refused", () => {
    assertRefused(runCli(["serve", "--access-log="]), "--access-log: access-log must be true or false", '(got "")');
    assertRefused(runCli(["serve", "--cold-store=no"]), "--cold-store: cold-store must be true or false", '"no"');
    assertRefused(runCli(["serve"], { env: { RUNNEL_TEST_HOOKS: "yes" } }), "RUNNEL_TEST_HOOKS", "must be true or false");
  });

  test("a served start with --access-log and --test-hooks (no value) logs access lines and has the hooks", async () => {
    const port = await freePort();
    const child = spawnServe(["--listen", `127.0.0.1:${port}`, "--data-dir", path.join(work, "bools"), "--access-log", "--test-hooks", "--cold-store=false"]);
    try {
      await waitReady(`http://127.0.0.1:${port}`);
      const hook = await fetch(`http://127.0.0.1:${port}/__runnel/test/fail-syncs?n=0`, { method: "POST" });
      assert.notEqual(hook.status, 404, "the test hooks are on");
    } finally {
      assert.deepEqual(await child.stop(), { code: 0, signal: null });
    }
    assert.match(child.stderr, / info access: GET \/__runnel\/readyz 200 /);
  });
});

describe("quoted values in the file", () => {
  test("double or single quotes around a value are removed; what is inside is kept as it is", () => {
    const file = confFile(`data-dir = "/var/tmp/runnel dir 'x'"\nlog-level = 'debug'\nmax-headers = "50"\naccess-log = "true"\ncluster-id = ""\n`);
    const cfg = printConfig(["--config", file]);
    assert.equal(cfg["data-dir"], "/var/tmp/runnel dir 'x'");
    assert.equal(cfg["log-level"], "debug");
    assert.equal(cfg["max-headers"], "50");
    assert.equal(cfg["access-log"], "true");
    assert.equal(cfg["cluster-id"], "");
  });

  for (const value of [`"/var/lib/runnel`, `/var/lib/runnel"`, `'debug"`, `"`]) {
    test(`a quote at only one end is refused: ${value}`, () => {
      const file = confFile(`data-dir = ${value}\n`);
      assertRefused(runCli(["serve", "--config", file]), file, "key data-dir", "a quote at only one end", value);
    });
  }
});

describe("precedence: flags > environment > file > defaults", () => {
  const cases = [
    { key: "long-poll-timeout-ms", env: "RUNNEL_LONG_POLL_TIMEOUT_MS", def: "30000", file: "1111", envv: "2222", flag: "3333" },
    { key: "log-level", env: "RUNNEL_LOG_LEVEL", def: "info", file: "warn", envv: "error", flag: "debug" },
    { key: "listen", env: "RUNNEL_LISTEN", def: "127.0.0.1:4437", file: "127.0.0.1:1001", envv: "127.0.0.1:1002", flag: "127.0.0.1:1003" },
    { key: "webhook-allow-loopback", env: "RUNNEL_WEBHOOK_ALLOW_LOOPBACK", def: "false", file: "true", envv: "false", flag: null, flagArgs: ["--webhook-allow-loopback"], shown: "true" },
    { key: "cold-store", env: "RUNNEL_COLD_STORE", def: "true", file: "false", envv: "true", flag: "false", flagArgs: ["--cold-store=false"] },
  ];
  for (const c of cases) {
    test(`${c.key}`, () => {
      const file = confFile(`${c.key} = ${c.file}\n`);
      const flagArgs = c.flagArgs ?? [`--${c.key}`, c.flag];
      const env = { [c.env]: c.envv };
      assert.equal(printConfig()[c.key], c.def, "default");
      assert.equal(printConfig(["--config", file])[c.key], c.shownFile ?? c.file, "file over default");
      assert.equal(printConfig(["--config", file], { env })[c.key], c.shownEnv ?? c.envv, "environment over file");
      assert.equal(printConfig(["--config", file, ...flagArgs], { env })[c.key], c.shown ?? c.flag, "flag over environment");
      assert.equal(printConfig([...flagArgs])[c.key], c.shown ?? c.flag, "flag over default");
      assert.equal(printConfig(["--config", file, ...flagArgs])[c.key], c.shown ?? c.flag, "flag over file");
    });
  }

  test("the flag wins wherever it stands relative to --config, and --key=value works", () => {
    const file = confFile("max-headers = 40\n");
    assert.equal(printConfig(["--max-headers", "41", "--config", file])["max-headers"], "41");
    assert.equal(printConfig(["--config", file, "--max-headers=42"])["max-headers"], "42");
  });
});

describe("refused configurations: exit code 2, the key and the reason named, nothing started", () => {
  // Runs a would-be server start and checks it created no data directory.
  function refusedStart(args, env = {}) {
    const dataDir = path.join(work, `never-${++nfile}`);
    const r = runCli(["serve", "--listen", "127.0.0.1:1", "--data-dir", dataDir, ...args], { env });
    assert.ok(!fs.existsSync(dataDir), "the data directory was not created");
    return r;
  }

  test("an unknown key", () => {
    const file = confFile("listen = 127.0.0.1:4437\nlisten-port = 8080\n");
    assertRefused(refusedStart(["--config", file]), file, "listen-port", "unknown key");
  });

  test("a misspelt key close to a real one", () => {
    const file = confFile("max_headers = 50\n");
    assertRefused(refusedStart(["--config", file]), file, "max_headers", "unknown key");
  });

  test("a key under a [section]", () => {
    const file = confFile("[server]\nlisten = 127.0.0.1:4437\n");
    assertRefused(refusedStart(["--config", file]), file, "server.listen", "unknown key", "[section]");
  });

  test("`config` inside a configuration file", () => {
    const inner = confFile("max-headers = 50\n");
    const file = confFile(`config = ${inner}\n`);
    assertRefused(refusedStart(["--config", file]), file, "config", "unknown key");
  });

  const bad = [
    ["long-poll-timeout-ms", "abc", "must be an integer from 1 to 3600000"],
    ["max-headers", "0", "must be an integer from 8 to 10000"],
    ["max-headers", "10001", "must be an integer from 8 to 10000"],
    ["max-connections", "-5", "must be an integer"],
    ["max-connections", "1.5", "must be an integer"],
    ["access-log", "yes", "must be true or false"],
    ["test-hooks", "2", "must be true or false"],
    ["log-format", "xml", "must be one of text|json"],
    ["log-level", "verbose", "must be one of debug|info|warn|error"],
    ["listen", "localhost", "must be HOST:PORT"],
    ["listen", "127.0.0.1:70000", "must be HOST:PORT"],
    ["public-url", "ftp://example.com", "must be an http:// or https:// URL"],
    ["webhook-allow-loopback", "maybe", "must be true or false"],
  ];
  for (const [key, value, reason] of bad) {
    test(`${key} = ${value}`, () => {
      const file = confFile(`${key} = ${value}\n`);
      assertRefused(refusedStart(["--config", file]), file, `key ${key}`, reason, `"${value}"`);
    });
  }

  test("data-dir = (empty)", () => {
    const file = confFile("data-dir =\n");
    assertRefused(runCli(["serve", "--config", file]), file, "key data-dir", "must be a non-empty path");
  });

  test("a line that is not `key = value`", () => {
    const file = confFile("# fine\nmax-headers = 50\nthis is not a setting\n");
    assertRefused(refusedStart(["--config", file]), `${file}:3`, "not a `key = value` line");
  });

  test("a missing file (by flag and by RUNNEL_CONFIG)", () => {
    const missing = path.join(work, "does-not-exist.conf");
    assertRefused(refusedStart(["--config", missing]), "cannot read configuration file", missing);
    assertRefused(refusedStart([], { RUNNEL_CONFIG: missing }), "cannot read configuration file", missing);
  });

  test("a directory given as the file", () => {
    assertRefused(refusedStart(["--config", work]), "cannot read configuration file", work, "a directory");
  });

  test("a key given twice", () => {
    const file = confFile("max-headers = 50\nlisten = 127.0.0.1:4437\nmax-headers = 60\n");
    assertRefused(refusedStart(["--config", file]), file, "key max-headers", "given twice");
  });

  test("an indented line is not silently taken as more of the value above it", () => {
    // libinih reads an indented line as a continuation of the previous value
    const file = confFile("cluster-id = abc\n  listen = 127.0.0.1:9\n");
    assertRefused(refusedStart(["--config", file]), file, "key cluster-id", "indented");
  });

  test("a bad environment value names the variable", () => {
    assertRefused(refusedStart([], { RUNNEL_MAX_HEADERS: "lots" }), "RUNNEL_MAX_HEADERS", "max-headers must be an integer", '"lots"');
  });

  test("a bad flag value names the flag", () => {
    assertRefused(refusedStart(["--log-format", "yaml"]), "--log-format", "must be one of text|json", '"yaml"');
  });

  test("an unknown flag, a flag without its value, a stray argument", () => {
    assertRefused(refusedStart(["--no-such-option", "1"]), '"--no-such-option"', "unknown option");
    assertRefused(runCli(["serve", "--data-dir", path.join(work, "x"), "--listen"]), "--listen", "needs a value");
    assertRefused(refusedStart(["stray"]), '"stray"', "unexpected argument");
  });

  test("the file is validated before a flag could fix it: a bad file value is refused even when a flag sets the key", () => {
    const file = confFile("max-headers = many\n");
    assertRefused(refusedStart(["--config", file, "--max-headers", "50"]), file, "key max-headers");
  });
});

describe("version and commands", () => {
  const VERSION = /^runnel (\d+\.\d+\.\d+-([0-9a-f]{7,40}|unknown)(-dirty)?)\n$/;

  test("runnel --version and runnel version print the same version naming the build", () => {
    const a = runCli(["--version"]);
    const b = runCli(["version"]);
    assert.equal(a.code, 0);
    assert.equal(b.code, 0);
    assert.match(a.stdout, VERSION);
    assert.equal(a.stdout, b.stdout);
    assert.equal(a.stderr, "");
  });

  test("the start line of the log names the same version", async () => {
    const version = VERSION.exec(runCli(["--version"]).stdout)[1];
    const port = await freePort();
    const child = spawnServe(["--listen", `127.0.0.1:${port}`, "--data-dir", path.join(work, "v"), "--log-format", "json"]);
    try {
      await waitReady(`http://127.0.0.1:${port}`);
    } finally {
      await child.stop();
    }
    const start = child.stderr.split("\n").filter(Boolean).map((l) => JSON.parse(l)).find((l) => l.event === "start");
    assert.ok(start.msg.startsWith(`runnel ${version} starting`), start.msg);
  });

  test("runnel help exits 0; an unknown command exits 2", () => {
    const h = runCli(["help"]);
    assert.equal(h.code, 0);
    assert.match(h.stdout, /serve/);
    const u = runCli(["frobnicate"]);
    assert.equal(u.code, 2);
    assert.match(u.stdout + u.stderr, /usage: runnel/);
  });
});
