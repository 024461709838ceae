/**
 * Start-up failures of the real hosts: each is ONE line on stderr naming the cause and the variable
 * to fix, a non-zero exit code, no stack trace (AIGW_DEBUG=1 adds it), and never a password.
 */
import Database from "better-sqlite3"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import { spawn, spawnSync } from "node:child_process"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { scratchDir } from "../../../packages/core/test/support/scratch.ts"
import { groupMembers, processTree } from "./support/attack.ts"
import { call, type FailedStart, freePort, hostEnv, startExpectingFailure, startServer } from "./support/server.ts"
import { signUp } from "./support/accounts.ts"
import { startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
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
      'aigw: invalid configuration: PORT must be a port number from 0 to 65535 (check PORT)'
    )
    expect(oneLineFailure(await startExpectingFailure({ AIGW_SANDBOX: "weird" }), "AIGW_SANDBOX")).toContain(
      'AIGW_SANDBOX: expected one of (auto, bwrap, process, off) but received "weird"'
    )
    expect(oneLineFailure(await startExpectingFailure({ AIGW_MAX_JSON_DEPTH: "-1" }), "AIGW_MAX_JSON_DEPTH")).toBe(
      "aigw: invalid configuration: AIGW_MAX_JSON_DEPTH must be a positive integer up to 10000 (check AIGW_MAX_JSON_DEPTH)"
    )
    expect(oneLineFailure(await startExpectingFailure({ AIGW_KEY_CACHE_SECONDS: "-5" }), "AIGW_KEY_CACHE_SECONDS")).toBe(
      "aigw: invalid configuration: AIGW_KEY_CACHE_SECONDS: must be 0 (off) or a number of seconds up to 2147483647 (check AIGW_KEY_CACHE_SECONDS)"
    )
    expect(oneLineFailure(await startExpectingFailure({ AIGW_MALLOC_TRIM_MS: "-5" }), "AIGW_MALLOC_TRIM_MS")).toBe(
      "aigw: invalid configuration: AIGW_MALLOC_TRIM_MS: must be 0 (off) or a number of milliseconds up to 2147483647 (check AIGW_MALLOC_TRIM_MS)"
    )
    // Past a timer's longest wait the trim never came again (Effect takes such a wait as forever): refused, as the other limits are.
    expect(oneLineFailure(await startExpectingFailure({ AIGW_MALLOC_TRIM_MS: "5000000000" }), "AIGW_MALLOC_TRIM_MS")).toContain("up to 2147483647")
    expect(oneLineFailure(await startExpectingFailure({ AIGW_KEY_CACHE_SECONDS: "5000000000" }), "AIGW_KEY_CACHE_SECONDS")).toContain("up to 2147483647")
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

  it("a bad AIGW_CONFIG file (read by its logging too) is its one line, not a silent exit", async () => {
    const dir = scratchDir("aigw-startup-")
    const file = path.join(dir, "aigw.json")
    fs.writeFileSync(file, JSON.stringify({ AIGW_MAX_BODYBYTES: 1000 }))
    const result = await startExpectingFailure({ AIGW_CONFIG: file }, { host: "mcp" })
    expect(oneLineFailure(result, "AIGW_CONFIG")).toContain('unknown key "AIGW_MAX_BODYBYTES"')
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
    expect(flags).toEqual(expect.arrayContaining([expect.stringMatching(/^--max-semi-space-size=\d+$/), expect.stringMatching(/^--heap-growing-percent=\d+$/), "--no-allocation-site-pretenuring"]))
    const run = spawnSync(process.execPath, [...flags, "-e", "process.stdout.write('ok')"], { encoding: "utf8" })
    expect({ status: run.status, stdout: run.stdout, stderr: run.stderr }).toEqual({ status: 0, stdout: "ok", stderr: "" })
    const dockerfile = fs.readFileSync(path.join(__dirname, "../../../Dockerfile"), "utf8")
    const cmd = /^CMD (\[.*\])$/m.exec(dockerfile)?.[1]
    expect(cmd && JSON.parse(cmd)).toEqual(["sh", "scripts/node.sh", ...flags, "hosts/node-http/dist/aigw.mjs"])
    // ENV NAME=value, possibly continued over several lines
    const envBlock = /^ENV ((?:.*\\\n)*.*)$/m.exec(dockerfile)?.[1] ?? ""
    for (const [name, value] of Object.entries(environment)) expect(envBlock).toMatch(new RegExp(`(^|\\s)${name}=${value}(\\s|$)`))
  })
})

