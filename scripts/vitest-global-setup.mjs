/**
 * Vitest global setup of the projects whose tests start hosts in child processes (the node host's
 * bundle, the MCP host through tsx) or bundle them (esbuild): those children run the build's output
 * (hosts/node-http/dist/aigw.mjs; `@aigw/core` without the "@aigw/source" condition, i.e.
 * packages/core/dist), so the build is brought up to date with the sources first (incremental,
 * skipped when nothing changed). In-process tests resolve core to src/*.ts (resolve.conditions).
 */
import { ensureBuilt } from "./build.mjs"

export default function setup() {
  ensureBuilt()
}
