// Helpers of the TLS tests: a test CA and certificates made for the run
// (tests/lib/test_pki.sh), and curl over https trusting that CA (curl,
// since fetch takes extra CA certificates only from NODE_EXTRA_CA_CERTS
// at the process's start).
import { execFile, execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { tempDir } from "./server.mjs";

// Makes a PKI in a new temporary directory (see test_pki.sh for its
// files); returns {dir, file(name), ca (the CA certificate's PEM)}.
export function makePki() {
  const dir = tempDir("runnel-pki-");
  execFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), "test_pki.sh"), [dir]);
  const file = (name) => path.join(dir, name);
  return { dir, file, ca: fs.readFileSync(file("ca.pem")) };
}

// curl over https trusting pki's CA, with extra curl arguments; resolves
// {status, version, headers (lowercased names, the last answer's), body}.
export function curlTls(pki, url, args = []) {
  const bodyFile = path.join(pki.dir, `body-${process.pid}-${Math.random().toString(36).slice(2)}`);
  return new Promise((resolve, reject) => {
    execFile("curl", ["-sS", "--cacert", pki.file("ca.pem"), "--max-time", "15", "-D", "-", "-o", bodyFile, ...args, url],
      { encoding: "utf8" }, (err, stdout, stderr) => {
        if (err) return reject(new Error(`curl ${args.join(" ")} ${url}: ${stderr || err.message}`));
        const blocks = stdout.trim().split(/\r\n\r\n/);
        const lines = blocks[blocks.length - 1].split("\r\n");
        const headers = {};
        for (const l of lines.slice(1)) {
          const i = l.indexOf(":");
          headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
        }
        const body = fs.readFileSync(bodyFile, "utf8");
        fs.rmSync(bodyFile, { force: true });
        resolve({ status: Number(lines[0].split(" ")[1]), version: lines[0].split(" ")[0], headers, body });
      });
  });
}
