// Numbered records for tests under write load: each append carries its
// stream's name and its sequence number, so a body read back proves which
// acknowledged appends it holds, in order and whole.
import assert from "node:assert/strict";

// The i-th record of stream `name` (all of one stream have one length).
export const record = (name, i) => Buffer.from(`<${name}:${String(i).padStart(6, "0")}:${"x".repeat(200)}>`);

// Appends record(name, 0), record(name, 1), ... with append(i, body), which
// resolves to the answer, until stop() resolves; every answer must be 204.
// w.acked counts the acknowledged ones.
export function recordWriter(name, append) {
  const w = { acked: 0, running: true };
  w.done = (async () => {
    for (let i = 0; w.running && i < 100000; i++) {
      const r = await append(i, record(name, i));
      assert.equal(r.status, 204, `append ${i} to ${name}: ${r.status} ${r.text}`);
      w.acked = i + 1;
    }
  })();
  w.stop = async () => {
    w.running = false;
    await w.done;
  };
  return w;
}

// The number of whole records body holds; it must be exactly records
// 0..n-1 of stream `name`.
export function wholeRecords(body, name) {
  const size = record(name, 0).length;
  assert.equal(body.length % size, 0, `${name}: ${body.length} bytes is not a whole number of appends`);
  const n = body.length / size;
  for (let i = 0; i < n; i++) {
    assert.ok(body.subarray(i * size, (i + 1) * size).equals(record(name, i)), `${name}: append ${i} differs`);
  }
  return n;
}
