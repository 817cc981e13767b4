// The official Durable Streams conformance suite, run against the server at
// RUNNEL_URL (started by scripts/conformance.sh). Which tests are excluded,
// if any, is decided in one place: vitest.config.mjs. The subscription tests
// need webhook receivers on 127.0.0.1, so scripts/conformance.sh starts the
// server with --webhook-allow-loopback.
import { runConformanceTests } from "@durable-streams/server-conformance-tests";

const baseUrl = process.env.RUNNEL_URL;
if (!baseUrl) throw new Error("RUNNEL_URL must name the server under test");

runConformanceTests({
  baseUrl,
  longPollTimeoutMs: Number(process.env.RUNNEL_LONG_POLL_TIMEOUT_MS ?? 1000),
  subscriptions: true,
});
