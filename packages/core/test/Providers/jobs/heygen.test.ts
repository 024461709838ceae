/**
 * The HeyGen avatar-video adapter against a mock of HeyGen's v2 generate and v1 status API.
 */
import { Effect, Either } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { type ConfiguredProvider, data } from "../../../src/Catalog/Catalog.ts"
import { AVATAR_ID, dimensionOf, heygen, served, VOICE_ID } from "../../../src/Providers/Video/HeyGen.ts"
import type { JobMock } from "../../support/mockJobs.ts"
import { HEYGEN_AVATARS, HEYGEN_VOICES, pollUntilDone, runEither, startHeyGenMock, videoProvider } from "../../support/mockVideoVendors.ts"

const KEY = "heygen-test-key"
const AVATAR = HEYGEN_AVATARS[0]!
const VOICE = HEYGEN_VOICES[0]!

const providerAt = (endpoint: string, settings: Record<string, string> = { [AVATAR_ID]: AVATAR, [VOICE_ID]: VOICE }, key = KEY) =>
  videoProvider("heygen", endpoint, key, settings)

describe("HeyGen video adapter (avatar videos)", () => {
  let mock: JobMock
  let provider: ConfiguredProvider
  beforeAll(async () => {
    mock = await startHeyGenMock({ apiKey: KEY })
    provider = providerAt(mock.url)
  })
  afterAll(() => mock.close())
  beforeEach(() => mock.configure({ pollsUntilDone: 2, fail: false }))

  it("the catalogue's endpoint is the v2 API with X-Api-Key; the voice is required configuration", () => {
    const entry = data.providers.find((p) => p.id === "heygen")!
    expect(entry.baseUrl).toBe("https://api.heygen.com/v2")
    expect(entry.auth).toBe("x-api-key")
    expect(served.credentials!({ hasApiKey: true, settings: {} }, "HEYGEN")).toContain(`set ${VOICE_ID}`)
    expect(served.credentials!({ hasApiKey: false, settings: {} }, "HEYGEN")).toBe(`set HEYGEN_API_KEY, ${VOICE_ID} and ${AVATAR_ID}`)
    expect(served.credentials!({ hasApiKey: true, settings: { [VOICE_ID]: VOICE } }, "HEYGEN")).toBeUndefined()
  })

  it("POST /v2/video/generate: the avatar speaks the prompt; imageUrl is the background, aspectRatio the dimension", async () => {
    const { upstreamId } = await Effect.runPromise(heygen.submit(provider, {
      prompt: "Welcome to the quarterly update.",
      imageUrl: "https://cdn.example.com/office.jpg",
      aspectRatio: "9:16"
    }))
    expect(upstreamId).toMatch(/^[0-9a-f]{32}$/)
    const sent = mock.requests.at(-1)!
    expect(sent.method).toBe("POST")
    expect(sent.path).toBe("/v2/video/generate")
    expect(sent.headers["x-api-key"]).toBe(KEY)
    expect(sent.body).toEqual({
      video_inputs: [{
        character: { type: "avatar", avatar_id: AVATAR, avatar_style: "normal" },
        voice: { type: "text", input_text: "Welcome to the quarterly update.", voice_id: VOICE },
        background: { type: "image", url: "https://cdn.example.com/office.jpg" }
      }],
      dimension: { width: 720, height: 1280 }
    })
    expect([dimensionOf("16:9"), dimensionOf("1:1"), dimensionOf("4:3")]).toEqual([
      { width: 1280, height: 720 },
      { width: 720, height: 720 },
      { width: 960, height: 720 }
    ])
  })

  it("the request's model names another avatar", async () => {
    await Effect.runPromise(heygen.submit(providerAt(mock.url, { [VOICE_ID]: VOICE }), { prompt: "hi", model: HEYGEN_AVATARS[1] }))
    expect((mock.requests.at(-1)!.body as any).video_inputs[0].character.avatar_id).toBe(HEYGEN_AVATARS[1])
  })

  it("polls GET /v1/video_status.get: pending → processing → completed with video_url", async () => {
    mock.configure({ pollsUntilDone: 3 })
    const { upstreamId } = await Effect.runPromise(heygen.submit(provider, { prompt: "hello" }))
    const { last, seen } = await pollUntilDone(heygen, provider, upstreamId)
    expect(seen).toEqual(["pending", "running", "succeeded"])
    expect(last).toEqual({
      status: "succeeded",
      videoUrl: `https://files2.heygen.ai/aws_pacific/avatar_tmp/${upstreamId}.mp4?Expires=1`,
      details: { videoId: upstreamId, thumbnailUrl: `https://files2.heygen.ai/aws_pacific/avatar_tmp/${upstreamId}.jpeg`, durationSeconds: 4.2 }
    })
    const poll = mock.requests.at(-1)!
    expect(poll.method).toBe("GET")
    expect(poll.path).toBe("/v1/video_status.get")
    expect(poll.query).toEqual({ video_id: upstreamId })
    expect(poll.headers["x-api-key"]).toBe(KEY)
  })

  it("maps failed to failed with the error's message", async () => {
    mock.configure({ fail: true, failMessage: "Video is too long (> 3600.0s)" })
    const { upstreamId } = await Effect.runPromise(heygen.submit(provider, { prompt: "p" }))
    const { last } = await pollUntilDone(heygen, provider, upstreamId)
    expect(last).toEqual({ status: "failed", error: "Video is too long (> 3600.0s)" })
  })

  it("refuses duration, and a video without avatar or voice, by name and before sending anything", async () => {
    const before = mock.requests.length
    const duration = await runEither(heygen.submit(provider, { prompt: "p", durationSeconds: 10 }))
    if (Either.isLeft(duration)) expect(duration.left.message).toContain("duration is not supported by heygen")
    const noAvatar = await runEither(heygen.submit(providerAt(mock.url, { [VOICE_ID]: VOICE }), { prompt: "p" }))
    if (Either.isLeft(noAvatar)) expect(noAvatar.left.message).toContain(`set ${AVATAR_ID} or send the avatar id as model`)
    const noVoice = await runEither(heygen.submit(providerAt(mock.url, { [AVATAR_ID]: AVATAR }), { prompt: "p" }))
    if (Either.isLeft(noVoice)) expect(noVoice.left.message).toContain(`set ${VOICE_ID}`)
    expect([duration, noAvatar, noVoice].map((r) => Either.isLeft(r) && r.left.retryable)).toEqual([false, false, false])
    expect(mock.requests.length).toBe(before)
  })

  it("an unknown avatar is HeyGen's 400; a wrong key 401; 429 retryable; an unknown video 404", async () => {
    const bad = await runEither(heygen.submit(provider, { prompt: "p", model: "nobody" }))
    expect(Either.isLeft(bad) && bad.left).toMatchObject({ kind: "http", status: 400, retryable: false })
    if (Either.isLeft(bad)) expect(bad.left.message).toContain("avatar nobody not found")
    const denied = await runEither(heygen.submit(providerAt(mock.url, undefined, "nope"), { prompt: "p" }))
    expect(Either.isLeft(denied) && denied.left).toMatchObject({ status: 401, retryable: false })
    mock.failNext(429)
    const throttled = await runEither(heygen.submit(provider, { prompt: "p" }))
    expect(Either.isLeft(throttled) && throttled.left).toMatchObject({ status: 429, retryable: true })
    const missing = await runEither(heygen.poll(provider, "0".repeat(32)))
    expect(Either.isLeft(missing) && missing.left).toMatchObject({ status: 404, retryable: false })
    if (Either.isLeft(missing)) expect(missing.left.message).toContain("Video not found")
  })
})
