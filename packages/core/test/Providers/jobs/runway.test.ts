/**
 * The Runway video adapter against a mock of Runway's task API.
 */
import { Effect, Either } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { type ConfiguredProvider, data } from "../../../src/Catalog/Catalog.ts"
import { runway, toDuration, toPoll } from "../../../src/Providers/Video/Runway.ts"
import type { JobMock } from "../../support/mockJobs.ts"
import { pollUntilDone, runEither, type RunwayMockOptions, videoProvider, startRunwayMock } from "../../support/mockVideoVendors.ts"
import { finishedVideo } from "../../../src/Providers/Delivered.ts"

const KEY = "key_runway_test"

const providerAt = (endpoint: string, key = KEY) => videoProvider("runway", endpoint, key)

describe("Runway video adapter (tasks API)", () => {
  let mock: JobMock<RunwayMockOptions>
  let provider: ConfiguredProvider
  beforeAll(async () => {
    mock = await startRunwayMock({ apiKey: KEY })
    provider = providerAt(mock.url)
  })
  afterAll(() => mock.close())
  beforeEach(() => mock.configure({ pollsUntilDone: 2, fail: false, outputs: 1, withoutId: false }))

  it("the catalogue's base URL is Runway's v1 API with bearer auth, and the registry serves video", () => {
    const entry = data.providers.find((p) => p.id === "runway")!
    expect(entry.baseUrl).toBe("https://api.dev.runwayml.com/v1")
    expect(entry.auth).toBe("bearer")
    expect(entry.capabilities).toContain("video")
  })

  it("image-to-video: POST /v1/image_to_video with gen4_turbo, promptImage, pixel ratio, version header", async () => {
    const { upstreamId } = await Effect.runPromise(runway.submit(provider, {
      prompt: "A tiger walking in snow",
      imageUrl: "https://cdn.example.com/tiger.jpg",
      durationSeconds: 8,
      aspectRatio: "16:9"
    }))
    expect(upstreamId).toMatch(/^[0-9a-f-]{36}$/)
    const sent = mock.requests.at(-1)!
    expect(sent.method).toBe("POST")
    expect(sent.path).toBe("/v1/image_to_video")
    expect(sent.headers.authorization).toBe(`Bearer ${KEY}`)
    expect(sent.headers["x-runway-version"]).toBe("2024-11-06")
    expect(sent.body).toEqual({
      model: "gen4_turbo",
      promptText: "A tiger walking in snow",
      promptImage: "https://cdn.example.com/tiger.jpg",
      ratio: "1280:720",
      duration: 10
    })
  })

  it("text-to-video: POST /v1/text_to_video with gen4.5 and only what was asked", async () => {
    await Effect.runPromise(runway.submit(provider, { prompt: "a lake at dawn" }))
    const sent = mock.requests.at(-1)!
    expect(sent.path).toBe("/v1/text_to_video")
    expect(sent.body).toEqual({ model: "gen4.5", promptText: "a lake at dawn" })
    await Effect.runPromise(runway.submit(provider, { prompt: "p", model: "veo3.1", durationSeconds: 7, aspectRatio: "9:16" }))
    expect(mock.requests.at(-1)!.body).toEqual({ model: "veo3.1", promptText: "p", ratio: "720:1280", duration: 6 })
    expect([toDuration("gen4_turbo", 1), toDuration("gen4.5", 30), toDuration("gen4.5", 1), toDuration("veo3", 4), toDuration("other", 7.4)]).toEqual([5, 10, 2, 8, 7])
  })

  it("refuses by name what Runway cannot do, before sending anything", async () => {
    const before = mock.requests.length
    const ratio = await runEither(runway.submit(provider, { prompt: "p", aspectRatio: "2:1" }))
    expect(Either.isLeft(ratio) && ratio.left).toMatchObject({ provider: "runway", status: 400, retryable: false })
    if (Either.isLeft(ratio)) expect(ratio.left.message).toContain("aspectRatio 2:1 is not supported by runway")
    const textOnImageModel = await runEither(runway.submit(provider, { prompt: "p", model: "gen4_turbo" }))
    if (Either.isLeft(textOnImageModel)) expect(textOnImageModel.left.message).toContain("gen4_turbo only animates an image")
    expect(Either.isLeft(textOnImageModel)).toBe(true)
    expect(mock.requests.length).toBe(before)
  })

  it("polls PENDING → RUNNING → SUCCEEDED with output[0]", async () => {
    mock.configure({ pollsUntilDone: 3 })
    const { upstreamId } = await Effect.runPromise(runway.submit(provider, { prompt: "p" }))
    const { last, seen } = await pollUntilDone(runway, provider, upstreamId)
    expect(seen).toEqual(["pending", "running", "succeeded"])
    expect(last).toEqual({ status: "succeeded", videoUrl: `https://dnznrvs05pmza.cloudfront.net/${upstreamId}.mp4?_jwt=mock`, details: { taskId: upstreamId } })
    const poll = mock.requests.at(-1)!
    expect(poll.method).toBe("GET")
    expect(poll.path).toBe(`/v1/tasks/${upstreamId}`)
    expect(poll.headers["x-runway-version"]).toBe("2024-11-06")
  })

  // An attack run: a task with several outputs, or without `id`, failed the job's check of the finished video.
  it("SUCCEEDED with several outputs: output[0] is the video, the others listed (at most 16, the rest counted); the job's check takes them", async () => {
    for (const [count, listed, omitted] of [[2, 2, undefined], [40, 16, 24]] as const) {
      mock.configure({ outputs: count, pollsUntilDone: 1 })
      const { upstreamId } = await Effect.runPromise(runway.submit(provider, { prompt: "p" }))
      const { last } = await pollUntilDone(runway, provider, upstreamId)
      if (last.status !== "succeeded") throw new Error(`expected a video, got ${last.status}`)
      expect(last.videoUrl).toBe(`https://dnznrvs05pmza.cloudfront.net/${upstreamId}.mp4?_jwt=mock`)
      expect([(last.details.outputs as Array<string>).length, (last.details.outputs as Array<string>)[0], last.details.outputsOmitted]).toEqual([listed, last.videoUrl, omitted])
      expect(finishedVideo(last.videoUrl, last.details)).toStrictEqual({ details: last.details })
    }
  })

  it("a SUCCEEDED task without `id` is a finished video without that detail, not a failed job", async () => {
    mock.configure({ withoutId: true, pollsUntilDone: 1 })
    const { upstreamId } = await Effect.runPromise(runway.submit(provider, { prompt: "p" }))
    const { last } = await pollUntilDone(runway, provider, upstreamId)
    expect(last).toEqual({ status: "succeeded", videoUrl: `https://dnznrvs05pmza.cloudfront.net/${upstreamId}.mp4?_jwt=mock`, details: {} })
    if (last.status === "succeeded") expect(finishedVideo(last.videoUrl, last.details)).toStrictEqual({ details: {} })
  })

  it("maps FAILED to failed with the failure and its code", async () => {
    mock.configure({ fail: true, failMessage: "Your prompt was flagged by our content moderation" })
    const { upstreamId } = await Effect.runPromise(runway.submit(provider, { prompt: "p" }))
    const { last } = await pollUntilDone(runway, provider, upstreamId)
    expect(last).toEqual({ status: "failed", error: "Your prompt was flagged by our content moderation (SAFETY.INPUT.TEXT)" })
  })

  it("maps CANCELLED to cancelled, not failed", () => {
    expect(Effect.runSync(toPoll("runway", { id: "t1", status: "CANCELLED" }))).toEqual({ status: "cancelled", error: "the task was cancelled at Runway" })
  })

  it("cancels a running task with DELETE /v1/tasks/{id} (the stop of a job whose avatar or key was revoked); its polls then answer CANCELLED", async () => {
    mock.configure({ pollsUntilDone: 5 })
    const { upstreamId } = await Effect.runPromise(runway.submit(provider, { prompt: "a lake at dawn" }))
    expect((await Effect.runPromise(runway.poll(provider, upstreamId))).status).toBe("pending")
    await Effect.runPromise(runway.cancel!(provider, upstreamId))
    const sent = mock.requests.at(-1)!
    expect([sent.method, sent.path, sent.headers.authorization, sent.headers["x-runway-version"]]).toEqual(["DELETE", `/v1/tasks/${upstreamId}`, `Bearer ${KEY}`, "2024-11-06"])
    expect(await pollUntilDone(runway, provider, upstreamId)).toEqual({ last: { status: "cancelled", error: "the task was cancelled at Runway" }, seen: ["cancelled"] })
    // A task Runway does not know: its 404, not retried.
    const unknown = await runEither(runway.cancel!(provider, "00000000-0000-0000-0000-000000000000"))
    expect(Either.isLeft(unknown) && [unknown.left.status, unknown.left.retryable]).toEqual([404, false])
  })

  it("a model Runway does not have is its 400 with Runway's error text", async () => {
    const result = await runEither(runway.submit(provider, { prompt: "p", model: "gen2" }))
    expect(Either.isLeft(result) && result.left).toMatchObject({ kind: "http", status: 400, retryable: false })
    if (Either.isLeft(result)) expect(result.left.message).toContain("model gen2 is not available")
  })

  it("a wrong key is 401; 429 and 500 are retryable; an unknown task is 404", async () => {
    const denied = await runEither(runway.submit(providerAt(mock.url, "nope"), { prompt: "p" }))
    expect(Either.isLeft(denied) && denied.left).toMatchObject({ kind: "http", status: 401, retryable: false })
    if (Either.isLeft(denied)) expect(denied.left.message).toContain("Invalid API key")
    mock.failNext(429)
    const throttled = await runEither(runway.submit(provider, { prompt: "p" }))
    expect(Either.isLeft(throttled) && throttled.left).toMatchObject({ status: 429, retryable: true })
    const { upstreamId } = await Effect.runPromise(runway.submit(provider, { prompt: "p" }))
    mock.failNext(500)
    const broken = await runEither(runway.poll(provider, upstreamId))
    expect(Either.isLeft(broken) && broken.left).toMatchObject({ status: 500, retryable: true })
    const missing = await runEither(runway.poll(provider, "00000000-0000-0000-0000-000000000000"))
    expect(Either.isLeft(missing) && missing.left).toMatchObject({ status: 404, retryable: false })
  })
})
