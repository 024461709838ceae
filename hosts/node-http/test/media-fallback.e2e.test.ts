/**
 * `auto` for images falls back like chat does: with OpenAI and xAI both configured (two mocks of
 * the OpenAI image API), a 503 from the first provider is retried on the second, which serves the
 * image (the answer names it; the log names the failure). A 400 is the request's fault: it is not
 * retried elsewhere. A named provider is never substituted.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type MockUpstream, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

describe("media fallback under auto", () => {
  let openai: MockUpstream
  let xai: MockUpstream
  let server: RunningServer
  let user: TestAvatar

  const generate = (body: unknown) => call(server.url, "POST", "/v1/images/generate", { apiKey: user.apiKey, body })
  const imageCalls = (mock: MockUpstream) => mock.requests.filter((r) => r.path.endsWith("/images/generations")).length

  beforeAll(async () => {
    openai = await startOpenAiMock({ apiKey: "sk-openai-fb" })
    xai = await startOpenAiMock({ apiKey: "xai-fb" })
    server = await startServer({ ...adminEnv, OPENAI_API_KEY: "sk-openai-fb", OPENAI_BASE_URL: openai.url, XAI_API_KEY: "xai-fb", XAI_BASE_URL: xai.url })
    user = await signUp(server, "mediafallback")
    const plan = await call(server.url, "PUT", `/v1/admin/avatars/${user.id}/plan`, { token: await adminToken(server), body: { plan: "Silver" } })
    expect(plan.status).toBe(200)
  })
  afterAll(async () => {
    await server?.stop()
    await Promise.all([openai?.close(), xai?.close()])
  })

  it("serves the image from the second provider after the first answers 503", async () => {
    openai.queue({ kind: "error", status: 503, message: "The engine is currently overloaded" })
    const [beforeOpenAi, beforeXai] = [imageCalls(openai), imageCalls(xai)]
    const res = await generate({ prompt: "a lighthouse at dusk" })
    expect(res.status).toBe(200)
    expect(res.body.result).toMatchObject({ provider: "xai", n: 1 })
    expect(res.body.result.model).toMatch(/grok/)
    expect([imageCalls(openai) - beforeOpenAi, imageCalls(xai) - beforeXai]).toEqual([1, 1])
    await expect.poll(() => server.output()).toMatch(/upstream openai\/[\w.-]+ failed: .*503/)
  })

  it("does not retry a 400 on the next provider", async () => {
    openai.queue({ kind: "error", status: 400, message: "Invalid size" })
    const [beforeOpenAi, beforeXai] = [imageCalls(openai), imageCalls(xai)]
    const res = await generate({ prompt: "a lighthouse at dusk" })
    expect(res.status).toBeGreaterThanOrEqual(400)
    expect(res.body.message).toMatch(/Invalid size/)
    expect([imageCalls(openai) - beforeOpenAi, imageCalls(xai) - beforeXai]).toEqual([1, 0])
  })

  it("answers from the first provider when it is up, and never substitutes a named one", async () => {
    const ok = await generate({ prompt: "a red fox" })
    expect([ok.status, ok.body.result?.provider]).toEqual([200, "openai"])
    openai.queue({ kind: "error", status: 503, message: "The engine is currently overloaded" })
    const beforeXai = imageCalls(xai)
    const named = await generate({ provider: "openai", prompt: "a red fox" })
    expect(named.status).toBe(502)
    expect(imageCalls(xai)).toBe(beforeXai)
  })
})