describe("the launcher of npm start and the image (scripts/node.sh)", () => {
  const launcher = path.join(__dirname, "../../../scripts/node.sh")
  const has = (cmd: string) => spawnSync("sh", ["-c", `command -v ${cmd}`]).status === 0
  /** The launcher's node arguments (process.execArgv) and its pid as node saw it, with `prefix` before it (taskset, a cgroup). */
  const launch = (env: Record<string, string> = {}, prefix: Array<string> = []) => {
    const run = spawnSync(prefix[0] ?? "sh", [...prefix.slice(1), ...(prefix.length > 0 ? ["sh"] : []), launcher, "--max-semi-space-size=8", "-e", "console.log(JSON.stringify(process.execArgv))"], {
      encoding: "utf8",
      env: { ...process.env, AIGW_SINGLE_THREADED_GC: "", ...env }
    })
    return { status: run.status, stderr: run.stderr, execArgv: run.status === 0 ? (JSON.parse(run.stdout) as Array<string>) : [] }
  }
  const cpus = os.availableParallelism()

  it("adds --single-threaded-gc on one CPU (affinity), before the caller's flags", () => {
    if (!has("taskset")) return void console.warn("skipped: no taskset on this machine")
    expect(launch({}, ["taskset", "-c", "0"])).toEqual({ status: 0, stderr: "", execArgv: ["--single-threaded-gc", "--max-semi-space-size=8", "-e", expect.any(String)] })
  })

  it("leaves V8's default on more than one CPU, whatever OMP_NUM_THREADS says", () => {
    if (cpus < 2) return void console.warn("skipped: this machine has one CPU")
    expect(launch().execArgv).not.toContain("--single-threaded-gc")
    expect(launch({ OMP_NUM_THREADS: "1", OMP_THREAD_LIMIT: "1" }).execArgv).not.toContain("--single-threaded-gc")
  })

  it("follows AIGW_SINGLE_THREADED_GC=true or false instead of the count, and refuses another value in one line", () => {
    expect(launch({ AIGW_SINGLE_THREADED_GC: "true" }).execArgv[0]).toBe("--single-threaded-gc")
    if (has("taskset")) expect(launch({ AIGW_SINGLE_THREADED_GC: "false" }, ["taskset", "-c", "0"]).execArgv).not.toContain("--single-threaded-gc")
    expect(launch({ AIGW_SINGLE_THREADED_GC: "auto" }).status).toBe(0)
    const refused = launch({ AIGW_SINGLE_THREADED_GC: "yes" })
    expect(refused.status).toBe(1)
    expect(refused.stderr).toBe('aigw: AIGW_SINGLE_THREADED_GC must be auto, true or false, not "yes"\n')
  })

  it("runs node in its own place: node has the launcher's pid, so it gets the signals and the exit code", () => {
    const run = spawnSync("sh", [launcher, "-e", "console.log(process.pid); process.exitCode = 7"], { encoding: "utf8" })
    expect(run.status).toBe(7)
    expect(Number(run.stdout.trim())).toBe(run.pid)
  })

  it("adds it under a cgroup CPU quota of one CPU or less, not under a larger one (cgroup v1, where it can make one)", () => {
    const cpuGroups = "/sys/fs/cgroup/cpu"
    const group = path.join(cpuGroups, `aigw-test-${process.pid}`)
    try {
      fs.mkdirSync(group)
    } catch (e) {
      return void console.warn(`skipped: cannot make a cgroup v1 CPU group here (${(e as Error).message})`)
    }
    try {
      // The launcher is started inside the group: a shell moves itself in, then runs it.
      const inGroup = ["sh", "-c", `echo $$ > ${group}/cgroup.procs && exec "$@"`, "in-group"]
      fs.writeFileSync(path.join(group, "cpu.cfs_period_us"), "100000")
      fs.writeFileSync(path.join(group, "cpu.cfs_quota_us"), "50000")
      expect(launch({}, inGroup).execArgv[0]).toBe("--single-threaded-gc")
      fs.writeFileSync(path.join(group, "cpu.cfs_quota_us"), "100000")
      expect(launch({}, inGroup).execArgv[0]).toBe("--single-threaded-gc")
      fs.writeFileSync(path.join(group, "cpu.cfs_quota_us"), "150000")
      if (cpus >= 2) expect(launch({}, inGroup).execArgv).not.toContain("--single-threaded-gc")
    } finally {
      fs.rmdirSync(group)
    }
  })
})

