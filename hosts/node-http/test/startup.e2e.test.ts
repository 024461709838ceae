/**
 * Start-up failures of the real hosts: each is ONE line on stderr naming the cause and the variable
 * to fix, a non-zero exit code, no stack trace (AIGW_DEBUG=1 adds it), and never a password.
 */
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { scratchDir } from "../../../packages/core/test/support/scratch.ts"
import { type FailedStart, freePort, startExpectingFailure } from "./support/server.ts"
// @ts-expect-error: a plain .mjs script without declarations
import { minimum, nodeProblem } from "../../../scripts/node-version.mjs"

/** Asserts the documented shape and returns the line. */
const oneLineFailure = (result: FailedStart, variable: string): string => {
  expect(result.code, `still running or exited 0; stderr:\n${result.stderr}\nstdout:\n${result.stdout}`).not.toBe(0)
  expect(result.code).not.toBeNull()
  const lines = result.stderr.trimEnd().split("\n")
  expect(lines, result.stderr).toHaveLength(1)
  const line = lines[0]!
  expect(line.startsWith("aigw: ")).toBe(true)
  expect(line).toContain(variable)
  expect(`${result.stderr}${result.stdout}`).not.toMatch(/^\s+at /m)
  return line
}

const T = 120_000

describe("start-up failures of the node host", () => {
  let occupied: net.Server
  let occupiedPort: number

  beforeAll(async () => {
    occupied = net.createServer()
    occupiedPort = await new Promise<number>((resolve) => occupied.listen(0, "127.0.0.1", () => resolve((occupied.address() as net.AddressInfo).port)))
  })
  afterAll(async () => {
    await new Promise((resolve) => occupied?.close(resolve))
  })

  it("a port in use: the address, the cause and PORT/HOST", async () => {
    const line = oneLineFailure(await startExpectingFailure({}, { port: occupiedPort }), "PORT")
    expect(line).toBe(`aigw: cannot listen on 127.0.0.1:${occupiedPort}: address already in use (set PORT or HOST)`)
  }, T)

  it("an unreachable PostgreSQL: the URL without its password, the reason and DATABASE_URL", async () => {
    const closed = await freePort()
    const result = await startExpectingFailure({ DATABASE_URL: `postgres://u:secret@127.0.0.1:${closed}/db` })
    const line = oneLineFailure(result, "DATABASE_URL")
    expect(line).toBe(`aigw: cannot reach the database at postgres://u:***@127.0.0.1:${closed}/db: connection refused (check DATABASE_URL)`)
    expect(result.stderr + result.stdout).not.toContain("secret")
  }, T)

  it("invalid values name their variable", async () => {
    expect(oneLineFailure(await startExpectingFailure({ PORT: "abc" }), "PORT")).toBe(
      'aigw: invalid configuration: PORT: expected an integer value but received "abc" (check PORT)'
    )
    expect(oneLineFailure(await startExpectingFailure({ AIGW_SANDBOX: "weird" }), "AIGW_SANDBOX")).toContain(
      'AIGW_SANDBOX: expected one of (auto, bwrap, process, off) but received "weird"'
    )
    expect(oneLineFailure(await startExpectingFailure({ AIGW_MAX_JSON_DEPTH: "-1" }), "AIGW_MAX_JSON_DEPTH")).toBe(
      "aigw: invalid configuration: AIGW_MAX_JSON_DEPTH must be a positive integer (check AIGW_MAX_JSON_DEPTH)"
    )
    expect(oneLineFailure(await startExpectingFailure({ AIGW_KEY_CACHE_SECONDS: "-5" }), "AIGW_KEY_CACHE_SECONDS")).toBe(
      "aigw: invalid configuration: AIGW_KEY_CACHE_SECONDS: must be 0 (off) or a number of seconds (check AIGW_KEY_CACHE_SECONDS)"
    )
    expect(oneLineFailure(await startExpectingFailure({ AIGW_MALLOC_TRIM_MS: "-5" }), "AIGW_MALLOC_TRIM_MS")).toBe(
      "aigw: invalid configuration: AIGW_MALLOC_TRIM_MS: must be 0 (off) or a number of milliseconds (check AIGW_MALLOC_TRIM_MS)"
    )
  }, 5 * T)

  it("an unknown plan in AIGW_PLAN_LIMITS is an error naming the key and the plans", async () => {
    const line = oneLineFailure(await startExpectingFailure({ AIGW_PLAN_LIMITS: '{"Fre":100}' }), "AIGW_PLAN_LIMITS")
    expect(line).toContain('unknown plan "Fre"; the plans are Free, Bronze, Silver, Gold, Enterprise')
  }, T)

  it("an unknown key in the AIGW_CONFIG file is an error naming the key", async () => {
    const dir = scratchDir("aigw-startup-")
    const file = path.join(dir, "aigw.json")
    fs.writeFileSync(file, JSON.stringify({ AIGW_LOG_REQUESTS: "true", AIGW_MAX_BODYBYTES: 1000 }))
    const line = oneLineFailure(await startExpectingFailure({ AIGW_CONFIG: file }), "AIGW_CONFIG")
    expect(line).toContain('unknown key "AIGW_MAX_BODYBYTES" (did you mean "AIGW_MAX_BODY_BYTES"?)')
    expect(line).toContain(file)
  }, T)

  it("an unwritable data directory names AIGW_DATA_DIR", async () => {
    const dir = scratchDir("aigw-startup-")
    fs.writeFileSync(path.join(dir, "a-file"), "")
    const dataDir = path.join(dir, "a-file", "data")
    const line = oneLineFailure(await startExpectingFailure({ AIGW_DATA_DIR: dataDir }), "AIGW_DATA_DIR")
    expect(line).toBe(`aigw: cannot write to the data directory ${dataDir}: a part of the path is not a directory (check AIGW_DATA_DIR)`)
  }, T)

  it("an unsupported DATABASE_URL scheme names DATABASE_URL, without the password", async () => {
    const result = await startExpectingFailure({ DATABASE_URL: "mysql://u:secret@127.0.0.1/db" })
    expect(oneLineFailure(result, "DATABASE_URL")).toBe(
      'aigw: unsupported database URL "mysql:…" (DATABASE_URL must start with postgres://, postgresql:// or sqlite:)'
    )
    expect(result.stderr + result.stdout).not.toContain("secret")
  }, T)

  it("AIGW_DEBUG=1 adds the full cause after the line", async () => {
    const result = await startExpectingFailure({ AIGW_DEBUG: "1" }, { port: occupiedPort })
    expect(result.code).not.toBe(0)
    const lines = result.stderr.trimEnd().split("\n")
    expect(lines[0]).toBe(`aigw: cannot listen on 127.0.0.1:${occupiedPort}: address already in use (set PORT or HOST)`)
    expect(result.stderr).toMatch(/EADDRINUSE/)
    expect(result.stderr).toMatch(/^\s+at /m)
  }, T)
})

