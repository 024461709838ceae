/**
 * @aigw/core as a consumer gets it: `npm pack` the package into a scratch directory, unpack the
 * tarball into a scratch project's node_modules (its dependencies are the workspace's installed
 * ones, linked, so nothing is fetched or compiled), then run the README's embedding example with
 * plain `node` (no tsx) and compile it with a strict NodeNext `tsc`: 0 errors.
 * The vitest global setup (scripts/vitest-global-setup.mjs) has built packages/core/dist.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { scratchDir } from "../../../packages/core/test/support/scratch.ts"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..")
const coreDir = path.join(root, "packages/core")
const tsc = createRequire(path.join(root, "package.json")).resolve("typescript/bin/tsc")

const readmeExample = () => {
  const match = /<!-- embed-example -->\s*```ts\n([\s\S]*?)```/.exec(fs.readFileSync(path.join(root, "README.md"), "utf8"))
  if (!match) throw new Error("README.md has no embed-example block")
  return match[1]!
}

/** A child process with a time bound; its output (both streams) on failure. */
const run = (file: string, args: Array<string>, cwd: string, timeout = 120_000) => {
  try {
    return execFileSync(file, args, { cwd, encoding: "utf8", timeout, stdio: ["ignore", "pipe", "pipe"], env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" } })
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; message: string }
    throw new Error(`${path.basename(file)} ${args.join(" ")} failed: ${err.message}\n${err.stdout ?? ""}\n${err.stderr ?? ""}`)
  }
}

describe("the packed @aigw/core in a consumer project", () => {
  let scratch: string
  let app: string
  let files: Array<string>

  beforeAll(() => {
    scratch = scratchDir("aigw-pack-")
    // npm pack: the tarball and its file list (prepack rebuilds dist only if it is stale)
    const packed = JSON.parse(
      run("npm", ["pack", "--json", "--pack-destination", scratch, "--workspace", "packages/core", "--loglevel", "error"], root, 180_000)
    ) as Array<{ filename: string; files: Array<{ path: string }> }>
    files = packed[0]!.files.map((f) => f.path)
    const tarball = path.join(scratch, packed[0]!.filename)

    // The scratch project: type module; node_modules = the workspace's packages (links) + the tarball unpacked.
    app = path.join(scratch, "app")
    const modules = path.join(app, "node_modules")
    fs.mkdirSync(path.join(modules, "@aigw", "core"), { recursive: true })
    for (const entry of fs.readdirSync(path.join(root, "node_modules"))) {
      if (entry === "@aigw" || entry.startsWith(".")) continue
      fs.symlinkSync(path.join(root, "node_modules", entry), path.join(modules, entry))
    }
    run("tar", ["-xzf", tarball, "-C", path.join(modules, "@aigw", "core"), "--strip-components=1"], scratch)
    // what npm would nest under the package (versions that differ from the hoisted ones)
    const nested = path.join(coreDir, "node_modules")
    if (fs.existsSync(nested)) {
      fs.mkdirSync(path.join(modules, "@aigw", "core", "node_modules"))
      for (const entry of fs.readdirSync(nested)) {
        if (!entry.startsWith(".")) fs.symlinkSync(path.join(nested, entry), path.join(modules, "@aigw", "core", "node_modules", entry))
      }
    }
    fs.writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "aigw-consumer", private: true, type: "module" }, null, 2))
    const code = readmeExample()
    fs.writeFileSync(path.join(app, "example.mjs"), code)
    fs.writeFileSync(path.join(app, "example.ts"), code)
    fs.writeFileSync(
      path.join(app, "tsconfig.json"),
      JSON.stringify(
        {
          compilerOptions: {
            target: "ES2022",
            module: "NodeNext",
            moduleResolution: "NodeNext",
            strict: true,
            noEmit: true,
            types: ["node"],
            skipLibCheck: false
          },
          files: ["example.ts"]
        },
        null,
        2
      )
    )
  }, 240_000)

  afterAll(() => {
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true })
  })

  it("ships dist (JavaScript, declarations, the sandbox runner), package.json and README, no sources", () => {
    expect(files).toContain("package.json")
    expect(files).toContain("README.md")
    expect(files).toContain("dist/index.js")
    expect(files).toContain("dist/index.d.ts")
    expect(files).toContain("dist/Capabilities/Sandbox.js")
    expect(files).toContain("dist/Capabilities/Sandbox/runner.cjs")
    expect(files.filter((f) => !f.startsWith("dist/") && f !== "package.json" && f !== "README.md")).toEqual([])
    expect(files.filter((f) => f.endsWith(".tsbuildinfo"))).toEqual([])
    expect(files.filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))).toEqual([])
  })

  it("runs the README example with plain node", () => {
    const out = run(process.execPath, ["example.mjs"], app, 60_000)
    expect(out).toContain("200 ok")
    expect(out).toContain("Avatar registered.")
    expect(out).toContain("1 ada@example.com")
  }, 90_000)

  it("compiles the README example with a strict NodeNext tsc, without errors", () => {
    run(process.execPath, [tsc, "-p", "tsconfig.json"], app, 150_000)
  }, 180_000)

  it("exports what embedders need from the index, resolvable from plain node", () => {
    const names = run(process.execPath, ["--input-type=module", "-e", "import * as core from '@aigw/core'; console.log(Object.keys(core).join(' '))"], app, 60_000)
    for (const name of ["Embed", "Layers", "Mailer", "GatewayConfig", "Completions", "Catalog", "Routing", "Embeddings", "CodeExecution", "MallocTrim"]) {
      expect(names.split(/\s+/)).toContain(name)
    }
  }, 90_000)

  it("takes effect and @effect/platform from the project (peer dependencies): one copy, never a second beside the project's", () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(app, "node_modules/@aigw/core/package.json"), "utf8"))
    expect(manifest.peerDependencies).toEqual({ effect: expect.stringMatching(/^\^3\./), "@effect/platform": expect.stringMatching(/^\^0\./) })
    expect(manifest.dependencies.effect).toBeUndefined()
    expect(manifest.dependencies["@effect/platform"]).toBeUndefined()
  })

  it("does not depend on @aigw/malloc-trim (no registry has it: a consumer's npm ci failed on it); without it, MallocTrim says why it cannot trim", () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(app, "node_modules/@aigw/core/package.json"), "utf8"))
    expect(manifest.optionalDependencies?.["@aigw/malloc-trim"]).toBeUndefined()
    expect(manifest.dependencies["@aigw/malloc-trim"]).toBeUndefined()
    // Every dependency it names is one a registry has: none of the workspace's own packages.
    expect(Object.keys({ ...manifest.dependencies, ...manifest.optionalDependencies }).filter((name) => name.startsWith("@aigw/"))).toEqual([])
    // the scratch project links every installed package but the @aigw ones: the addon is absent here
    const out = run(process.execPath, [
      "--input-type=module",
      "-e",
      "import { MallocTrim } from '@aigw/core'; import { Effect } from 'effect'; const t = await Effect.runPromise(MallocTrim.loadTrimmer); console.log(JSON.stringify({ trim: typeof t.trim, problem: t.problem }))"
    ], app, 60_000)
    const trimmer = JSON.parse(out)
    expect(trimmer.trim).toBe("undefined")
    expect(trimmer.problem).toContain("@aigw/malloc-trim could not be loaded")
  }, 90_000)

  it("packs @aigw/malloc-trim with its sources, for npm to compile at install", () => {
    const packed = JSON.parse(
      run("npm", ["pack", "--dry-run", "--json", "--workspace", "packages/malloc-trim", "--loglevel", "error"], root, 60_000)
    ) as Array<{ files: Array<{ path: string }> }>
    expect(packed[0]!.files.map((f) => f.path).sort()).toEqual(["binding.gyp", "index.cjs", "index.d.cts", "malloc_trim.c", "package.json"])
  }, 90_000)
})
