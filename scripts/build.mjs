#!/usr/bin/env node
/**
 * Builds @aigw/core and the Node and MCP hosts to JavaScript with declarations (tsc emit, incremental:
 * `tsc -b tsconfig.build.json`): packages/core/dist, hosts/node-http/dist, hosts/mcp/dist. Copies the
 * assets tsc does not emit (the sandbox runner and the sentence-model worker, found next to the modules that start them) into core's dist.
 * Then bundles the node host into hosts/node-http/dist/aigw.mjs (scripts/bundle.mjs), the program
 * `npm start` and the container run.
 *
 *   node scripts/build.mjs            build everything (exit code 1 on type errors; JS is emitted anyway)
 *   node scripts/build.mjs --if-stale build only if an output is missing or older than a source
 *
 * Also imported by scripts/start.mjs and the test setup (test/support/build.ts): `ensureBuilt()`.
 * One build at a time across processes (a lock directory under dist/); a second caller waits for it.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { hostBundle, v8Major } from "./bundle.mjs"

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const core = path.join(root, "packages/core")

/** Files tsc does not emit that must sit at the same place relative to the built modules. */
const assets = ["Capabilities/Sandbox/runner.cjs", "Ml/SentenceModel.worker.cjs"]

/** What a complete build leaves behind. */
export const outputs = [
  path.join(core, "dist/index.js"),
  path.join(core, "dist/index.d.ts"),
  ...assets.map((a) => path.join(core, "dist", a)),
  path.join(root, "hosts/node-http/dist/main.js"),
  path.join(root, "hosts/mcp/dist/main.js"),
  hostBundle
]

/** Inputs of the build: sources, the build configurations, the manifests. */
const inputDirs = [path.join(core, "src"), path.join(root, "hosts/node-http/src"), path.join(root, "hosts/mcp/src")]
const inputFiles = [
  "tsconfig.base.json",
  "tsconfig.build.json",
  "package.json",
  "packages/core/tsconfig.build.json",
  "packages/core/package.json",
  "hosts/node-http/tsconfig.build.json",
  "hosts/node-http/package.json",
  "hosts/mcp/tsconfig.build.json",
  "hosts/mcp/package.json",
  "scripts/build.mjs",
  "scripts/bundle.mjs"
].map((f) => path.join(root, f))

const stampFile = path.join(root, "dist/build/stamp")
const lockDir = path.join(root, "dist/build/lock")

const newestIn = (dir) => {
  let newest = 0
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name)
    newest = Math.max(newest, entry.isDirectory() ? newestIn(p) : fs.statSync(p).mtimeMs)
  }
  return newest
}

/** The stamp a completed build writes: when, tsc's status, and the V8 that built the bundle. */
export const stampText = (tscStatus, at = new Date()) => `${at.toISOString()} tsc exit ${tscStatus} v8 ${v8Major}\n`
/** Whether a stamp's build was made by this node's V8: the bundle's form depends on it (scripts/bundle.mjs, lowersObjectSpread). */
export const builtByThisV8 = (stamp) => stamp.endsWith(` v8 ${v8Major}\n`)

/** Why a build is needed ("" when the outputs are complete and newer than every input). */
export const staleness = () => {
  const missing = outputs.find((f) => !fs.existsSync(f))
  if (missing) return `${path.relative(root, missing)} is missing`
  if (!fs.existsSync(stampFile)) return "no completed build recorded"
  if (!builtByThisV8(fs.readFileSync(stampFile, "utf8"))) return "built by another version of node"
  const built = fs.statSync(stampFile).mtimeMs
  const newest = Math.max(...inputDirs.map(newestIn), ...inputFiles.filter((f) => fs.existsSync(f)).map((f) => fs.statSync(f).mtimeMs))
  return newest > built ? "sources changed since the last build" : ""
}

const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

const alive = (pid) => {
  if (!Number.isInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return e.code === "EPERM"
  }
}

