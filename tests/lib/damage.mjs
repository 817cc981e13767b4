// Damage done to a data directory behind the server's back, as a failing
// disk would leave it, shared by the suites that test what the server
// makes of it (stream data checksums on one node and in a cluster, an
// accepted loss with history tiering, the log-damage suite).
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";

// Flips bits of the byte at `at` of file in place (mask 0x20 by default).
export function xorByte(file, at, mask = 0x20) {
  const fd = fs.openSync(file, "r+");
  const b = Buffer.alloc(1);
  fs.readSync(fd, b, 0, 1, at);
  b[0] ^= mask;
  fs.writeSync(fd, b, 0, 1, at);
  fs.closeSync(fd);
}

// The stream data file (<dataDir>/streams/<xx>/<id>.dat) whose bytes start
// with `marker` (a stream's first append chose it).
export function streamDataFile(dataDir, marker) {
  const root = path.join(dataDir, "streams");
  for (const sub of fs.readdirSync(root))
    for (const name of fs.readdirSync(path.join(root, sub)).filter((n) => n.endsWith(".dat"))) {
      const file = path.join(root, sub, name);
      if (fs.readFileSync(file).subarray(0, marker.length).toString() === marker) return file;
    }
  assert.fail(`no data file in ${dataDir} starts with ${marker}`);
}
