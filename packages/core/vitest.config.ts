import { defineProject } from "vitest/config"
import { resolveSources } from "../../scripts/vitest-conditions.mjs"

export default defineProject({
  ...resolveSources,
  test: {
    name: "core",
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000
  }
})
