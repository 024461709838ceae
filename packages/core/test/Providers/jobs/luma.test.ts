/**
 * The Luma Dream Machine video adapter against a mock of the generations API.
 */
import { Effect, Either, Option, Redacted } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { type ConfiguredProvider, data } from "../../../src/Catalog/Catalog.ts"
import { toDuration } from "../../../src/Providers/Video/Luma.ts"
import { luma } from "../../../src/Providers/Video/Luma.ts"
import type { VideoPoll } from "../../../src/Providers/Video/VideoAdapter.ts"
import type { UpstreamError } from "../../../src/Providers/UpstreamError.ts"
import { type JobMock, startLumaMock } from "../../support/mockJobs.ts"

const KEY = "luma-test-key"
const adapter = luma

const providerAt = (endpoint: string, key = KEY): ConfiguredProvider => ({
  ...data.providers.find((p) => p.id === "luma")!,
  endpoint,
  apiKey: Option.some(Redacted.make(key)),
  configured: true,
  settings: {},
  missing: undefined
})

const run = <A>(e: Effect.Effect<A, UpstreamError>) => Effect.runPromise(Effect.either(e))

const pollUntilDone = async (provider: ConfiguredProvider, id: string, max = 10) => {
  const seen: Array<VideoPoll["status"]> = []
  for (let i = 0; i < max; i++) {
    const p = await Effect.runPromise(adapter.poll(provider, id))
    seen.push(p.status)
    if (p.status === "succeeded" || p.status === "failed") return { last: p, seen }
  }
  throw new Error(`not done after ${max} polls: ${seen.join(",")}`)
}

describe("Luma video adapter (Dream Machine generations API)", () => {
  let mock: JobMock
  let provider: ConfiguredProvider
  beforeAll(async () => {
    mock = await startLumaMock({ apiKey: KEY })
    provider = providerAt(mock.url)
  })
  afterAll(() => mock.close())
  beforeEach(() => mock.configure({ pollsUntilDone: 2, fail: false }))

  it("the catalogue's base URL is the Dream Machine v1 API with bearer auth", () => {
    const entry = data.providers.find((p) => p.id === "luma")!
    expect(entry.baseUrl).toBe("https://api.lumalabs.ai/dream-machine/v1")
    expect(entry.auth).toBe("bearer")
  })

  it("image-to-video: POST /generations/video with model, duration string and keyframes.frame0", async () => {
    const { upstreamId } = await Effect.runPromise(adapter.submit(provider, {
      prompt: "A tiger walking in snow",
      imageUrl: "https://cdn.example.com/tiger.jpg",
      durationSeconds: 8,
      aspectRatio: "16:9"
    }))
    expect(upstreamId).toMatch(/^[0-9a-f-]{36}$/)
    const sent = mock.requests.at(-1)!
    expect(sent.method).toBe("POST")
    expect(sent.path).toBe("/dream-machine/v1/generations/video")
    expect(sent.headers.authorization).toBe(`Bearer ${KEY}`)
    expect(sent.body).toEqual({
      prompt: "A tiger walking in snow",
      model: "ray-2",
      aspect_ratio: "16:9",
      duration: "9s",
      keyframes: { frame0: { type: "image", url: "https://cdn.example.com/tiger.jpg" } }
    })
  })

  it("text-to-video sends only what was asked, and a chosen model", async () => {
    await Effect.runPromise(adapter.submit(provider, { prompt: "an old lady laughing underwater", model: "ray-flash-2" }))
    expect(mock.requests.at(-1)!.body).toEqual({ prompt: "an old lady laughing underwater", model: "ray-flash-2" })
    expect([toDuration(1), toDuration(5), toDuration(7), toDuration(8), toDuration(30)]).toEqual(["5s", "5s", "5s", "9s", "9s"])
  })

  it("polls queued → dreaming → completed with assets.video", async () => {
    mock.configure({ pollsUntilDone: 3 })
    const { upstreamId } = await Effect.runPromise(adapter.submit(provider, { prompt: "p" }))
    const { last, seen } = await pollUntilDone(provider, upstreamId)
    expect(seen).toEqual(["pending", "running", "succeeded"])
    expect(last).toMatchObject({
      status: "succeeded",
      videoUrl: `https://storage.cdn-luma.com/dream_machine/${upstreamId}/video.mp4`,
      details: { generationId: upstreamId, model: "ray-2" }
    })
    const poll = mock.requests.at(-1)!
    expect(poll.method).toBe("GET")
    expect(poll.path).toBe(`/dream-machine/v1/generations/${upstreamId}`)
    expect(poll.headers.authorization).toBe(`Bearer ${KEY}`)
  })

  it("maps state failed to failed with failure_reason", async () => {
    mock.configure({ fail: true, failMessage: "400: prompt not allowed because advanced moderation failed" })
    const { upstreamId } = await Effect.runPromise(adapter.submit(provider, { prompt: "p" }))
    const { last, seen } = await pollUntilDone(provider, upstreamId)
    expect(seen).toEqual(["running", "failed"])
    expect(last).toEqual({ status: "failed", error: "400: prompt not allowed because advanced moderation failed" })
  })

  it("an aspect ratio Luma does not offer is a non-retryable 400 with Luma's detail", async () => {
    const result = await run(adapter.submit(provider, { prompt: "p", aspectRatio: "2:1" }))
    expect(Either.isLeft(result) && result.left).toMatchObject({ provider: "luma", kind: "http", status: 400, retryable: false })
    if (Either.isLeft(result)) expect(result.left.message).toContain("Invalid aspect ratio: 2:1")
  })

  it("a wrong key is 401, not retryable", async () => {
    const result = await run(adapter.submit(providerAt(mock.url, "nope"), { prompt: "p" }))
    expect(Either.isLeft(result) && result.left).toMatchObject({ kind: "http", status: 401, retryable: false })
    if (Either.isLeft(result)) expect(result.left.message).toContain("Invalid API key is provided")
  })

  it("429 on submit and 500 on poll are retryable", async () => {
    mock.failNext(429)
    const throttled = await run(adapter.submit(provider, { prompt: "p" }))
    expect(Either.isLeft(throttled) && throttled.left).toMatchObject({ kind: "http", status: 429, retryable: true })

    const { upstreamId } = await Effect.runPromise(adapter.submit(provider, { prompt: "p" }))
    mock.failNext(500, 2)
    for (let i = 0; i < 2; i++) {
      const broken = await run(adapter.poll(provider, upstreamId))
      expect(Either.isLeft(broken) && broken.left).toMatchObject({ kind: "http", status: 500, retryable: true })
    }
    const { seen } = await pollUntilDone(provider, upstreamId)
    expect(seen).toEqual(["running", "succeeded"])
  })

  it("an unknown generation is 404, not retryable", async () => {
    const result = await run(adapter.poll(provider, "00000000-0000-0000-0000-000000000000"))
    expect(Either.isLeft(result) && result.left).toMatchObject({ kind: "http", status: 404, retryable: false })
  })
})
