/**
 * POST /v1/code/execute through the remote sandbox vendors end to end, each configured against a
 * mock of its API: python (and the languages the local sandboxes lack) through Riza, bash through
 * Daytona (its sandbox deleted after the run); a vendor's huge stdout cut to the gateway's output
 * limit; vendor errors as clean gateway errors; the refusals (a language the vendor lacks, plan,
 * unknown or unconfigured vendor, e2b); `auto` and `local` never sending code anywhere.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { MAX_OUTPUT } from "../../../packages/core/src/Capabilities/Sandboxes.ts"
import { type SandboxVendorMock, startSandboxVendorMock } from "../../../packages/core/test/support/mockSandboxVendors.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

describe("remote sandbox vendors", () => {
  let riza: SandboxVendorMock
  let daytona: SandboxVendorMock
  let server: RunningServer
  let free: TestAvatar
  let silver: TestAvatar
  const execute = (user: TestAvatar, body: Record<string, unknown>) => call(server.url, "POST", "/v1/code/execute", { apiKey: user.apiKey, body })
  const callsUsed = async (user: TestAvatar) => (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed as number

  beforeAll(async () => {
    ;[riza, daytona] = await Promise.all([startSandboxVendorMock("riza", "riza-e2e"), startSandboxVendorMock("daytona", "dtn-e2e")])
    server = await startServer({
      ...adminEnv,
      RIZA_API_KEY: "riza-e2e",
      RIZA_BASE_URL: riza.url,
      DAYTONA_API_KEY: "dtn-e2e",
      DAYTONA_BASE_URL: daytona.url,
      AIGW_JOB_POLL_MS: "20"
    })
    free = await signUp(server, "codefree")
    silver = await signUp(server, "codesilver")
    await call(server.url, "PUT", `/v1/admin/avatars/${silver.id}/plan`, { token: await adminToken(server), body: { plan: "Silver" } })
  })
  afterAll(async () => {
    await server?.stop()
    await Promise.all([riza?.close(), daytona?.close()])
  })

  it("runs python through Riza: its output in the gateway's result shape, the call counted and metered", async () => {
    const before = await callsUsed(silver)
    const res = await execute(silver, { code: "print(6 * 7)", language: "python", provider: "riza" })
    expect(res.status).toBe(200)
    expect(res.body.result).toEqual({
      stdout: "python:print(6 * 7)\n",
      stderr: "",
      result: null,
      exitCode: 0,
      error: null,
      timedOut: false,
      language: "python",
      durationMs: expect.any(Number),
      provider: "riza",
      isolation: "remote"
    })
    expect(riza.requests.at(-1)).toMatchObject({ method: "POST", path: "/v1/execute", body: { language: "python", code: "print(6 * 7)" } })
    expect(riza.requests.at(-1)!.headers.authorization).toBe("Bearer riza-e2e")
    expect(await callsUsed(silver)).toBe(before + 1)
    expect(await fetch(`${server.url}/metrics`).then((r) => r.text())).toMatch(/provider="riza"/)
  })

  it("runs a language the local sandboxes lack through Riza, and answers a failing program's exit code", async () => {
    const res = await execute(silver, { code: "puts 1; exit 3", language: "ruby", provider: "riza" })
    expect(res.status).toBe(200)
    expect(res.body.result).toMatchObject({ language: "ruby", exitCode: 3, stderr: "failed\n", provider: "riza" })
  })

  it("runs bash through Daytona and deletes its sandbox; Riza, which has no bash, refuses it by name before any call", async () => {
    const res = await execute(silver, { code: "echo hello from bash", language: "bash", provider: "daytona" })
    expect(res.status).toBe(200)
    expect(res.body.result).toMatchObject({ stdout: "bash:echo hello from bash\n", exitCode: 0, language: "bash", provider: "daytona", isolation: "remote" })
    expect(daytona.requests.map((r) => r.method)).toEqual(expect.arrayContaining(["POST", "DELETE"]))
    expect(daytona.live.size).toBe(0)
    const before = riza.requests.length
    const refused = await execute(silver, { code: "echo hi", language: "bash", provider: "riza" })
    expect(refused.status).toBe(422)
    expect(refused.body.message).toBe("Provider riza does not run bash; it runs python, javascript, typescript, ruby, php.")
    expect(riza.requests.length).toBe(before)
  })

  it("cuts a vendor's huge stdout to the gateway's output limit", async () => {
    riza.setBehaviour({ stdout: "Z".repeat(3 * 1024 * 1024) })
    const res = await execute(silver, { code: "print('Z' * 3_000_000)", provider: "riza" })
    riza.setBehaviour({})
    expect(res.status).toBe(200)
    expect(res.body.result.stdout).toBe(`${"Z".repeat(MAX_OUTPUT)}\n[output truncated]`)
  })

  it("answers vendor errors as clean gateway errors, Daytona's sandbox deleted all the same", async () => {
    riza.failNext(503, { code: 14, message: "capacity exhausted" })
    const down = await execute(silver, { code: "print(1)", provider: "riza" })
    expect(down.status).toBe(502)
    expect(down.body.message).toMatch(/capacity exhausted/)
    daytona.setBehaviour({ executeFails: true })
    const failed = await execute(silver, { code: "echo x", language: "bash", provider: "daytona" })
    daytona.setBehaviour({})
    expect(failed.status).toBe(502)
    expect(failed.body.message).toMatch(/toolbox unavailable/)
    expect(daytona.requests.at(-1)!.method).toBe("DELETE")
    expect(daytona.live.size).toBe(0)
  })

  it("refuses a vendor above the plan, an unknown, unconfigured or unserved one, before calling anything", async () => {
    const before = riza.requests.length + daytona.requests.length
    const plan = await execute(free, { code: "print(1)", provider: "riza" })
    expect(plan.status).toBe(403)
    expect(plan.body.message).toMatch(/plan Bronze/)
    expect((await execute(silver, { code: "print(1)", provider: "nosuchsandbox" })).status).toBe(404)
    const e2b = await execute(silver, { code: "print(1)", provider: "e2b" })
    expect(e2b.status).toBe(422)
    expect(e2b.body.message).toBe("Provider e2b cannot serve code here; supported: daytona, riza.")
    expect(riza.requests.length + daytona.requests.length).toBe(before)
  })

  it("keeps auto and local on this machine: bash and ruby are refused there, naming the vendors that run them", async () => {
    const before = riza.requests.length + daytona.requests.length
    const local = await execute(free, { code: "console.log(2 + 2)", language: "javascript", provider: "auto" })
    expect(local.status).toBe(200)
    expect(local.body.result).toMatchObject({ stdout: expect.stringMatching(/^4\n?$/), provider: "local" })
    for (const language of ["bash", "ruby"]) {
      const refused = await execute(free, { code: "echo 1", language })
      expect(refused.status).toBe(422)
      expect(refused.body.message).toMatch(new RegExp(`^${language} runs only in a remote sandbox.*riza .*daytona`))
    }
    expect(riza.requests.length + daytona.requests.length).toBe(before)
  })
})
