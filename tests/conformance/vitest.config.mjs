// vitest configuration for the conformance run.
//
// EXCLUSIONS (the one place they are decided): none. Subscription tests run
// when conformance.test.mjs passes `subscriptions: true`.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["conformance.test.mjs"],
    exclude: [],
    reporters: ["default"],
    // vitest's 5 s per test unless the runner says otherwise: the cluster
    // run (scripts/conformance_cluster.sh) gives 15 s, its writes
    // replicating to three nodes on two cores (two large-payload tests
    // timed out at 5 s on a loaded machine)
    testTimeout: Number(process.env.RUNNEL_TEST_TIMEOUT_MS ?? 5000),
  },
});
