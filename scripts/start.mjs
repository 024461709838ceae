#!/usr/bin/env node
/**
 * `npm start`: runs the compiled Node host (the bundle hosts/node-http/dist/aigw.mjs) with plain node,
 * in this process. Builds first (incremental tsc and the bundle, scripts/build.mjs) when dist is missing
 * or older than the sources, so a fresh clone needs only `npm install && npm start`.
 *
 *   node scripts/start.mjs [node-http|mcp]
 *
 * The working directory becomes the host's workspace directory, as with `npm start -w hosts/<host>`,
 * so the embedded defaults keep their files under hosts/<host>/data/ (AIGW_DATA_DIR moves them).
 * A relative path the operator gives (AIGW_CONFIG, AIGW_DATA_DIR, a `sqlite:` DATABASE_URL) keeps
 * meaning the directory `npm start` was run in (npm's INIT_CWD), not the host's.
 * Build messages go to stderr: the MCP host's stdout is its protocol channel.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { ensureBuilt, root } from "./build.mjs"
import { hostBundle } from "./bundle.mjs"
import { nodeProblem } from "./node-version.mjs"

const outdated = nodeProblem()
if (outdated) {
  process.stderr.write(`aigw: ${outdated}\n`)
  process.exit(1)
}

const host = process.argv[2] ?? "node-http"
const hostDir = path.join(root, "hosts", host)
// The node host runs as one bundle (scripts/bundle.mjs); the MCP host as tsc's modules.
const main = host === "node-http" ? hostBundle : path.join(hostDir, "dist/main.js")
if (!fs.existsSync(path.join(hostDir, "package.json"))) {
  process.stderr.write(`aigw: unknown host "${host}" (node-http or mcp)\n`)
  process.exit(1)
}
try {
  ensureBuilt()
} catch (e) {
  // No TypeScript (a production install without dev dependencies): run what was built, if anything.
  if (!fs.existsSync(main)) {
    process.stderr.write(`${e instanceof Error ? e.message : e}\naigw: ${path.relative(root, main)} is missing; run \`npm run build\`\n`)
    process.exit(1)
  }
  process.stderr.write(`aigw: could not rebuild (${e instanceof Error ? e.message : e}); starting the existing build\n`)
}
/**
 * A relative path given in the environment, made absolute from the directory the operator ran `npm start` in:
 * npm's INIT_CWD when npm runs this repository's own script or a workspace's (not one an outer npm run left behind).
 */
const ranByNpm = process.env.npm_package_json?.startsWith(root + path.sep) && process.env.INIT_CWD
const invokedFrom = ranByNpm ? process.env.INIT_CWD : process.cwd()
const fromInvocation = (file) => (file === "" || path.isAbsolute(file) ? file : path.resolve(invokedFrom, file))
for (const name of ["AIGW_CONFIG", "AIGW_DATA_DIR"]) {
  if (process.env[name]) process.env[name] = fromInvocation(process.env[name])
}
const database = process.env.DATABASE_URL
// sqlite:PATH (sqlite:///abs is absolute already; :memory: is no file).
if (database?.startsWith("sqlite:") && !database.startsWith("sqlite://") && database !== "sqlite::memory:") {
  process.env.DATABASE_URL = `sqlite:${fromInvocation(database.slice("sqlite:".length))}`
}
process.chdir(hostDir)
process.argv.splice(1, 2, main)
await import(pathToFileURL(main).href)
