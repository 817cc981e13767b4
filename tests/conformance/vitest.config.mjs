// vitest configuration for the conformance run.
//
// EXCLUSIONS (the one place they are decided): the "Fork - ..." describe
// blocks (82 tests) are excluded until stream forks are built (issue 3);
// subscription tests are off via `subscriptions: false` in
// conformance.test.mjs for the same reason.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["conformance.test.mjs"],
    exclude: [],
    testNamePattern: /^(?!Fork - )/,
    reporters: ["default"],
  },
});
