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
  },
});
