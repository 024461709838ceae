import { defineProject } from "vitest/config"
import { resolveSources } from "../../scripts/vitest-conditions.mjs"

export default defineProject({
  ...resolveSources,
  test: {
    name: "node-http",
    include: ["test/**/*.test.ts"],
    // child processes (tsx) load @aigw/core from dist: build it first if stale
    globalSetup: ["../../scripts/vitest-global-setup.mjs"],
    testTimeout: 60_000,
    hookTimeout: 120_000
  }
})