const withLock = (fn) => {
  fs.mkdirSync(path.dirname(lockDir), { recursive: true })
  const deadline = Date.now() + 10 * 60_000
  for (;;) {
    try {
      fs.mkdirSync(lockDir)
      fs.writeFileSync(path.join(lockDir, "pid"), String(process.pid))
      break
    } catch (e) {
      if (e.code !== "EEXIST") throw e
      // A lock whose process is gone (or older than 10 minutes) belongs to a build that died.
      try {
        const holder = Number(fs.readFileSync(path.join(lockDir, "pid"), "utf8"))
        if (!alive(holder) || Date.now() - fs.statSync(lockDir).mtimeMs > 10 * 60_000) fs.rmSync(lockDir, { recursive: true, force: true })
      } catch {
        // released meanwhile, or its pid not written yet
      }
      if (Date.now() > deadline) throw new Error(`aigw build: ${lockDir} is held by another build for too long`)
      sleep(250)
    }
  }
  try {
    return fn()
  } finally {
    fs.rmSync(lockDir, { recursive: true, force: true })
  }
}

/**
 * Runs the incremental build. Returns tsc's exit status (0: clean; 1 or 2: type errors, JavaScript
 * emitted all the same). tsc's diagnostics go to stderr (stdout may be a protocol channel: MCP stdio).
 */
const runBuild = () => {
  let tsc
  try {
    tsc = createRequire(path.join(root, "package.json")).resolve("typescript/bin/tsc")
  } catch {
    throw new Error("aigw build: TypeScript is not installed (run `npm install`, with dev dependencies)")
  }
  const started = Date.now()
  const result = spawnSync(process.execPath, [tsc, "-b", path.join(root, "tsconfig.build.json")], {
    cwd: root,
    stdio: ["ignore", 2, 2]
  })
  if (result.error) throw result.error
  for (const asset of assets) {
    const to = path.join(core, "dist", asset)
    fs.mkdirSync(path.dirname(to), { recursive: true })
    fs.copyFileSync(path.join(core, "src", asset), to)
  }
  // In its own process: esbuild's plugins need its asynchronous API, and this build is synchronous.
  const bundled = spawnSync(process.execPath, [path.join(root, "scripts/bundle.mjs")], { cwd: root, stdio: ["ignore", 2, 2] })
  if (bundled.error) throw bundled.error
  if (bundled.status !== 0) throw new Error("aigw build: bundling the node host failed (see above)")
  const missing = outputs.find((f) => !fs.existsSync(f))
  if (missing) throw new Error(`aigw build: ${path.relative(root, missing)} was not produced`)
  fs.mkdirSync(path.dirname(stampFile), { recursive: true })
  fs.writeFileSync(stampFile, stampText(result.status))
  process.stderr.write(`aigw build: done in ${((Date.now() - started) / 1000).toFixed(1)} s${result.status === 0 ? "" : " (with type errors, see above)"}\n`)
  return result.status ?? 1
}

/** Builds when an output is missing or older than a source; returns the reason it built ("" if not). */
export const ensureBuilt = () => {
  const reason = staleness()
  if (!reason) return ""
  return withLock(() => {
    // Another process may have finished the same build while this one waited for the lock.
    const still = staleness()
    if (!still) return ""
    process.stderr.write(`aigw build: ${still}; building (tsc -b tsconfig.build.json)\n`)
    runBuild()
    return still
  })
}

/** Always runs the (incremental) build; returns tsc's exit status. */
export const build = () => withLock(runBuild)

if (process.argv[1] && import.meta.url === pathToFileURL(fs.realpathSync(process.argv[1])).href) {
  try {
    if (process.argv.includes("--if-stale")) ensureBuilt()
    else process.exitCode = build() === 0 ? 0 : 1
  } catch (e) {
    process.stderr.write(`${e instanceof Error ? e.message : e}\n`)
    process.exitCode = 1
  }
}