describe("Ctrl-C", () => {
  // Ctrl-C signals the terminal's whole process group: the server, and npm, which relays the signal to it again.
  it("a SIGINT repeated during the graceful stop does not cut it short: the server exits 0", async () => {
    const server = await startServer({})
    // The listen line names the address as a URL (an IPv6 host would be in brackets: Config.urlHost).
    expect(server.output()).toContain(`Listening on ${server.url}`)
    const pid = server.child.pid!
    const exited = new Promise<number | null>((resolve) => server.child.once("exit", (code) => resolve(code)))
    process.kill(pid, "SIGINT")
    await new Promise((r) => setTimeout(r, 50))
    process.kill(pid, "SIGINT")
    expect(await exited, server.output()).toBe(0)
  }, T)
})

const repoRoot = path.join(__dirname, "../../..")

/**
 * `npm start` as an operator runs it, in its own process group, once it serves: from the repository, or
 * (`from`) from another directory through `--prefix`, as npm runs a package's script from anywhere.
 * npm runs as a fresh machine has it: no user configuration (this machine's turns the update check off)
 * and a cache of its own, where npm's weekly update check leaves its mark when it runs (`updateChecked`;
 * the repository's .npmrc turns the check off, which would keep npm's registry client in npm's process).
 * Not startServer: it kills what is left of the group once its process exits, which would hide an orphan.
 */
const npmStart = async (port: number, env: Record<string, string>, from?: string) => {
  let output = ""
  const npmDir = scratchDir("aigw-npm-config-")
  fs.writeFileSync(path.join(npmDir, "npmrc"), "")
  const npm = spawn("npm", from === undefined ? ["start"] : ["start", "--prefix", repoRoot], {
    cwd: from ?? repoRoot,
    env: { ...env, npm_config_userconfig: path.join(npmDir, "npmrc"), npm_config_cache: path.join(npmDir, "cache") },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true
  })
  npm.stdout!.on("data", (d) => (output += d))
  npm.stderr!.on("data", (d) => (output += d))
  const exited = new Promise<number | null>((resolve) => npm.on("exit", (code) => resolve(code)))
  const group = npm.pid!
  const kill = () => {
    try {
      process.kill(-group, "SIGKILL")
    } catch {
      // the group is gone
    }
  }
  const deadline = Date.now() + 100_000
  for (;;) {
    if (npm.exitCode !== null) throw new Error(`npm start exited early (${npm.exitCode}):\n${output}`)
    if (await fetch(`http://127.0.0.1:${port}/v1/health`).then((r) => r.ok, () => false)) break
    if (Date.now() > deadline) {
      kill()
      throw new Error(`npm start did not serve within 100 s:\n${output}`)
    }
    await new Promise((r) => setTimeout(r, 200))
  }
  const updateChecked = () => fs.existsSync(path.join(npmDir, "cache", "_update-notifier-last-checked"))
  return { group, exited, output: () => output, kill, updateChecked }
}