describe("start-up failures of the MCP stdio host", () => {
  it("an unreachable PostgreSQL: one line on stderr, nothing on stdout (the protocol stream)", async () => {
    const closed = await freePort()
    const result = await startExpectingFailure({ DATABASE_URL: `postgres://u:secret@127.0.0.1:${closed}/db` }, { host: "mcp" })
    expect(oneLineFailure(result, "DATABASE_URL")).toBe(
      `aigw: cannot reach the database at postgres://u:***@127.0.0.1:${closed}/db: connection refused (check DATABASE_URL)`
    )
    expect(result.stdout).toBe("")
  }, T)

  it("an invalid AIGW_MALLOC_TRIM_MS names the variable", async () => {
    const result = await startExpectingFailure({ AIGW_MALLOC_TRIM_MS: "often" }, { host: "mcp" })
    expect(oneLineFailure(result, "AIGW_MALLOC_TRIM_MS")).toContain('AIGW_MALLOC_TRIM_MS: expected an integer value but received "often"')
    expect(result.stdout).toBe("")
  }, T)
})

describe("npm start on an older Node.js", () => {
  it("names the version it needs (package.json engines), in one line", () => {
    expect(minimum).toBe(JSON.parse(fs.readFileSync(path.join(__dirname, "../../../package.json"), "utf8")).engines.node.replace(">=", ""))
    expect(nodeProblem("20.18.3")).toBe(`aigw needs Node.js ${minimum} or newer (package.json "engines"); this is Node.js 20.18.3`)
    expect(nodeProblem("18.20.8")).toMatch(/^aigw needs Node\.js/)
    for (const ok of [minimum, "20.19.5", "20.20.2", "22.1.0", "24.0.0"]) expect(nodeProblem(ok), ok).toBeUndefined()
    expect(nodeProblem()).toBeUndefined()
  })
})

describe("the node options of npm start", () => {
  it("are valid V8 flags of this Node.js, and the Dockerfile runs the same bundle with the same flags and environment", async () => {
    // @ts-expect-error: a plain .mjs script without declarations
    const { startEnvironment, startNodeOptions } = await import("../../../scripts/node-options.mjs")
    const flags: Array<string> = startNodeOptions()
    const environment: Record<string, string> = startEnvironment()
    expect(environment).toEqual({ MALLOC_ARENA_MAX: "2", MALLOC_MMAP_THRESHOLD_: "131072" })
    expect(flags).toEqual(expect.arrayContaining([expect.stringMatching(/^--max-semi-space-size=\d+$/), expect.stringMatching(/^--heap-growing-percent=\d+$/)]))
    const { spawnSync } = await import("node:child_process")
    const run = spawnSync(process.execPath, [...flags, "-e", "process.stdout.write('ok')"], { encoding: "utf8" })
    expect({ status: run.status, stdout: run.stdout, stderr: run.stderr }).toEqual({ status: 0, stdout: "ok", stderr: "" })
    const dockerfile = fs.readFileSync(path.join(__dirname, "../../../Dockerfile"), "utf8")
    const cmd = /^CMD (\[.*\])$/m.exec(dockerfile)?.[1]
    expect(cmd && JSON.parse(cmd)).toEqual(["node", ...flags, "hosts/node-http/dist/aigw.mjs"])
    // ENV NAME=value, possibly continued over several lines
    const envBlock = /^ENV ((?:.*\\\n)*.*)$/m.exec(dockerfile)?.[1] ?? ""
    for (const [name, value] of Object.entries(environment)) expect(envBlock).toMatch(new RegExp(`(^|\\s)${name}=${value}(\\s|$)`))
  })
})
