/**
 * The Replicate video adapter against a mock of the predictions API: what it sends (path, auth,
 * per-model input mapping), polling through to a terminal state, and error mapping.
 */
import { Effect, Either, Option, Redacted } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { type ConfiguredProvider, data } from "../../../src/Catalog/Catalog.ts"
import { replicate } from "../../../src/Providers/Video/Replicate.ts"
import { DEFAULT_MODEL, toInput, toPoll, unsupported } from "../../../src/Providers/Video/Replicate.ts"
import { finishedVideo } from "../../../src/Providers/Delivered.ts"
import type { VideoPoll } from "../../../src/Providers/Video/VideoAdapter.ts"
import type { UpstreamError } from "../../../src/Providers/UpstreamError.ts"
import { type ReplicateMock, startReplicateMock } from "../../support/mockJobs.ts"

const KEY = "r8_test_key"
const adapter = replicate

const providerAt = (endpoint: string, key = KEY): ConfiguredProvider => ({
  ...data.providers.find((p) => p.id === "replicate")!,
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
    if (p.status === "succeeded" || p.status === "failed" || p.status === "cancelled") return { last: p, seen }
  }
  throw new Error(`not done after ${max} polls: ${seen.join(",")}`)
}

describe("Replicate video adapter (predictions API)", () => {
  let mock: ReplicateMock
  let provider: ConfiguredProvider
  beforeAll(async () => {
    mock = await startReplicateMock({ apiKey: KEY })
    provider = providerAt(mock.url)
  })
  afterAll(() => mock.close())
  beforeEach(() => mock.configure({ pollsUntilDone: 2, fail: false, cancel: false, outputArray: false, outputCount: 1, withoutModel: false }))

  it("creates an official-model prediction with the model's input names and Token auth", async () => {
    const { upstreamId } = await Effect.runPromise(adapter.submit(provider, {
      prompt: "a red fox running through snow",
      imageUrl: "https://example.com/fox.png",
      durationSeconds: 7,
      aspectRatio: "9:16"
    }))
    expect(upstreamId).toMatch(/^[a-z2-7]{26}$/)
    const sent = mock.requests.at(-1)!
    expect(sent.method).toBe("POST")
    expect(sent.path).toBe(`/v1/models/${DEFAULT_MODEL}/predictions`)
    expect(sent.headers.authorization).toBe(`Token ${KEY}`)
    expect(sent.headers["content-type"]).toBe("application/json")
    expect(sent.headers.prefer).toBeUndefined()
    // google/veo-3: duration is one of 4|6|8 (7 → the nearest, 6), `image` is the first frame
    expect(sent.body).toEqual({
      input: { prompt: "a red fox running through snow", image: "https://example.com/fox.png", duration: 6, aspect_ratio: "9:16" }
    })
  })

  it("maps inputs per model: minimax/video-01 takes first_frame_image, and a duration or aspect ratio it has no input for is refused by name", async () => {
    const before = mock.requests.length
    for (const extra of [{ durationSeconds: 10 }, { aspectRatio: "9:16" }]) {
      const request = { prompt: "waves", model: "minimax/video-01", ...extra }
      const message = unsupported(provider, request)
      expect(message).toMatch(/^(duration|aspectRatio) with minimax\/video-01 is not supported by replicate: the model has no (duration|aspect ratio) input/)
      const refused = await run(adapter.submit(provider, request))
      expect(Either.isLeft(refused) && [refused.left.status, refused.left.message]).toEqual([400, message])
    }
    expect(mock.requests.length).toBe(before)
    await Effect.runPromise(adapter.submit(provider, { prompt: "waves", imageUrl: "https://example.com/a.png", model: "minimax/video-01" }))
    const sent = mock.requests.at(-1)!
    expect(sent.path).toBe("/v1/models/minimax/video-01/predictions")
    expect(sent.body).toEqual({ input: { prompt: "waves", first_frame_image: "https://example.com/a.png" } })
    expect(toInput("google/veo-3", { prompt: "x", durationSeconds: 30 })).toEqual({ prompt: "x", duration: 8 })
    expect(toInput("bytedance/seedance-2.0", { prompt: "x", durationSeconds: 40 })).toEqual({ prompt: "x", duration: 15 })
    expect(toInput("someone/new-model", { prompt: "x", durationSeconds: 5.4, aspectRatio: "1:1" }))
      .toEqual({ prompt: "x", duration: 5, aspect_ratio: "1:1" })
  })

  it("sends a pinned version to POST /predictions", async () => {
    const version = "a".repeat(64)
    await Effect.runPromise(adapter.submit(provider, { prompt: "p", model: `acme/video:${version}` }))
    const sent = mock.requests.at(-1)!
    expect(sent.path).toBe("/v1/predictions")
    expect(sent.body).toEqual({ version: `acme/video:${version}`, input: { prompt: "p" } })
  })

  it("refuses a model id that is not owner/name[:version] without calling out", async () => {
    const before = mock.requests.length
    const result = await run(adapter.submit(provider, { prompt: "p", model: "../../admin" }))
    expect(Either.isLeft(result) && result.left.kind).toBe("protocol")
    expect(mock.requests.length).toBe(before)
  })

  it("polls starting → processing → succeeded with the output URL", async () => {
    mock.configure({ pollsUntilDone: 3 })
    const { upstreamId } = await Effect.runPromise(adapter.submit(provider, { prompt: "city at night" }))
    const { last, seen } = await pollUntilDone(provider, upstreamId)
    expect(seen).toEqual(["pending", "running", "succeeded"])
    expect(last).toMatchObject({
      status: "succeeded",
      videoUrl: `https://replicate.delivery/xezq/${upstreamId}/output.mp4`,
      details: { predictionId: upstreamId, model: DEFAULT_MODEL, predictTimeSeconds: 42.5 }
    })
    const polls = mock.requests.filter((r) => r.method === "GET")
    expect(polls.at(-1)!.path).toBe(`/v1/predictions/${upstreamId}`)
    expect(polls.at(-1)!.headers.authorization).toBe(`Token ${KEY}`)
  })

  it("takes the first URL when the output is an array", async () => {
    mock.configure({ outputArray: true, pollsUntilDone: 1 })
    const { upstreamId } = await Effect.runPromise(adapter.submit(provider, { prompt: "p" }))
    const { last, seen } = await pollUntilDone(provider, upstreamId)
    expect(seen).toEqual(["succeeded"])
    expect(last).toMatchObject({ status: "succeeded", videoUrl: `https://replicate.delivery/xezq/${upstreamId}/output.mp4` })
  })

  // An attack run: an array output put in `details.outputs` whole failed the job ("its outputs is not a short
  // text or a number") though the video was made and billed; so did a prediction without `model`.
  it("lists several output URLs (at most 16, the rest counted), and the job's check of a finished video takes them", async () => {
    for (const [count, listed, omitted] of [[3, 3, undefined], [20, 16, 4]] as const) {
      mock.configure({ outputArray: true, outputCount: count, pollsUntilDone: 1 })
      const { upstreamId } = await Effect.runPromise(adapter.submit(provider, { prompt: "p" }))
      const { last } = await pollUntilDone(provider, upstreamId)
      if (last.status !== "succeeded") throw new Error(`expected a video, got ${last.status}`)
      expect(last.videoUrl).toBe(`https://replicate.delivery/xezq/${upstreamId}/output.mp4`)
      const outputs = last.details.outputs as Array<string>
      expect([outputs.length, outputs[0], outputs.at(-1), last.details.outputsOmitted]).toEqual([
        listed, last.videoUrl, `https://replicate.delivery/xezq/${upstreamId}/output-${listed - 1}.mp4`, omitted
      ])
      expect(finishedVideo(last.videoUrl, last.details)).toStrictEqual({ details: last.details })
    }
    // One URL in an array: the video URL says it all.
    expect(Effect.runSync(toPoll("replicate", { id: "p1", model: "m/v", status: "succeeded", output: ["https://a/v.mp4"] }))).toEqual({
      status: "succeeded", videoUrl: "https://a/v.mp4", details: { predictionId: "p1", model: "m/v" }
    })
  })

  it("a prediction without `model` (or `id`) is a finished video without that detail, not a failed job", async () => {
    mock.configure({ withoutModel: true, pollsUntilDone: 1 })
    const { upstreamId } = await Effect.runPromise(adapter.submit(provider, { prompt: "p" }))
    const { last } = await pollUntilDone(provider, upstreamId)
    expect(last).toEqual({
      status: "succeeded",
      videoUrl: `https://replicate.delivery/xezq/${upstreamId}/output.mp4`,
      details: { predictionId: upstreamId, predictTimeSeconds: 42.5 }
    })
    if (last.status === "succeeded") {
      expect(finishedVideo(last.videoUrl, last.details)).toStrictEqual({ details: { predictionId: upstreamId, predictTimeSeconds: 42.5 } })
    }
    const poll = Effect.runSync(toPoll("replicate", { status: "succeeded", model: null, output: "https://a/v.mp4" }))
    expect(poll.status === "succeeded" && finishedVideo(poll.videoUrl, poll.details)).toStrictEqual({ details: {} })
  })

  it("a listed output that is no http(s) link still fails the job's check", () => {
    const poll = Effect.runSync(toPoll("replicate", { id: "p1", status: "succeeded", output: ["https://a/v.mp4", "javascript:alert(1)"] }))
    expect(poll.status === "succeeded" && finishedVideo(poll.videoUrl, poll.details)).toStrictEqual({ problem: "its outputs[1] is a javascript: URL, not an http(s) one" })
  })

  it("maps a failed prediction to failed with Replicate's error text", async () => {
    mock.configure({ fail: true, failMessage: "NSFW content detected. Try a different prompt." })
    const { upstreamId } = await Effect.runPromise(adapter.submit(provider, { prompt: "p" }))
    const { last, seen } = await pollUntilDone(provider, upstreamId)
    expect(seen).toEqual(["running", "failed"])
    expect(last).toEqual({ status: "failed", error: "NSFW content detected. Try a different prompt." })
  })

  it("maps a canceled prediction to cancelled (the job's own terminal state, not a failure)", async () => {
    mock.configure({ cancel: true })
    const { upstreamId } = await Effect.runPromise(adapter.submit(provider, { prompt: "p" }))
    const { last } = await pollUntilDone(provider, upstreamId)
    expect(last).toEqual({ status: "cancelled", error: "the prediction was canceled at Replicate" })
  })

  it("a rejected input (422) is a non-retryable http error carrying Replicate's detail", async () => {
    const result = await run(adapter.submit(provider, { prompt: "" }))
    expect(Either.isLeft(result)).toBe(true)
    if (Either.isRight(result)) return
    expect(result.left).toMatchObject({ provider: "replicate", kind: "http", status: 422, retryable: false })
    expect(result.left.message).toContain("prompt is required")
  })

  it("a wrong token is 401, not retryable", async () => {
    const result = await run(adapter.submit(providerAt(mock.url, "r8_wrong"), { prompt: "p" }))
    expect(Either.isLeft(result) && result.left).toMatchObject({ kind: "http", status: 401, retryable: false })
    if (Either.isLeft(result)) expect(result.left.message).toContain("valid authentication token")
  })

  it("429 and 500 are retryable, on submit and on poll", async () => {
    mock.failNext(429)
    const throttled = await run(adapter.submit(provider, { prompt: "p" }))
    expect(Either.isLeft(throttled) && throttled.left).toMatchObject({ kind: "http", status: 429, retryable: true })
    if (Either.isLeft(throttled)) expect(throttled.left.message).toContain("Request was throttled")

    const { upstreamId } = await Effect.runPromise(adapter.submit(provider, { prompt: "p" }))
    mock.failNext(500)
    const broken = await run(adapter.poll(provider, upstreamId))
    expect(Either.isLeft(broken) && broken.left).toMatchObject({ kind: "http", status: 500, retryable: true })
    // the failed poll did not advance the job: the next poll is still the first
    expect(await Effect.runPromise(adapter.poll(provider, upstreamId))).toEqual({ status: "running" })
  })

  it("an unknown prediction is 404, not retryable", async () => {
    const result = await run(adapter.poll(provider, "doesnotexist"))
    expect(Either.isLeft(result) && result.left).toMatchObject({ kind: "http", status: 404, retryable: false })
  })

  it("an unreachable upstream is a retryable connect error", async () => {
    const gone = await startReplicateMock({ apiKey: KEY })
    const url = gone.url
    await gone.close()
    const result = await run(adapter.poll(providerAt(url), "x"))
    expect(Either.isLeft(result) && result.left).toMatchObject({ kind: "connect", retryable: true })
  })
})