describe("npm start under a process manager", () => {
  // A manager that runs `npm start` (a container's PID 1, systemd, pm2, a CI job) stops it with a
  // SIGTERM to npm alone, which npm passes on to the process it started. That process must be the
  // server: a shell in between (npm runs the script with `sh -c`) would die of the signal and leave
  // the server running as an orphan, still holding its port, instead of stopping gracefully.
  it("passes npm's SIGTERM on to the server, which stops gracefully and leaves no process behind", async () => {
    const port = await freePort()
    const npm = await npmStart(port, hostEnv(port, scratchDir("aigw-npm-start-"), {}))
    const { group } = npm
    try {
      expect(npm.updateChecked(), npm.output()).toBe(false)
      // npm's only child is node itself (the script execs the launcher, which execs node). By its
      // executable: Node 24 and later name their main thread (`comm`) node-MainThread.
      const children = processTree(group).filter((pid) => pid !== group)
      expect(children.map((pid) => path.basename(fs.readlinkSync(`/proc/${pid}/exe`))), npm.output()).toEqual(["node"])

      process.kill(group, "SIGTERM")
      expect(await npm.exited, npm.output()).toBe(0)
      for (let i = 0; i < 100 && groupMembers(group).length > 0; i++) await new Promise((r) => setTimeout(r, 100))
      expect(groupMembers(group), `still running after npm exited:\n${npm.output()}`).toEqual([])
      expect(await fetch(`http://127.0.0.1:${port}/v1/health`).then(() => "answered", () => "refused")).toBe("refused")
    } finally {
      npm.kill()
    }
  }, T)

  // The server runs in hosts/node-http (its default ./data lives there); an operator's relative paths
  // used to be taken from there too: AIGW_CONFIG=./aigw.json could not be read, AIGW_DATA_DIR=./x was made under hosts/.
  // And the start script's malloc settings replaced the operator's.
  it("takes the relative paths it is given from the directory it was run in, and the operator's malloc settings", async () => {
    const port = await freePort()
    const dir = scratchDir("aigw-npm-relative-")
    fs.writeFileSync(path.join(dir, "aigw.json"), JSON.stringify({ PUBLIC_URL: "https://gateway.example.com" }))
    const env = hostEnv(port, dir, { AIGW_CONFIG: "./aigw.json", AIGW_DATA_DIR: "./state", DATABASE_URL: "sqlite:./db/aigw.sqlite", MALLOC_ARENA_MAX: "4" })
    const npm = await npmStart(port, env, dir)
    try {
      expect(npm.updateChecked(), npm.output()).toBe(false)
      const [server] = processTree(npm.group).filter((pid) => pid !== npm.group)
      const environ = fs.readFileSync(`/proc/${server}/environ`, "utf8").split("\0")
      expect(environ.filter((v) => v.startsWith("MALLOC_")).sort()).toEqual(["MALLOC_ARENA_MAX=4", "MALLOC_MMAP_THRESHOLD_=131072"])
      const card = await (await fetch(`http://127.0.0.1:${port}/.well-known/mcp.json`)).json() as { endpoint: string }
      expect(card.endpoint, npm.output()).toBe("https://gateway.example.com/mcp")
      expect(fs.existsSync(path.join(dir, "state")), npm.output()).toBe(true)
      expect(fs.statSync(path.join(dir, "db", "aigw.sqlite")).size).toBeGreaterThan(0)
      expect(fs.existsSync(path.join(repoRoot, "hosts/node-http/state"))).toBe(false)
    } finally {
      npm.kill()
    }
  }, T)
})

