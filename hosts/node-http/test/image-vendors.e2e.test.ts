/**
 * POST /v1/images/generate through image vendors end to end: Stability AI (multipart, base64
 * image) and fal (queue: submit, status polls, result URLs) configured against mocks of their
 * APIs, Together AI's OpenAI-format images with width and height; the refusals of what a vendor
 * cannot honour (400 naming it) and of the plan (403).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ImageVendorMock, startImageVendorMock } from "../../../packages/core/test/support/mockImageVendors.ts"
import { type MockUpstream, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

describe("image vendors", () => {
  let stability: ImageVendorMock
  let fal: ImageVendorMock
  let together: MockUpstream
  let server: RunningServer
  let free: TestAvatar
  let silver: TestAvatar

  const generate = (user: TestAvatar, body: unknown) => call(server.url, "POST", "/v1/images/generate", { apiKey: user.apiKey, body })

  beforeAll(async () => {
    stability = await startImageVendorMock("stability", "sk-stab-e2e")
    fal = await startImageVendorMock("fal", "fal-e2e")
    together = await startOpenAiMock({ apiKey: "tg-e2e" })
    server = await startServer({
      ...adminEnv,
      STABILITY_API_KEY: "sk-stab-e2e",
      STABILITY_BASE_URL: stability.url,
      FAL_API_KEY: "fal-e2e",
      FAL_BASE_URL: fal.url,
      TOGETHER_AI_API_KEY: "tg-e2e",
      TOGETHER_AI_BASE_URL: together.url,
      AIGW_JOB_POLL_MS: "20"
    })
    free = await signUp(server, "imgfree")
    silver = await signUp(server, "imgsilver")
    const plan = await call(server.url, "PUT", `/v1/admin/avatars/${silver.id}/plan`, { token: await adminToken(server), body: { plan: "Silver" } })
    expect(plan.status).toBe(200)
  })
  afterAll(async () => {
    await server?.stop()
    await Promise.all([stability?.close(), fal?.close(), together?.close()])
  })

  it("generates through Stability AI: the aspect ratio of width and height, the base64 image back", async () => {
    const res = await generate(silver, { provider: "stability", prompt: "a lighthouse at dusk", width: 1024, height: 576 })
    expect(res.status).toBe(200)
    expect(res.body.result).toEqual({
      provider: "stability",
      model: "stable-image-core",
      images: [{ b64Json: Buffer.from("a lighthouse at dusk|16:9").toString("base64") }],
      n: 1,
      size: "1024x576"
    })
    expect(stability.requests.at(-1)).toMatchObject({ path: "/v2beta/stable-image/generate/core", fields: { prompt: "a lighthouse at dusk", aspect_ratio: "16:9" } })
    expect(stability.requests.at(-1)!.headers.authorization).toBe("Bearer sk-stab-e2e")
  })

  it("an image that is no base64 (markup, say) is a 502, whichever vendor sent it, never relayed", async () => {
    stability.rawNext(JSON.stringify({ image: "<svg onload=alert(1)>", finish_reason: "SUCCESS", seed: 1 }))
    const res = await generate(silver, { provider: "stability", prompt: "a lighthouse" })
    expect([res.status, res.body.message]).toEqual([502, "stability sent an unexpected answer: image 0's bytes are not base64"])
  })

  it("refuses what Stability cannot honour by name, before calling it, and a plan below the vendor's", async () => {
    const before = stability.requests.length
    const many = await generate(silver, { provider: "stability", prompt: "x", n: 2 })
    expect([many.status, many.body.message]).toEqual([400, "Stability AI makes at most 1 image per request (n is 2)"])
    const odd = await generate(silver, { provider: "stability", prompt: "x", width: 1000, height: 700 })
    expect(odd.status).toBe(400)
    expect(odd.body.message).toMatch(/aspect ratio/)
    expect(stability.requests.length).toBe(before)
    expect((await generate(free, { provider: "stability", prompt: "x" })).status).toBe(403)
  })

  it("generates through fal's queue and answers the result's image URLs; a failed request is a 502 with fal's message", async () => {
    fal.setJob({ pendingPolls: 2 })
    const res = await generate(silver, { provider: "fal", prompt: "a red fox", n: 2 })
    expect(res.status).toBe(200)
    expect(res.body.result).toMatchObject({ provider: "fal", model: "fal-ai/flux/schnell", n: 2 })
    expect(res.body.result.images).toEqual([0, 1].map((i) => ({ url: expect.stringMatching(new RegExp(`^https://v3\\.fal\\.media/files/[\\w-]+/${i}\\.jpg$`)) })))
    expect(fal.requests.filter((r) => r.path.endsWith("/status")).length).toBe(3)
    fal.setJob({ failWith: "NSFW content detected" })
    const failed = await generate(silver, { provider: "fal", prompt: "a red fox" })
    expect([failed.status, failed.body.message]).toEqual([502, "fal could not generate the images: NSFW content detected"])
  })

  it("generates through Together AI with width and height (its image API ignores size)", async () => {
    const res = await generate(free, { provider: "together-ai", prompt: "a lighthouse", width: 1024, height: 768 })
    expect(res.status).toBe(200)
    expect(res.body.result).toMatchObject({ provider: "together-ai", model: "black-forest-labs/FLUX.1-schnell", n: 1, size: "1024x768" })
    expect(together.requests.at(-1)!.body).toEqual({ model: "black-forest-labs/FLUX.1-schnell", prompt: "a lighthouse", n: 1, width: 1024, height: 768 })
  })
})
