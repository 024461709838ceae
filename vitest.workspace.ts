import { defineWorkspace } from "vitest/config"
import { resolveSources } from "./scripts/vitest-conditions.mjs"

// One project per workspace; each sets its own timeouts and setup.
// Tests resolve @aigw/core to its TypeScript sources ("@aigw/source" condition, set in each project;
// for the lambda host here, whose directory stays as it is). Projects that start hosts in child
// processes or bundle them build packages/core/dist first when it is stale (scripts/build.mjs).
export default defineWorkspace([
  "packages/core/vitest.config.ts",
  "hosts/node-http/vitest.config.ts",
  "hosts/mcp/vitest.config.ts",
  {
    extends: "./hosts/lambda/vitest.config.ts",
    root: "./hosts/lambda",
    ...resolveSources,
    // its bundle test runs esbuild on the host, which takes @aigw/core from dist
    test: { globalSetup: ["../../scripts/vitest-global-setup.mjs"] }
  }
])