describe("the AIGW_ADMIN_* avatar", () => {
  it("is created with the operator's values, one registration would refuse said in a warning", async () => {
    const server = await startServer({ AIGW_ADMIN_USERNAME: "admin", AIGW_ADMIN_EMAIL: "admin@localhost", AIGW_ADMIN_PASSWORD: "admin" })
    try {
      const auth = await call(server.url, "POST", "/api/avatar/authenticate", { body: { username: "admin", password: "admin" } })
      expect(auth.body).toMatchObject({ isError: false, result: { username: "admin", email: "admin@localhost" } })
      const profile = await call(server.url, "GET", `/api/avatar/${auth.body.result.id}`, { token: auth.body.result.jwtToken })
      expect(profile.body.result).toMatchObject({ AvatarType: "Admin" })
      expect(server.output()).toMatch(/AIGW_ADMIN_\*: registration would refuse these values \(.*email must be a valid e-mail address.*password must be at least 8 characters/)
    } finally {
      await server.stop()
    }
  }, T)
})

describe("a graceful stop is bounded (AIGW_SHUTDOWN_GRACE_SECONDS)", () => {
  /** Reads the stopped server's SQLite database. */
  const readDatabase = <A>(server: { readonly dataDir: string }, read: (db: Database.Database) => A): A => {
    const db = new Database(path.join(server.dataDir, "data", "aigw.sqlite"), { readonly: true })
    try {
      return read(db)
    } finally {
      db.close()
    }
  }

  // A process manager SIGKILLs a process that has not stopped after its grace period (10 s for Docker
  // and Podman): a request whose upstream stalls must not hold the stop until its own timeout.
  it.each(["true", "false"])("answers the calls still waiting for their upstream with a 503 a little before the cut, records every call, then exits 0 (fast lane %s)", async (fastLane) => {
    const openai = await startOpenAiMock({ apiKey: "sk-stop" })
    // A 3 s grace: the notice comes a second before the cut, time enough for the answers on a loaded machine.
    const server = await startServer({ OPENAI_API_KEY: "sk-stop", OPENAI_BASE_URL: openai.url, AIGW_SHUTDOWN_GRACE_SECONDS: "3", AIGW_FAST_LANE: fastLane })
    try {
      const user = await signUp(server, "stopper")
      openai.setScenario({ kind: "hang" })
      const chat = { messages: [{ role: "user", content: "hi" }], model: "gpt-4o-mini" }
      const calls = [
        ["/v1/complete", chat],
        ["/v1/complete/stream", chat],
        ["/openai/v1/chat/completions", chat],
        ["/openai/v1/chat/completions", { ...chat, stream: true }],
        // An adapter's Effect call, not the engine's.
        ["/openai/v1/images/generations", { prompt: "a lighthouse" }]
      ] as const
      const answerOf = (r: Response) => r.json().then((body: any) => ({ status: r.status, retryAfter: r.headers.get("retry-after"), body }))
      const pending = calls.map(([p, body]) =>
        fetch(`${server.url}${p}`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": user.apiKey }, body: JSON.stringify(body) })
          .then(answerOf, () => "closed" as const))
      // An upload: sent upstream through fetch (a multipart body), not the pooled agents.
      const audio = new FormData()
      audio.append("file", new File([new Uint8Array([73, 68, 51, 1, 2, 3])], "hello.mp3", { type: "audio/mpeg" }))
      pending.push(fetch(`${server.url}/v1/audio/transcriptions`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: audio }).then(answerOf, () => "closed" as const))
      // A request whose body never comes: no call to answer, so its connection is closed at the cut.
      const port = Number(new URL(server.url).port)
      const unfinished = net.connect(port, "127.0.0.1")
      unfinished.write(`POST /v1/complete HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nx-api-key: ${user.apiKey}\r\ncontent-length: 100\r\n\r\n{"messages"`)
      const unfinishedEnd = new Promise<string>((resolve) => {
        let text = ""
        unfinished.on("data", (b) => (text += b.toString()))
        unfinished.on("close", () => resolve(text))
      })
      for (let i = 0; i < 100 && openai.requests.length < pending.length; i++) await new Promise((r) => setTimeout(r, 50))
      expect(openai.requests.length).toBe(pending.length)
      // The helper SIGKILLs after 15 s (exit code null); the upstream would hang for minutes.
      expect(await server.stop(), server.output()).toBe(0)
      expect(await unfinishedEnd).toBe("")
      const [gateway, gatewayStream, openAi, openAiStream, image, upload] = await Promise.all(pending)
      const stopped = /^The gateway is shutting down and ended this call before its upstream answered/
      for (const answer of [gateway, gatewayStream, upload]) {
        expect(answer).toMatchObject({ status: 503, retryAfter: "1", body: { isError: true, message: expect.stringMatching(stopped) } })
      }
      for (const answer of [openAi, openAiStream, image]) {
        expect(answer).toMatchObject({ status: 503, retryAfter: "1", body: { error: { type: "server_error", code: "Busy", message: expect.stringMatching(stopped) } } })
      }
      // Every call was counted, and recorded as failed before the database closed.
      const [counted, records] = readDatabase(server, (db) => [
        db.prepare("SELECT SUM(calls) AS n FROM daily_usage WHERE avatar_id = ?").get(user.id) as { n: number },
        db.prepare("SELECT ok FROM usage_events WHERE avatar_id = ?").all(user.id)
      ] as const)
      expect([counted.n, records], server.output()).toEqual([pending.length, pending.map(() => ({ ok: 0 }))])
    } finally {
      await server.kill().catch(() => undefined)
      await openai.close()
    }
  }, T)

  it.each(["true", "false"])("ends the chat streams still running a little before the cut with their own error ending (fast lane %s)", async (fastLane) => {
    // 200 pieces 100 ms apart: a 20 s answer against a 3 s grace, whose notice comes three quarters of a second before the cut.
    const openai = await startOpenAiMock({ apiKey: "sk-stop", chunkDelayMs: 100 })
    const server = await startServer({ OPENAI_API_KEY: "sk-stop", OPENAI_BASE_URL: openai.url, AIGW_SHUTDOWN_GRACE_SECONDS: "3", AIGW_FAST_LANE: fastLane })
    try {
      const user = await signUp(server, "streamstop")
      const words = Array.from({ length: 200 }, (_, i) => `w${i}`).join(" ")
      openai.setScenario({ kind: "text", text: words, usage: { prompt: 2, completion: 200 }, pieces: 200 })
      const streams = [
        ["/v1/complete/stream", { messages: [{ role: "user", content: "hi" }], model: "gpt-4o-mini" }],
        ["/openai/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], model: "gpt-4o-mini", stream: true }]
      ] as const
      let firstData = 0
      const texts = streams.map(async ([p, body]) => {
        const res = await fetch(`${server.url}${p}`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": user.apiKey }, body: JSON.stringify(body) })
        const reader = res.body!.getReader()
        const decoder = new TextDecoder()
        let text = ""
        let counted = false
        try {
          for (let r = await reader.read(); !r.done; r = await reader.read()) {
            text += decoder.decode(r.value, { stream: true })
            if (!counted && text.includes("w1")) {
              counted = true
              firstData++
            }
          }
        } catch {
          text += "<cut>"
        }
        return text
      })
      for (let i = 0; i < 100 && firstData < 2; i++) await new Promise((r) => setTimeout(r, 50))
      expect(firstData).toBe(2)
      const stopped = performance.now()
      expect(await server.stop(), server.output()).toBe(0)
      expect(performance.now() - stopped).toBeLessThan(6_000)
      const [gateway, chat] = await Promise.all(texts)
      const data = (text: string) => text.split("\n\n").filter((b) => b.startsWith("data: ")).map((b) => b.slice(6))
      expect(gateway).not.toContain("<cut>")
      expect(JSON.parse(data(gateway).at(-1)!)).toMatchObject({ done: true, finishReason: "error", errorCode: "Busy", error: expect.stringMatching(/^The gateway is shutting down/) })
      expect(chat).not.toContain("<cut>")
      expect(data(chat).at(-1)).toBe("[DONE]")
      expect(JSON.parse(data(chat).at(-2)!).error).toMatchObject({ type: "server_error", code: "Busy", message: expect.stringMatching(/^The gateway is shutting down/) })
      // Both were recorded as failed calls with the text they sent.
      const records = readDatabase(server, (db) =>
        db.prepare("SELECT ok, completion_tokens AS completion FROM usage_events WHERE avatar_id = ?").all(user.id) as Array<{ ok: number; completion: number }>)
      expect(records.map((r) => r.ok), server.output()).toEqual([0, 0])
      for (const r of records) expect(r.completion).toBeGreaterThan(0)
    } finally {
      await server.kill().catch(() => undefined)
      await openai.close()
    }
  }, T)
})
