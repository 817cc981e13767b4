// The S3 test endpoint's control port (tests/s3/proxy.py): faults, state,
// switches and the recent requests, for the tests run through
// tests/s3/run_with_endpoint.sh (S3_CONTROL in the environment).
import assert from "node:assert/strict";

export async function control(method, p, body) {
  const r = await fetch(`${process.env.S3_CONTROL}${p}`, {
    method,
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10000),
  });
  assert.ok(r.ok, `proxy control ${method} ${p}: ${r.status}`);
  return r.json();
}
export const counts = async () => (await control("GET", "/state")).counts;
export const clearFaults = () => control("DELETE", "/faults");
export const fault = (rule) => control("POST", "/faults", rule);
