/**
 * A request's context window is checked with the tokenizer's count once its characters could exceed a
 * window: prose has 4 to 5 characters a token, so a prompt of more characters than its model's window
 * may fit it (a bound of a third of the characters refused such prompts with 422). The fast lane counts
 * as the route does; before the tokenizer has loaded it leaves the request to the route, which loads it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type MockUpstream, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const WINDOW = 1_000
const prose = (characters: number) =>
  "The quick brown fox jumps over the lazy dog near the river bank today. ".repeat(Math.ceil(characters / 71)).slice(0, characters)

describe("context windows", () => {
  let server: RunningServer
  let openai: MockUpstream
  let user: TestAvatar
  beforeAll(async () => {
    openai = await startOpenAiMock({ apiKey: "sk-openai" })
    server = await startServer({
      OPENAI_API_KEY: "sk-openai",
      OPENAI_BASE_URL: openai.url,
      AIGW_MODELS: JSON.stringify([{ id: "house-small", provider: "openai", inputPer1kUSD: 0.1, outputPer1kUSD: 0.2, contextWindow: WINDOW }])
    })
    user = await signUp(server, "window")
  })
  afterAll(async () => {
    await server?.stop()
    await openai?.close()
  })

  const used = async () => (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed as number

  it("serves a prompt of more characters than the window whose tokens fit it, on the route and on the lane, and refuses one that does not fit uncounted", async () => {
    openai.setScenario({ kind: "text", text: "fits", usage: { prompt: 700, completion: 1 } })
    const fits = { model: "house-small", max_tokens: 50, messages: [{ role: "user", content: prose(3 * WINDOW) }] }
    // The first call finds the tokenizer unloaded (the lane leaves it to the route), the second on the lane: the same answer.
    for (const path of ["/openai/v1/chat/completions", "/openai/v1/chat/completions", "/v1/complete"]) {
      const res = await call(server.url, "POST", path, { apiKey: user.apiKey, body: path === "/v1/complete" ? { ...fits, maxTokens: 50, max_tokens: undefined } : fits })
      expect([path, res.status]).toEqual([path, 200])
    }
    const before = await used()
    const tooLong = { model: "house-small", messages: [{ role: "user", content: prose(6 * WINDOW) }] }
    const refused = await call(server.url, "POST", "/openai/v1/chat/completions", { apiKey: user.apiKey, body: tooLong })
    expect([refused.status, refused.body.error.message]).toEqual([422, expect.stringMatching(/^The request needs about 1\d{3} tokens; house-small has a context window of 1000\.$/)])
    expect(await used()).toBe(before)
  })
})
