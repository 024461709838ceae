/**
 * AWS Bedrock end to end through the node host: the OpenAI surface's chat completions, plain and
 * streamed, reach a local Bedrock runtime (packages/core/test/support/mockBedrock.ts) as Converse and
 * ConverseStream calls signed with SigV4 (the mock recomputes each signature), and come back in the
 * OpenAI format with Bedrock's usage; a field Converse cannot carry is a 400 naming it, never sent.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ACCESS_KEY, type BedrockMock, event, SECRET, startBedrockMock } from "../../../packages/core/test/support/mockBedrock.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const PATH = "/openai/v1/chat/completions"
const MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"

describe("Bedrock through the gateway (SigV4)", () => {
  let server: RunningServer
  let bedrock: BedrockMock
  let user: TestAvatar
  const post = (body: unknown, via: "key" | "jwt" = "key") =>
    call(server.url, "POST", PATH, via === "key" ? { body, apiKey: user.apiKey } : { body, token: user.token })

  beforeAll(async () => {
    bedrock = await startBedrockMock("eu-west-1")
    server = await startServer({
      ...adminEnv,
      BEDROCK_BASE_URL: bedrock.url,
      AWS_ACCESS_KEY_ID: ACCESS_KEY,
      AWS_SECRET_ACCESS_KEY: SECRET,
      AWS_REGION: "eu-west-1"
    })
    user = await signUp(server, "bedrock")
    // Bedrock's minimum plan.
    const plan = await call(server.url, "PUT", `/v1/admin/avatars/${user.id}/plan`, { token: await adminToken(server), body: { plan: "Enterprise" } })
    expect(plan.status).toBe(200)
  })
  afterAll(async () => {
    await server?.stop()
    await bedrock?.close()
  })

  it("a plain completion is a signed Converse call, on the fast lane and the Effect route alike", async () => {
    for (const via of ["key", "jwt"] as const) {
      bedrock.answer({
        kind: "json",
        body: { output: { message: { role: "assistant", content: [{ text: `Hello via ${via}` }] } }, stopReason: "end_turn", usage: { inputTokens: 9, outputTokens: 4, totalTokens: 13 } }
      })
      const res = await post({ model: MODEL, provider: "bedrock", messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }], max_tokens: 20 }, via)
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      expect(res.body.choices[0].message.content).toBe(`Hello via ${via}`)
      expect(res.body.usage).toMatchObject({ prompt_tokens: 9, completion_tokens: 4 })
      const sent = bedrock.received.at(-1)!
      expect(sent.path).toBe("/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse")
      expect(String(sent.headers.authorization)).toContain("/eu-west-1/bedrock/aws4_request")
      expect(sent.body).toEqual({ messages: [{ role: "user", content: [{ text: "Hi" }] }], system: [{ text: "Be brief." }], inferenceConfig: { maxTokens: 20 } })
    }
  })

  it("a stream decodes ConverseStream's binary event stream into OpenAI chunks", async () => {
    bedrock.answer({
      kind: "frames",
      frames: [
        event("messageStart", { role: "assistant" }),
        event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "Fjord" } }),
        event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "s!" } }),
        event("contentBlockStop", { contentBlockIndex: 0 }),
        event("messageStop", { stopReason: "end_turn" }),
        event("metadata", { usage: { inputTokens: 7, outputTokens: 2, totalTokens: 9 } })
      ]
    })
    const res = await fetch(`${server.url}${PATH}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": user.apiKey },
      body: JSON.stringify({ model: MODEL, provider: "bedrock", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "Norway?" }] })
    })
    expect(res.status).toBe(200)
    const chunks = (await res.text()).split("\n\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)))
    expect(chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("")).toBe("Fjords!")
    expect(chunks.find((c) => c.choices?.[0]?.finish_reason)?.choices[0].finish_reason).toBe("stop")
    expect(chunks.find((c) => c.usage)?.usage).toMatchObject({ prompt_tokens: 7, completion_tokens: 2 })
    expect(bedrock.received.at(-1)!.path).toBe("/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream")
  })

  it("a field Converse cannot carry is a 400 naming it, and nothing reaches Bedrock", async () => {
    const before = bedrock.received.length
    const res = await post({ model: MODEL, provider: "bedrock", messages: [{ role: "user", content: "Hi" }], seed: 7 })
    expect(res.status).toBe(400)
    expect(JSON.stringify(res.body)).toContain("seed")
    expect(bedrock.received.length).toBe(before)
  })
})
