// Operations: packaging (issue 9). `cmake --install <build> --prefix <tmp>`
// installs bin/runnel (the binary under test), lib/systemd/system/
// runnel.service, etc/runnel/runnel.conf and the documentation; the
// installed unit starts the installed binary with the installed
// configuration file, which is valid and runs; the unit carries the
// hardening directives (parsed from the file, and rated by `systemd-analyze
// security --offline` where available) and the directory it grants for
// writing is the configured data directory. Skips (with the reason) when
// cmake is missing or the binary under test is not in a CMake build
// directory.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { before, describe, test } from "node:test";
import { tempDir } from "./lib/server.mjs";
import { BIN, freePort, spawnServe, waitReady } from "./lib/ops.mjs";

const REPO = fileURLToPath(new URL("../..", import.meta.url));
const buildDir = path.dirname(path.resolve(BIN));
const prefix = tempDir("runnel-prefix-");

function have(cmd, args = ["--version"]) {
  const r = spawnSync(cmd, args, { encoding: "utf8" });
  return !r.error && r.status === 0;
}

let skip = false;
if (!have("cmake")) skip = "cmake is not installed";
else if (!fs.existsSync(path.join(buildDir, "cmake_install.cmake"))) skip = `${buildDir} is not a CMake build directory`;

// Parses a systemd unit: { Section: { Key: [values...] } }.
function parseUnit(text) {
  const unit = {};
  let section = null;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#") || line.startsWith(";")) continue;
    const s = /^\[([A-Za-z]+)\]$/.exec(line);
    if (s) {
      section = unit[s[1]] ??= {};
      continue;
    }
    const kv = /^([A-Za-z]+)=(.*)$/.exec(line);
    assert.ok(kv, `unit line is Key=value: ${raw}`);
    assert.ok(section, `${raw} outside any section`);
    (section[kv[1]] ??= []).push(kv[2]);
  }
  return unit;
}

// The `key = value` lines of a configuration file.
function parseConf(text) {
  const conf = {};
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#") || line.startsWith(";")) continue;
    const m = /^([a-z0-9-]+)\s*=\s*(.*)$/.exec(line);
    assert.ok(m, `conf line: ${raw}`);
    conf[m[1]] = m[2];
  }
  return conf;
}

const sha = (p) => crypto.createHash("sha256").update(fs.readFileSync(p)).digest("hex");

describe("cmake --install into a prefix", { skip }, () => {
  let unit, conf;
  const p = (...xs) => path.join(prefix, ...xs);

  before(() => {
    const r = spawnSync("cmake", ["--install", buildDir, "--prefix", prefix], { encoding: "utf8", timeout: 60000 });
    assert.equal(r.status, 0, `cmake --install failed:\n${r.stdout}\n${r.stderr}`);
    unit = parseUnit(fs.readFileSync(p("lib/systemd/system/runnel.service"), "utf8"));
    conf = parseConf(fs.readFileSync(p("etc/runnel/runnel.conf"), "utf8"));
  });

  test("installs bin/runnel (the binary under test), the unit, the configuration file and the docs", () => {
    const bin = p("bin/runnel");
    assert.ok(fs.statSync(bin).mode & 0o111, "bin/runnel is executable");
    assert.equal(sha(bin), sha(BIN), "the installed binary is the built one");
    for (const f of ["lib/systemd/system/runnel.service", "etc/runnel/runnel.conf", "share/doc/runnel/README.md"])
      assert.ok(fs.statSync(p(f)).isFile(), `${f} installed`);
  });

  test("the installed binary names the same build", () => {
    const a = spawnSync(p("bin/runnel"), ["--version"], { encoding: "utf8" });
    const b = spawnSync(BIN, ["--version"], { encoding: "utf8" });
    assert.equal(a.status, 0);
    assert.match(a.stdout, /^runnel \S+\n$/);
    assert.equal(a.stdout, b.stdout);
  });

  test("the unit starts the installed binary with the installed configuration file", () => {
    const exec = unit.Service.ExecStart;
    assert.equal(exec.length, 1);
    const [bin, cmd, flag, file, ...rest] = exec[0].split(/\s+/);
    assert.equal(bin, p("bin/runnel"), "ExecStart runs the binary of this prefix");
    assert.deepEqual([cmd, flag, rest], ["serve", "--config", []]);
    assert.equal(file, p("etc/runnel/runnel.conf"), "--config names the installed configuration file");
    for (const doc of unit.Unit.Documentation ?? []) {
      const f = doc.replace(/^file:\/\//, "");
      if (doc.startsWith("file://")) assert.ok(fs.existsSync(f), `Documentation ${doc} exists`);
    }
  });

  test("the installed configuration file is valid and names a data directory the unit lets the service write", () => {
    const r = spawnSync(p("bin/runnel"), ["serve", "--config", p("etc/runnel/runnel.conf"), "--print-config"], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    const eff = Object.fromEntries(r.stdout.trim().split("\n").map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]));
    for (const [k, v] of Object.entries(conf)) assert.equal(eff[k], v, `the file's ${k} is applied`);
    // ProtectSystem=strict leaves writable only StateDirectory (under
    // /var/lib) and ReadWritePaths: the data directory must be one of them
    const writable = [...(unit.Service.StateDirectory ?? []).flatMap((d) => d.split(/\s+/).map((x) => `/var/lib/${x}`)), ...(unit.Service.ReadWritePaths ?? []).flatMap((d) => d.split(/\s+/))];
    const dataDir = eff["data-dir"];
    assert.ok(writable.some((w) => dataDir === w || dataDir.startsWith(`${w}/`)), `data-dir ${dataDir} is inside ${writable}`);
    // the stop timeout outlasts the drain
    const stopS = Number((unit.Service.TimeoutStopSec ?? ["90"])[0]);
    assert.ok(stopS * 1000 > Number(eff["shutdown-grace-ms"]), `TimeoutStopSec ${stopS} s > shutdown-grace-ms ${eff["shutdown-grace-ms"]}`);
  });

  test("the installed binary serves with the installed file (listen and data dir overridden by flags)", async () => {
    const port = await freePort();
    const dataDir = path.join(prefix, "data");
    const child = spawnServe(["--config", p("etc/runnel/runnel.conf"), "--listen", `127.0.0.1:${port}`, "--data-dir", dataDir]);
    try {
      await waitReady(`http://127.0.0.1:${port}`);
    } finally {
      assert.deepEqual(await child.stop("SIGTERM"), { code: 0, signal: null }, child.stderr);
    }
    // the shipped file asks for JSON logs
    if (conf["log-format"] === "json") for (const l of child.stderr.trim().split("\n")) JSON.parse(l);
  });

  test("systemd-analyze security --offline rates the unit's exposure low", { skip: have("systemd-analyze", ["security", "--help"]) ? false : "systemd-analyze is not available" }, (t) => {
    const r = spawnSync("systemd-analyze", ["security", "--offline=true", p("lib/systemd/system/runnel.service")], { encoding: "utf8", timeout: 30000 });
    const m = /Overall exposure level for runnel\.service: ([0-9.]+)/.exec(r.stdout + r.stderr);
    if (!m) {
      t.skip(`no rating (systemd-analyze exited ${r.status}: ${(r.stderr || r.stdout).trim().split("\n").at(-1)})`);
      return;
    }
    t.diagnostic(`exposure ${m[1]}`);
    assert.ok(Number(m[1]) <= 3, `exposure ${m[1]} <= 3 (systemd's "OK" band is below 4)`);
  });
});

