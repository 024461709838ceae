/**
 * Video vendors through the gateway: Runway and Kling (its JWT signed from KLING_API_KEY and
 * KLING_SECRET_KEY) end to end against their mocks — submit, the worker polls, the result URL —
 * requests a vendor cannot honour refused with 400 naming the field, and HeyGen without its voice
 * refused with what to configure.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { JobMock } from "../../../packages/core/test/support/mockJobs.ts"
import { type KlingMock, startKlingMock, startRunwayMock } from "../../../packages/core/test/support/mockVideoVendors.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { waitJobDone } from "./support/jobs.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

describe("video vendors through the gateway", () => {
  let runway: JobMock
  let kling: KlingMock
  let server: RunningServer
  let user: TestAvatar

  beforeAll(async () => {
    ;[runway, kling] = await Promise.all([
      startRunwayMock({ apiKey: "key_rw", pollsUntilDone: 3 }),
      startKlingMock({ apiKey: "ak_e2e", secretKey: "sk_e2e", pollsUntilDone: 2 })
    ])
    server = await startServer({
      ...adminEnv,
      AIGW_WORKER_INTERVAL_MS: "50",
      AIGW_JOB_POLL_MS: "50",
      RUNWAY_API_KEY: "key_rw",
      RUNWAY_BASE_URL: runway.url,
      KLING_API_KEY: "ak_e2e",
      KLING_SECRET_KEY: "sk_e2e",
      KLING_BASE_URL: kling.url,
      HEYGEN_API_KEY: "hg_e2e"
    })
    user = await signUp(server, "videovendors")
    await call(server.url, "PUT", `/v1/admin/avatars/${user.id}/plan`, { token: await adminToken(server), body: { plan: "Gold" } })
  })
  afterAll(async () => {
    await server?.stop()
    await Promise.all([runway, kling].map((m) => m?.close()))
  })

  const waitDone = (jobId: string) => waitJobDone(server, `/v1/video/${jobId}`, user.apiKey)
  const generate = (body: Record<string, unknown>) => call(server.url, "POST", "/v1/video/generate", { apiKey: user.apiKey, body })

  it("Runway: job id at once, the worker polls the task to SUCCEEDED, the result is Runway's output URL", async () => {
    const res = await generate({ prompt: "a fox in the snow", provider: "runway", duration: 10, aspectRatio: "16:9" })
    expect(res.status).toBe(200)
    expect(res.body.result).toMatchObject({ jobType: "video", status: "queued", provider: "runway" })
    const done = await waitDone(res.body.result.jobId)
    expect(done.status).toBe("completed")
    expect(done.upstreamId).toMatch(/^[0-9a-f-]{36}$/)
    expect(done.result.videoUrl).toBe(`https://dnznrvs05pmza.cloudfront.net/${done.upstreamId}.mp4?_jwt=mock`)
    const create = runway.requests.find((r) => r.method === "POST")!
    expect(create.path).toBe("/v1/text_to_video")
    expect(create.body).toEqual({ model: "gen4.5", promptText: "a fox in the snow", ratio: "1280:720", duration: 10 })
    expect(runway.requests.filter((r) => r.path === `/v1/tasks/${done.upstreamId}`).length).toBe(3)
  })

  it("what a vendor cannot honour is a 400 naming it, before any job or upstream call", async () => {
    const calls = runway.requests.length + kling.requests.length
    const ratio = await generate({ prompt: "x", provider: "runway", aspectRatio: "2:1" })
    expect(ratio.status).toBe(400)
    expect(ratio.body.message).toContain("aspectRatio 2:1 is not supported by runway")
    const textOnImageModel = await generate({ prompt: "x", provider: "runway", model: "gen4_turbo" })
    expect(textOnImageModel.status).toBe(400)
    expect(textOnImageModel.body.message).toContain("gen4_turbo only animates an image")
    const klingImageRatio = await generate({ prompt: "x", provider: "kling", imageUrl: "https://93.184.216.34/a.png", aspectRatio: "16:9" })
    expect(klingImageRatio.status).toBe(400)
    expect(klingImageRatio.body.message).toContain("aspectRatio with imageUrl is not supported by kling")
    expect(runway.requests.length + kling.requests.length).toBe(calls)
  })

  it("Kling: signs its token from the configured keys and ends with the task's video URL", async () => {
    const res = await generate({ prompt: "a cat surfing", provider: "kling", duration: 5 })
    expect(res.status).toBe(200)
    const done = await waitDone(res.body.result.jobId)
    expect(done.status).toBe("completed")
    const taskId = String(done.upstreamId).split("/")[1]
    expect(done.result.videoUrl).toBe(`https://cdn.klingai.com/bs2/upload-kling-api/${taskId}.mp4`)
    expect(kling.tokens.length).toBeGreaterThanOrEqual(3)
    expect(kling.tokens.every((t: { claims: Record<string, unknown> }) => t.claims.iss === "ak_e2e")).toBe(true)
  })

  it("HeyGen without HEYGEN_VOICE_ID is refused, saying what to set", async () => {
    const res = await generate({ prompt: "hello", provider: "heygen" })
    expect(res.status).toBeGreaterThanOrEqual(400)
    expect(JSON.stringify(res.body)).toContain("HEYGEN_VOICE_ID")
  })
})
