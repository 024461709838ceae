/**
 * The Node.js version aigw needs, read from the root package.json's `engines.node` (">=X.Y.Z"), and
 * the one-line refusal of an older runtime: `npm start` says what to install instead of failing later
 * on an API or native module the old runtime lacks.
 */
import * as fs from "node:fs"

const engines = JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8")).engines.node
const match = /^>=\s*(\d+)\.(\d+)\.(\d+)$/.exec(engines)
if (!match) throw new Error(`package.json engines.node must read ">=X.Y.Z" (it reads ${JSON.stringify(engines)})`)

/** The lowest supported version, e.g. "20.19.0". */
export const minimum = match.slice(1).join(".")

const parts = (version) => version.split(".").map((n) => Number.parseInt(n, 10))

/** Why `version` cannot run aigw, or undefined when it can. */
export const nodeProblem = (version = process.versions.node) => {
  const [have, need] = [parts(version), parts(minimum)]
  for (let i = 0; i < 3; i++) {
    if ((have[i] ?? 0) > need[i]) return undefined
    if ((have[i] ?? 0) < need[i]) return `aigw needs Node.js ${minimum} or newer (package.json "engines"); this is Node.js ${version}`
  }
  return undefined
}
