/**
 * AIGW_WORKERS: several serving processes on one port (node:cluster) under a supervising primary.
 * They share the SQLite database and the data directory as replicas share PostgreSQL: exact quota
 * across them, a token issued by one accepted by all (the generated JWT key of the data directory),
 * a crashed worker replaced, SIGTERM stopping them all.
 */
import { spawn } from "node:child_process"
import * as http from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type MockUpstream, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { scratchDir } from "../../../packages/core/test/support/scratch.ts"
import { workerCount } from "../src/workers.ts"
import { signUp, type TestAvatar } from "./support/accounts.ts"
import { cpuTicks, groupMembers, processTree } from "./support/attack.ts"
import { call, freePort, hostEnv, nodeHostCommand, type RunningServer, startExpectingFailure, startServer } from "./support/server.ts"

const T = 120_000

/** The serving processes: the primary's children. */
const workersOf = (server: RunningServer) => processTree(server.child.pid!).filter((pid) => pid !== server.child.pid)

/**
 * One request on a connection of its own (the cluster hands each connection to the next worker), with
 * `token` as its bearer credential and `body` as JSON when given; resolves to the status.
 */
const onNewConnection = (url: string, path: string, token: string, body?: unknown) =>
  new Promise<number>((resolve, reject) => {
    const text = body === undefined ? undefined : JSON.stringify(body)
    const req = http.request(`${url}${path}`, {
      method: text === undefined ? "GET" : "POST",
      agent: false,
      headers: {
        authorization: `Bearer ${token}`,
        ...(text === undefined ? {} : { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
      }
    }, (res) => {
      res.resume()
      res.on("end", () => resolve(res.statusCode!))
    })
    req.on("error", reject)
    req.end(text)
  })

/** How many "Listening on" lines the server's workers have logged. */
const listening = (server: RunningServer) => server.output().split("Listening on ").length - 1

const waitFor = async (what: string, test: () => boolean, ms = 30_000) => {
  const deadline = Date.now() + ms
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

describe("AIGW_WORKERS", () => {
  it("takes a whole number from 1 to 64 or auto, and refuses anything else by name", () => {
    expect(workerCount(undefined)).toBe(1)
    expect(workerCount("")).toBe(1)
    expect(workerCount("4")).toBe(4)
    expect(workerCount(" 2 ")).toBe(2)
    expect(workerCount("auto", 6)).toBe(6)
    expect(workerCount("auto", 200)).toBe(64)
    for (const bad of ["0", "65", "-1", "1.5", "two", "0x2", "1e1"]) {
      const result = workerCount(bad)
      expect(result, bad).toEqual({ problem: expect.stringContaining(`AIGW_WORKERS must be a whole number from 1 to 64, or auto`) })
      expect((result as { problem: string }).problem).toContain(`got "${bad}"`)
    }
  })

  it("an invalid value stops the start with one line naming the variable", async () => {
    const result = await startExpectingFailure({ AIGW_WORKERS: "many" })
    expect(result.code).toBe(1)
    expect(result.stderr.trimEnd().split("\n")).toEqual([
      'aigw: invalid configuration: AIGW_WORKERS must be a whole number from 1 to 64, or auto (one per CPU); got "many" (check AIGW_WORKERS)'
    ])
  }, T)

  it("a worker that cannot start stops them all, with its one line and exit code", async () => {
    const occupied = http.createServer()
    const port = await new Promise<number>((resolve) => occupied.listen(0, "127.0.0.1", () => resolve((occupied.address() as import("node:net").AddressInfo).port)))
    try {
      const result = await startExpectingFailure({ AIGW_WORKERS: "3" }, { port })
      expect(result.code).toBe(1)
      expect(result.stderr.trimEnd().split("\n")).toEqual([`aigw: cannot listen on 127.0.0.1:${port}: address already in use (set PORT or HOST)`])
    } finally {
      await new Promise((r) => occupied.close(r))
    }
  }, T)
})

describe("a stop during the start", () => {
  it("forks no more workers, and the supervisor exits 0 with nothing of its group left", async () => {
    const dir = scratchDir("aigw-workers-")
    const [command, args] = nodeHostCommand()
    const child = spawn(command, args, {
      cwd: dir,
      env: hostEnv(await freePort(), dir, { AIGW_WORKERS: "3" }),
      stdio: ["ignore", "pipe", "pipe"],
      detached: true
    })
    let output = ""
    child.stdout!.on("data", (d) => (output += d))
    child.stderr!.on("data", (d) => (output += d))
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
    try {
      // The first worker exists and is still starting (it has not listened): stop now.
      await waitFor("the first worker", () => processTree(child.pid!).length > 1)
      expect(output).not.toContain("Listening on")
      process.kill(child.pid!, "SIGTERM")
      expect(await exited, output).toBe(0)
      await waitFor("the group to end", () => groupMembers(child.pid!).length === 0, 10_000)
      expect(output.split("Listening on ").length - 1, output).toBeLessThanOrEqual(1)
    } finally {
      try {
        process.kill(-child.pid!, "SIGKILL")
      } catch {
        // gone already
      }
    }
  }, T)
})

describe("two workers on one SQLite database", () => {
  let server: RunningServer
  let mock: MockUpstream
  let user: TestAvatar

  beforeAll(async () => {
    mock = await startOpenAiMock({ apiKey: "sk-w" })
    server = await startServer({ AIGW_WORKERS: "2", OPENAI_API_KEY: "sk-w", OPENAI_BASE_URL: mock.url, AIGW_PLAN_LIMITS: '{"Free":40}' })
    await waitFor("two workers listening", () => workersOf(server).length === 2 && listening(server) === 2)
    user = await signUp(server, "workers")
  }, T)
  afterAll(async () => {
    await server?.stop()
    await mock?.close()
  })

  it("admit exactly the daily limit between them", async () => {
    const body = { messages: [{ role: "user", content: "hi" }], provider: "openai", model: "gpt-4o-mini" }
    const statuses = await Promise.all(Array.from({ length: 60 }, () => onNewConnection(server.url, "/v1/complete", user.apiKey, body)))
    expect(statuses.filter((s) => s === 200)).toHaveLength(40)
    expect(statuses.filter((s) => s === 429)).toHaveLength(20)
    const usage = await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })
    expect(usage.body.result).toMatchObject({ dailyCallsUsed: 40, remainingCallsToday: 0 })
  }, T)

  it("both serve, and a token issued by one worker is accepted on every connection", async () => {
    const workers = workersOf(server)
    const before = workers.map(cpuTicks)
    const statuses: Array<number> = []
    for (let round = 0; round < 10; round++) {
      statuses.push(...await Promise.all(Array.from({ length: 30 }, () => onNewConnection(server.url, "/v1/usage", user.token))))
    }
    expect(statuses).toEqual(Array(300).fill(200))
    // Each worker spent CPU on its share of the connections (an idle one spends next to none).
    workers.forEach((pid, i) => expect(cpuTicks(pid) - before[i]!, `worker ${pid}`).toBeGreaterThanOrEqual(5))
  }, T)

  it("a worker that dies is replaced; SIGTERM stops every worker and the primary exits 0", async () => {
    const [victim, survivor] = workersOf(server)
    process.kill(victim!, "SIGKILL")
    await waitFor("a replacement worker", () => {
      const now = workersOf(server)
      return now.length === 2 && !now.includes(victim!) && now.includes(survivor!)
    })
    expect(server.output()).toContain(`aigw: worker ${victim} exited (SIGKILL); starting another`)
    // The replacement killed before it listens: replaced in turn, while the survivor serves on (it stopped everything).
    const starting = workersOf(server).find((pid) => pid !== survivor)!
    if (listening(server) < 3) {
      process.kill(starting, "SIGKILL")
      await waitFor("a second replacement", () => {
        const now = workersOf(server)
        return now.length === 2 && !now.includes(starting) && now.includes(survivor!)
      })
      expect(server.output()).toContain(`aigw: worker ${starting} exited before it listened (SIGKILL); starting another`)
    }
    await waitFor("the replacement to listen", () => listening(server) === 3)
    for (let i = 0; i < 6; i++) expect((await call(server.url, "GET", "/v1/health")).status).toBe(200)
    const all = [server.child.pid!, ...workersOf(server)]
    expect(await server.stop()).toBe(0)
    for (const pid of all) expect(() => process.kill(pid, 0), `pid ${pid} still alive`).toThrow()
  }, T)
})
