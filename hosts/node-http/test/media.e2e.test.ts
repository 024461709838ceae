/** Images, moderation, speech and transcription end to end against the OpenAI wire-format mock. */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { DEFAULT_SCENARIO, type MockUpstream, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

describe("media", () => {
  let openai: MockUpstream
  let server: RunningServer
  let user: TestAvatar
  const post = (path: string, body: unknown) => call(server.url, "POST", path, { apiKey: user.apiKey, body })

  beforeAll(async () => {
    openai = await startOpenAiMock({ apiKey: "sk-m" })
    // Mistral's transcription API has the OpenAI wire format: the same mock stands in for it.
    server = await startServer({ OPENAI_API_KEY: "sk-m", OPENAI_BASE_URL: openai.url, MISTRAL_API_KEY: "sk-m", MISTRAL_BASE_URL: openai.url })
    user = await signUp(server, "media")
  })
  afterAll(async () => {
    await server?.stop()
    await openai?.close()
  })

  it("generates images with the size and count asked for", async () => {
    const res = await post("/v1/images/generate", { prompt: "a lighthouse at dusk", width: 1024, height: 1024, n: 2 })
    expect(res.status).toBe(200)
    expect(res.body.result).toMatchObject({ provider: "openai", model: "gpt-image-1", n: 2, size: "1024x1024" })
    expect(res.body.result.images[0].b64Json).toBeTruthy()
    expect(openai.requests.at(-1)!.body).toMatchObject({ model: "gpt-image-1", prompt: "a lighthouse at dusk", n: 2, size: "1024x1024" })
    for (const [body, status] of [[{}, 400], [{ prompt: "x", n: 11 }, 400], [{ prompt: "x", width: 10, height: 10 }, 400], [{ prompt: "x", width: 512 }, 400], [{ prompt: "x", provider: "groq" }, 422], [{ prompt: "x", provider: "anthropic" }, 403]] as const) {
      expect((await post("/v1/images/generate", body)).status, JSON.stringify(body)).toBe(status)
    }
  })

  it("reads provider/model and any spelling of a size, and refuses a size the model does not make, uncounted", async () => {
    const used = async () => (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed
    // `openai/gpt-image-1` names the provider, as for chat: it went upstream as the model "openai/gpt-image-1".
    const prefixed = await post("/openai/v1/images/generations", { prompt: "a quay", model: "openai/gpt-image-1", size: "1024x1536" })
    expect(prefixed.status).toBe(200)
    expect(openai.requests.at(-1)!.body).toMatchObject({ model: "gpt-image-1", size: "1024x1536" })
    const before = await used()
    // 512x512 is no size of gpt-image-1: refused by name before the call, however the model or size is written.
    for (const body of [{ model: "GPT-IMAGE-1", size: "512x512" }, { model: "openai/gpt-image-1", size: "512x512" }, { size: "512X512" }]) {
      const res = await post("/openai/v1/images/generations", { prompt: "a quay", ...body })
      expect([res.status, res.body.error?.message], JSON.stringify(body)).toEqual([400, expect.stringMatching(/has no size 512x512; its sizes: 1024x1024, 1536x1024, 1024x1536/)])
    }
    expect(await used()).toBe(before)
  })

  it("carries a token-billed image model's tokens to the answer and to usage, on both surfaces", async () => {
    const tokens = async () => (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyTokensUsed
    const before = await tokens()
    const native = await post("/v1/images/generate", { prompt: "a quay", n: 2 })
    expect(native.body.result.usage).toEqual({ promptTokens: 20, completionTokens: 544, totalTokens: 564, promptImageTokens: 0 })
    const openAi = await post("/openai/v1/images/generations", { prompt: "a quay", model: "gpt-image-1" })
    // OpenAI's own shape, its details included (the openai SDK's ImagesResponse.Usage requires them).
    expect(openAi.body.usage).toEqual({ input_tokens: 20, output_tokens: 272, total_tokens: 292, input_tokens_details: { text_tokens: 20, image_tokens: 0 } })
    expect(await tokens()).toBe(before + 564 + 292)
    // A model that reports none (dall-e-3 here) answers without usage.
    expect((await post("/openai/v1/images/generations", { prompt: "a quay", model: "dall-e-3" })).body).not.toHaveProperty("usage")
  })

  // A never-drop-silently audit: the answer's own fields (how gpt-image made the images) were dropped.
  it("returns the fields of the provider's answer the gateway does not model, on both surfaces", async () => {
    const openAi = await post("/openai/v1/images/generations", { prompt: "a quay", model: "gpt-image-1", output_format: "webp" })
    expect(openAi.body).toMatchObject({ background: "opaque", output_format: "webp", quality: "high", size: "1024x1024", provider: "openai", model: "gpt-image-1" })
    const native = await post("/v1/images/generate", { prompt: "a quay", model: "gpt-image-1" })
    expect(native.body.result.extra).toEqual({ background: "opaque", output_format: "png", quality: "high", size: "1024x1024" })
  })

  it("moderates text", async () => {
    const flagged = await post("/v1/moderation", { text: "I will attack and kill them" })
    expect(flagged.body.result).toMatchObject({ flagged: true, categories: ["violence"], provider: "openai", model: "omni-moderation-latest" })
    expect(flagged.body.result.categoryScores.violence).toBeGreaterThan(0.5)
    const clean = await post("/v1/moderation", { text: "Have a lovely day" })
    expect(clean.body.result).toMatchObject({ flagged: false, categories: [] })
    expect((await post("/v1/moderation", {})).status).toBe(400)
  })

  it("refuses a catalogued chat or embeddings model for images and moderation, and a model where the route takes none, counting nothing", async () => {
    const used = async () => (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed
    const before = await used()
    const sent = openai.requests.length
    for (const [path, body] of [
      ["/v1/images/generate", { prompt: "x", model: "gpt-4o-mini" }],
      ["/openai/v1/images/generations", { prompt: "x", model: "text-embedding-3-small" }],
      ["/openai/v1/moderations", { input: "x", model: "gpt-4o-mini" }]
    ] as const) {
      const res = await post(path, body)
      expect([path, res.status]).toEqual([path, 422])
      expect(JSON.stringify(res.body)).toMatch(new RegExp(`Model ${body.model} is an? (chat|embeddings) model, not a (images|moderation) model`))
    }
    for (const [path, body] of [["/v1/moderation", { text: "x", model: "gpt-4o-mini" }], ["/v1/audio/speech", { text: "x", model: "tts-1" }]] as const) {
      const res = await post(path, body)
      expect([path, res.status, res.body.message]).toEqual([path, 400, expect.stringMatching(/^Invalid request body: model: is unexpected/)])
    }
    expect(openai.requests.length).toBe(sent)
    expect(await used()).toBe(before)
  })

  it("synthesises speech as audio bytes, errors as envelopes", async () => {
    const res = await fetch(`${server.url}/v1/audio/speech`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": user.apiKey },
      body: JSON.stringify({ text: "Hello there", voice: "nova" })
    })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toMatch(/^audio\/mpeg/)
    expect(res.headers.get("x-ratelimit-limit")).not.toBeNull()
    const bytes = Buffer.from(await res.arrayBuffer())
    expect(bytes.subarray(0, 3).toString("latin1")).toBe("ID3")
    expect(bytes.toString("latin1")).toContain("nova:Hello there")
    const bad = await post("/v1/audio/speech", { voice: "nova" })
    expect(bad.status).toBe(400)
    expect(bad.body.isError).toBe(true)
  })

  it("transcribes an uploaded file (multipart)", async () => {
    const form = new FormData()
    form.append("file", new File([new Uint8Array([73, 68, 51, 1, 2, 3, 4, 5])], "hello.mp3", { type: "audio/mpeg" }))
    form.append("language", "en")
    const res = await fetch(`${server.url}/v1/audio/transcriptions`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: form })
    const body = await res.json()
    expect(res.status).toBe(200)
    expect(body.result).toMatchObject({ text: "Transcript of hello.mp3 (8 bytes) in en.", language: "en", provider: "openai" })
    const noFile = new FormData()
    noFile.append("language", "en")
    expect((await fetch(`${server.url}/v1/audio/transcriptions`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: noFile })).status).toBe(400)
    expect((await call(server.url, "POST", "/v1/audio/transcriptions", { apiKey: user.apiKey, body: { file: "x" } })).status).toBe(400)
    const badLang = new FormData()
    badLang.append("file", new File(["abc"], "a.wav"))
    badLang.append("language", "english")
    expect((await fetch(`${server.url}/v1/audio/transcriptions`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: badLang })).status).toBe(400)
  })

  it("refuses a form field given twice or one the route does not take, naming it, counting nothing", async () => {
    const used = async () => (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed
    const before = await used()
    const file = (name: string) => new File([new TextEncoder().encode(`text of ${name}`)], name, { type: "text/plain" })
    const send = async (path: string, fields: ReadonlyArray<readonly [string, string | File]>) => {
      const form = new FormData()
      for (const [name, value] of fields) form.append(name, value)
      const res = await fetch(`${server.url}${path}`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: form })
      return { status: res.status, body: await res.json() as any }
    }
    for (const path of ["/v1/documents/parse", "/v1/audio/transcriptions"]) {
      const twice = await send(path, [["file", file("a.txt")], ["file", file("b.txt")]])
      expect([path, twice.status, twice.body.message]).toEqual([path, 400, "file is given 2 times; send it once (one request per file)."])
      const unknown = await send(path, [["file", file("a.txt")], ["model", "whisper-1"]])
      expect([path, unknown.status]).toEqual([path, 400])
      expect(unknown.body.message).toMatch(/^"model" is not a field of this form; it takes file, /)
    }
    expect(await used()).toBe(before)
  })

  it("transcribes through Mistral: a provider served by one registry entry (docs/architecture.md)", async () => {
    const form = new FormData()
    form.append("file", new File([new Uint8Array([1, 2, 3])], "voice.wav", { type: "audio/wav" }))
    form.append("provider", "mistral")
    const res = await fetch(`${server.url}/v1/audio/transcriptions`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: form })
    const body = await res.json()
    expect(res.status).toBe(200)
    expect(body.result).toMatchObject({ text: "Transcript of voice.wav (3 bytes).", provider: "mistral", model: "voxtral-mini-latest", language: "en" })
    const listed = await call(server.url, "GET", "/v1/providers", { apiKey: user.apiKey })
    expect(listed.body.result.providers.find((p: any) => p.id === "mistral").endpointTypes).toContain("transcription")
  })
})

