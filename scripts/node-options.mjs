/**
 * How the gateway's process is started: the environment, the launcher and the V8 flags of `npm start`
 * in the root package.json, which is their one source. The benchmark starts aigw with them and a test checks that
 * the Dockerfile carries the same (docs/performance.md, "Memory").
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

/**
 * package.json's start script: `[NAME=${NAME:-value} …] exec sh scripts/node.sh [--flags] scripts/start.mjs …`.
 * Each variable is the operator's when set, else the script's value (the one returned here).
 */
const startScript = () => {
  const start = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")).scripts.start
  const m = /^((?:([A-Z_][A-Z0-9_]*)=\$\{\2:-\S*\}\s+)*)exec sh scripts\/node\.sh((?:\s+--\S+)*)\s+scripts\/start\.mjs\b/.exec(start)
  if (!m) throw new Error(`package.json's start script is not "[NAME=\${NAME:-value} …] exec sh scripts/node.sh [--flags] scripts/start.mjs …": ${start}`)
  const assignments = m[1].trim().split(/\s+/).filter(Boolean).map((a) => a.replace(/^([A-Z_][A-Z0-9_]*)=\$\{\1:-(\S*)\}$/, "$1=$2"))
  return { assignments, flags: m[3].trim().split(/\s+/).filter(Boolean) }
}

/** The `--flags` between the launcher and `scripts/start.mjs`. */
export const startNodeOptions = () => startScript().flags

/**
 * The command that starts node as `npm start` does: the launcher that adds V8's single-threaded
 * garbage collector when the process has one CPU (scripts/node.sh), then node's arguments.
 */
export const nodeLauncher = () => ["sh", path.join(root, "scripts/node.sh")]

/** `["NAME=value", …]` or `"NAME=value …"` → `{ NAME: "value", … }` */
export const parseAssignments = (assignments) =>
  Object.fromEntries(
    (typeof assignments === "string" ? assignments.split(/\s+/).filter(Boolean) : assignments).map((a) => [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)])
  )

/** The variables the start script sets before `node` (the C library's, which must be set before the process starts). */
export const startEnvironment = () => parseAssignments(startScript().assignments)
