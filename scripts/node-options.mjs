/**
 * The node options the gateway runs with: the V8 flags of `npm start` in the root package.json,
 * which is their one source. The benchmark starts aigw with them and a test checks that the
 * Dockerfile's command carries the same (docs/performance.md, "Memory").
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

/** The `--flags` between `node` and `scripts/start.mjs` in package.json's start script. */
export const startNodeOptions = () => {
  const start = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")).scripts.start
  const m = /^node((?:\s+--\S+)*)\s+scripts\/start\.mjs\b/.exec(start)
  if (!m) throw new Error(`package.json's start script is not "node [--flags] scripts/start.mjs …": ${start}`)
  return m[1].trim().split(/\s+/).filter(Boolean)
}
