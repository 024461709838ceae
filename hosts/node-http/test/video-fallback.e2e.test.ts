/**
 * `auto` video falls back at submit: with Luma and Replicate configured, a retryable failure
 * (503) of the first provider's submit sends the job to the other, which the job then keeps
 * (polls, view, webhook); a 400 fails the job without trying the other; a named provider is
 * never substituted, nor is an `auto` job whose model is named.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type JobMock, startLumaMock, startReplicateMock } from "../../../packages/core/test/support/mockJobs.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { waitJobDone } from "./support/jobs.ts"
import { type Receiver, startReceiver } from "./support/receiver.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

describe("auto video fallback at submit", () => {
  let mocks: Record<"luma" | "replicate", JobMock>
  let receiver: Receiver
  let server: RunningServer
  let user: TestAvatar
  /** The provider `auto` ranks first, and the other. */
  let first: "luma" | "replicate"
  let second: "luma" | "replicate"

  beforeAll(async () => {
    const [luma, replicate] = await Promise.all([
      startLumaMock({ apiKey: "luma_fb", pollsUntilDone: 1 }),
      startReplicateMock({ apiKey: "r8_fb", pollsUntilDone: 1 })
    ])
    mocks = { luma, replicate }
    receiver = await startReceiver()
    server = await startServer({
      ...adminEnv,
      AIGW_ALLOW_PRIVATE_URLS: "true",
      AIGW_WORKER_INTERVAL_MS: "50",
      AIGW_JOB_POLL_MS: "50",
      LUMA_API_KEY: "luma_fb",
      LUMA_BASE_URL: luma.url,
      REPLICATE_API_KEY: "r8_fb",
      REPLICATE_BASE_URL: replicate.url
    })
    user = await signUp(server, "videofallback")
    await call(server.url, "PUT", `/v1/admin/avatars/${user.id}/plan`, { token: await adminToken(server), body: { plan: "Gold" } })
  })
  afterAll(async () => {
    await server?.stop()
    await receiver?.close()
    await Promise.all(Object.values(mocks ?? {}).map((m) => m.close()))
  })

  const waitDone = (jobId: string) => waitJobDone(server, `/v1/video/${jobId}`, user.apiKey)
  const generate = (body: Record<string, unknown>) => call(server.url, "POST", "/v1/video/generate", { apiKey: user.apiKey, body })
  const submits = (id: "luma" | "replicate") => mocks[id].requests.filter((r) => r.method === "POST").length

  it("auto without failures: the first-ranked provider takes the job", async () => {
    const res = await generate({ prompt: "a fox in the snow" })
    expect(res.status).toBe(200)
    first = res.body.result.provider
    expect(["luma", "replicate"]).toContain(first)
    second = first === "luma" ? "replicate" : "luma"
    const done = await waitDone(res.body.result.jobId)
    expect(done).toMatchObject({ status: "completed", provider: first })
    expect(submits(second)).toBe(0)
  })

  it("a 503 on the first provider's submit sends the job to the next; view and webhook name it", async () => {
    const before = { first: submits(first), second: submits(second) }
    mocks[first].failNext(503)
    const res = await generate({ prompt: "a fox in the snow", callbackUrl: receiver.url })
    expect(res.body.result).toMatchObject({ status: "queued", provider: first })
    const done = await waitDone(res.body.result.jobId)
    expect(done).toMatchObject({ status: "completed", provider: second, error: null })
    expect(done.result.provider).toBe(second)
    expect(done.result.videoUrl).toMatch(/^https?:\/\//)
    expect([submits(first) - before.first, submits(second) - before.second]).toEqual([1, 1])
    // Polls go to the provider that accepted.
    expect(mocks[second].requests.some((r) => r.method === "GET" && r.path.endsWith(String(done.upstreamId)))).toBe(true)
    const deadline = Date.now() + 10_000
    while (!receiver.received.some((r) => JSON.parse(r.body).jobId === res.body.result.jobId) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50))
    }
    const hook = receiver.received.find((r) => JSON.parse(r.body).jobId === res.body.result.jobId)!
    expect(JSON.parse(hook.body)).toMatchObject({ jobId: res.body.result.jobId, status: "completed", result: { provider: second } })
  })

  it("a 400 on the first provider's submit fails the job without trying the next", async () => {
    const before = submits(second)
    mocks[first].failNext(400)
    const res = await generate({ prompt: "a fox in the snow" })
    const done = await waitDone(res.body.result.jobId)
    expect(done).toMatchObject({ status: "failed", provider: first })
    expect(submits(second)).toBe(before)
  })

  // A named provider, or a named model under auto, keeps the job on that provider: its 503 is retried there.
  for (const named of ["provider", "model"] as const) {
    it(`a named ${named} is never substituted: the first provider's 503 is retried on it`, async () => {
      const before = submits(second)
      mocks[first].failNext(503)
      const choice = named === "provider" ? { provider: first } : { model: first === "luma" ? "ray-flash-2" : "minimax/video-01" }
      const res = await generate({ prompt: "a fox in the snow", ...choice })
      const done = await waitDone(res.body.result.jobId)
      expect(done).toMatchObject({ status: "completed", provider: first })
      expect(submits(second)).toBe(before)
    })
  }
})
