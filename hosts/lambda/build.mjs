#!/usr/bin/env node
/**
 * Bundles the Lambda host: dist/handler.mjs (one ESM file, node20) plus argon2 with its native
 * binaries for linux-x64 and linux-arm64 (glibc, the Lambda runtimes) under dist/node_modules.
 *
 *  - argon2 stays external: its loader (node-gyp-build) finds the binary relative to argon2's own
 *    directory, so argon2.cjs, its two small dependencies and the two prebuilds are copied as files.
 *  - The SQLite driver is not shipped: `better-sqlite3` (imported statically by core's
 *    Storage/Sql/Sqlite.ts) is replaced by a stub that throws if used; the handler refuses
 *    non-PostgreSQL DATABASE_URLs before any layer is built, so the stub is never reached.
 *  - `pg-native` (an optional peer of pg, used only with `pg.native`) is left external and absent.
 *  - `@aigw/malloc-trim` (the node and MCP hosts' optional addon, which only they load: MallocTrim.ts) is
 *    left external and absent; a Lambda function's memory is what it is configured with.
 *  - The document readers of the sandbox (core's Capabilities/Sandbox.ts finds them next to the bundle):
 *    the runner as dist/Sandbox/runner.cjs, unpdf as it is published (no dependencies), and mammoth
 *    bundled with its dependencies into one file, so the sandbox reads two package directories. The
 *    code interpreters (Pyodide, QuickJS) are not shipped: code execution answers 501 on Lambda.
 *
 * Usage: node build.mjs [--sourcemap] [--no-minify] [--meta FILE]; prints the sizes.
 */
import * as esbuild from "esbuild"
import * as fs from "node:fs"
import * as path from "node:path"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"
import { esmRequireBanner } from "../../scripts/bundle.mjs"

const here = path.dirname(fileURLToPath(import.meta.url))
const dist = path.join(here, "dist")
const argv = process.argv.slice(2)
const args = new Set(argv)
/** --meta FILE: write esbuild's metafile there (kept out of dist/, which is what gets deployed) */
const metaFile = argv.includes("--meta") ? argv[argv.indexOf("--meta") + 1] : undefined
const require = createRequire(path.join(here, "package.json"))

const sqliteStub = {
  name: "no-sqlite",
  setup(build) {
    build.onResolve({ filter: /^better-sqlite3(\/.*)?$/ }, (args) => ({ path: args.path, namespace: "no-sqlite" }))
    build.onLoad({ filter: /.*/, namespace: "no-sqlite" }, (args) => ({
      contents: `
        const unavailable = () => { throw new Error("SQLite is not available in the aigw Lambda bundle (${args.path}); use a postgres:// DATABASE_URL") }
        export default unavailable
      `,
      loader: "js"
    }))
  }
}

fs.rmSync(dist, { recursive: true, force: true })
fs.mkdirSync(dist, { recursive: true })

const result = await esbuild.build({
  entryPoints: [path.join(here, "src/handler.ts")],
  outfile: path.join(dist, "handler.mjs"),
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  minify: !args.has("--no-minify"),
  sourcemap: args.has("--sourcemap") ? "linked" : false,
  legalComments: "none",
  metafile: true,
  logLevel: "warning",
  external: ["argon2", "pg-native", "@aigw/malloc-trim"],
  plugins: [sqliteStub],
  // CommonJS dependencies inside an ES module need require / __filename / __dirname.
  banner: { js: esmRequireBanner }
})

/** Copies `files` (relative to the package directory) of an installed package into dist/node_modules. */
const copyPackage = (name, files) => {
  const from = path.dirname(require.resolve(`${name}/package.json`, { paths: [path.dirname(require.resolve("argon2/package.json")), here] }))
  const to = path.join(dist, "node_modules", name)
  for (const file of ["package.json", ...files]) {
    const source = path.join(from, file)
    if (!fs.existsSync(source)) continue
    fs.mkdirSync(path.dirname(path.join(to, file)), { recursive: true })
    fs.copyFileSync(source, path.join(to, file))
  }
}

copyPackage("argon2", [
  "argon2.cjs",
  "LICENSE",
  "prebuilds/linux-x64/argon2.glibc.node",
  "prebuilds/linux-arm64/argon2.armv8.glibc.node"
])
copyPackage("node-gyp-build", ["index.js", "node-gyp-build.js", "LICENSE"])
copyPackage("@phc/format", ["index.js", "license"])
for (const needed of ["argon2/prebuilds/linux-x64/argon2.glibc.node", "argon2/prebuilds/linux-arm64/argon2.armv8.glibc.node"]) {
  if (!fs.existsSync(path.join(dist, "node_modules", needed))) throw new Error(`missing ${needed}: is argon2 installed with its prebuilds?`)
}
// The sandbox's document readers (docs/deployment-lambda.md).
const coreRequire = createRequire(path.join(here, "../../packages/core/package.json"))
fs.mkdirSync(path.join(dist, "Sandbox"), { recursive: true })
fs.copyFileSync(path.join(here, "../../packages/core/src/Capabilities/Sandbox/runner.cjs"), path.join(dist, "Sandbox", "runner.cjs"))
// unpdf exports no package.json: its directory is two above its CommonJS entry (dist/index.cjs).
const unpdf = path.resolve(path.dirname(coreRequire.resolve("unpdf")), "..")
for (const file of ["package.json", "LICENSE", "dist/index.cjs", "dist/pdfjs.mjs"]) {
  fs.mkdirSync(path.dirname(path.join(dist, "node_modules", "unpdf", file)), { recursive: true })
  fs.copyFileSync(path.join(unpdf, file), path.join(dist, "node_modules", "unpdf", file))
}
const mammoth = path.dirname(coreRequire.resolve("mammoth/package.json"))
const mammothOut = path.join(dist, "node_modules", "mammoth")
await esbuild.build({
  entryPoints: [coreRequire.resolve("mammoth")],
  outfile: path.join(mammothOut, "index.cjs"),
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node20",
  legalComments: "none",
  logLevel: "warning"
})
const { license, name, version } = JSON.parse(fs.readFileSync(path.join(mammoth, "package.json"), "utf8"))
fs.writeFileSync(path.join(mammothOut, "package.json"), JSON.stringify({ name, version, license, main: "index.cjs", description: "mammoth and its dependencies in one file (hosts/lambda/build.mjs)" }, null, 2))
fs.copyFileSync(path.join(mammoth, "LICENSE"), path.join(mammothOut, "LICENSE"))

if (metaFile) fs.writeFileSync(metaFile, JSON.stringify(result.metafile))

const sizeOf = (dir) =>
  fs.readdirSync(dir, { withFileTypes: true }).reduce(
    (sum, e) => sum + (e.isDirectory() ? sizeOf(path.join(dir, e.name)) : fs.statSync(path.join(dir, e.name)).size),
    0
  )
const kb = (n) => `${(n / 1024).toFixed(0)} KiB`
const bundle = fs.statSync(path.join(dist, "handler.mjs")).size
const modules = (...names) => names.reduce((sum, n) => sum + sizeOf(path.join(dist, "node_modules", n)), 0)
console.log(
  `dist/handler.mjs ${kb(bundle)}; dist/ total ${kb(sizeOf(dist))} (argon2 + 2 prebuilds: ${kb(modules("argon2", "node-gyp-build", "@phc"))}; document readers: ${kb(modules("unpdf", "mammoth"))})`
)