describe("the systemd unit (packaging/runnel.service)", () => {
  const unit = parseUnit(fs.readFileSync(path.join(REPO, "packaging/runnel.service"), "utf8"));
  const S = unit.Service ?? {};
  const one = (k) => {
    assert.ok(S[k], `${k}= is set`);
    assert.equal(S[k].length, 1, `${k}= once`);
    return S[k][0];
  };
  const yes = (k) => assert.match(one(k), /^(yes|true|1|on)$/, `${k}=yes`);

  test("sections and the service basics: [Unit] [Service] [Install], a non-root user, SIGTERM, restart on failure", () => {
    assert.ok(unit.Unit && unit.Service && unit.Install);
    assert.match(unit.Unit.Description[0], /Runnel/);
    assert.equal(one("Type"), "simple");
    assert.ok(S.DynamicUser?.[0] === "yes" || (S.User && S.User[0] !== "root"), "runs as a non-root user");
    assert.equal(one("KillSignal"), "SIGTERM");
    assert.equal(one("Restart"), "on-failure");
    assert.deepEqual(unit.Install.WantedBy, ["multi-user.target"]);
    assert.match(one("ExecStart"), /\/runnel serve --config \S+\/runnel\.conf$/);
  });

  test("hardening: no new privileges, read-only system, private /tmp and devices, kernel and cgroups protected, no capabilities", () => {
    yes("NoNewPrivileges");
    assert.match(one("ProtectSystem"), /^(strict|full)$/);
    assert.match(one("ProtectHome"), /^(yes|read-only|tmpfs)$/);
    yes("PrivateTmp");
    yes("PrivateDevices");
    yes("ProtectKernelTunables");
    yes("ProtectKernelModules");
    yes("ProtectKernelLogs");
    yes("ProtectControlGroups");
    yes("RestrictSUIDSGID");
    yes("LockPersonality");
    yes("RestrictRealtime");
    yes("MemoryDenyWriteExecute");
    assert.match(one("RestrictNamespaces"), /^(yes|true)$/);
    assert.equal(one("CapabilityBoundingSet"), "", "an empty capability bounding set");
    assert.equal(S.AmbientCapabilities?.[0] ?? "", "");
    const families = one("RestrictAddressFamilies").split(/\s+/);
    for (const f of ["AF_INET", "AF_INET6"]) assert.ok(families.includes(f), `${f} allowed`);
    assert.ok(!families.includes("AF_PACKET") && !families.includes("AF_NETLINK"), "no raw or netlink sockets");
    assert.match(one("SystemCallFilter"), /@system-service/);
    assert.match(one("UMask"), /^0?0[27]7$/);
  });

  test("a state directory for the data and enough file descriptors for the connection limit", () => {
    assert.equal(one("StateDirectory"), "runnel");
    const nofile = Number(one("LimitNOFILE"));
    assert.ok(nofile >= 10000 + 1024, `LimitNOFILE ${nofile} covers the default max-connections plus open files`);
  });
});
