import { defineWorkspace } from "vitest/config"

// One project per workspace; each sets its own timeouts and setup.
export default defineWorkspace([
  "packages/core/vitest.config.ts",
  "hosts/node-http/vitest.config.ts",
  "hosts/mcp/vitest.config.ts",
  "hosts/lambda/vitest.config.ts"
])