describe("a provider's circuit breaker with no other provider", () => {
  let openai: MockUpstream
  let server: RunningServer
  let user: TestAvatar
  beforeAll(async () => {
    openai = await startOpenAiMock({ apiKey: "sk-m" })
    server = await startServer({ OPENAI_API_KEY: "sk-m", OPENAI_BASE_URL: openai.url })
    user = await signUp(server, "breaker")
  })
  afterAll(async () => {
    await server?.stop()
    await openai?.close()
  })

  it("opens on an upstream's passing failures without leaving auto with nothing: the next call reaches it again", async () => {
    const status = async () => (await call(server.url, "GET", "/v1/providers", { apiKey: user.apiKey })).body.result.providers.find((p: any) => p.id === "openai").status
    const complete = () => call(server.url, "POST", "/v1/complete", { apiKey: user.apiKey, body: { messages: [{ role: "user", content: "hi" }] } })
    openai.setScenario({ kind: "error", status: 500, message: "down for a moment" })
    try {
      // Each call tries every catalogued OpenAI model; together they fail more often than the breaker's 5 in a row.
      for (let i = 0; i < 3; i++) expect((await complete()).status).toBe(502)
      expect(await status()).toBe("down")
      // While it is open, a call still gets the upstream's own error (a 502), never a refusal naming configuration.
      const open = await complete()
      expect([open.status, open.body.message]).toEqual([502, expect.stringContaining("down for a moment")])
    } finally {
      openai.setScenario(DEFAULT_SCENARIO)
    }
    const back = await complete()
    expect([back.status, back.body.result.provider]).toEqual([200, "openai"])
    expect(await status()).toBe("degraded") // closed again, its recent failures remembered
    expect((await call(server.url, "POST", "/v1/moderation", { apiKey: user.apiKey, body: { text: "Have a lovely day" } })).status).toBe(200)
  })
})
