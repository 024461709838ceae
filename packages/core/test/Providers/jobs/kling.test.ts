/**
 * The Kling video adapter against a mock of Kling's API that verifies each request's JWT
 * (HS256 signature with the secret key, iss = access key, exp, nbf) on its own.
 */
import { Effect, Either } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { ConfiguredProvider } from "../../../src/Catalog/Catalog.ts"
import { kling, SECRET_KEY, served, token, toPoll } from "../../../src/Providers/Video/Kling.ts"
import { type KlingMock, pollUntilDone, runEither, startKlingMock, verifyKlingToken, videoProvider } from "../../support/mockVideoVendors.ts"

const ACCESS = "ak-kling-test"
const SECRET = "sk-kling-test-secret"

const providerAt = (endpoint: string, secret = SECRET) => videoProvider("kling", endpoint, ACCESS, { [SECRET_KEY]: secret })

describe("Kling video adapter (JWT-signed task API)", () => {
  let mock: KlingMock
  let provider: ConfiguredProvider
  beforeAll(async () => {
    mock = await startKlingMock({ apiKey: ACCESS, secretKey: SECRET })
    provider = providerAt(mock.url)
  })
  afterAll(() => mock.close())
  beforeEach(() => mock.configure({ pollsUntilDone: 2, fail: false }))

  it("needs the access key and the secret key, and says which is missing", () => {
    expect(served.credentials!({ hasApiKey: false, settings: {} }, "KLING")).toBe(`set KLING_API_KEY (the Kling access key) and ${SECRET_KEY}`)
    expect(served.credentials!({ hasApiKey: true, settings: {} }, "KLING")).toContain(`set ${SECRET_KEY}`)
    expect(served.credentials!({ hasApiKey: true, settings: { [SECRET_KEY]: "s" } }, "KLING")).toBeUndefined()
    expect(served.settings!.find((s) => s.name === SECRET_KEY)?.secret).toBe(true)
  })

  it("signs an HS256 token with iss = access key, exp 30 min ahead, nbf 5 s back", async () => {
    const now = 1_800_000_000
    const jwt = await token(ACCESS, SECRET, now)
    const checked = verifyKlingToken(jwt, ACCESS, SECRET, now)
    expect(checked).toMatchObject({ ok: true, header: { alg: "HS256", typ: "JWT" }, claims: { iss: ACCESS, exp: now + 1800, nbf: now - 5 } })
    expect(verifyKlingToken(jwt, ACCESS, "another-secret", now)).toMatchObject({ ok: false, code: 1000 })
    expect(verifyKlingToken(jwt, ACCESS, SECRET, now + 1801)).toMatchObject({ ok: false, code: 1004 })
  })

  it("text-to-video: POST /v1/videos/text2video with model_name, string duration, aspect_ratio and a valid JWT", async () => {
    const { upstreamId } = await Effect.runPromise(kling.submit(provider, { prompt: "a cat surfing", durationSeconds: 9, aspectRatio: "9:16" }))
    expect(upstreamId).toMatch(/^text2video\/\d+$/)
    const sent = mock.requests.at(-1)!
    expect(sent.method).toBe("POST")
    expect(sent.path).toBe("/v1/videos/text2video")
    expect(sent.headers.authorization).toMatch(/^Bearer [\w-]+\.[\w-]+\.[\w-]+$/)
    expect(sent.body).toEqual({ model_name: "kling-v2-1-master", prompt: "a cat surfing", mode: "std", aspect_ratio: "9:16", duration: "10" })
    const { claims } = mock.tokens.at(-1)!
    expect(claims.iss).toBe(ACCESS)
    const now = Math.floor(Date.now() / 1000)
    expect(claims.exp).toBeGreaterThan(now + 1700)
    expect(claims.nbf).toBeLessThanOrEqual(now)
  })

  it("image-to-video: POST /v1/videos/image2video with image; polls submitted → processing → succeed", async () => {
    mock.configure({ pollsUntilDone: 3 })
    const { upstreamId } = await Effect.runPromise(kling.submit(provider, { prompt: "it walks away", imageUrl: "https://cdn.example.com/astronaut.jpg", model: "kling-v1-6" }))
    expect(mock.requests.at(-1)!.body).toEqual({ model_name: "kling-v1-6", prompt: "it walks away", mode: "std", image: "https://cdn.example.com/astronaut.jpg" })
    const taskId = upstreamId.split("/")[1]!
    const { last, seen } = await pollUntilDone(kling, provider, upstreamId)
    expect(seen).toEqual(["pending", "running", "succeeded"])
    expect(last).toEqual({
      status: "succeeded",
      videoUrl: `https://cdn.klingai.com/bs2/upload-kling-api/${taskId}.mp4`,
      details: { taskId, videoId: `v-${taskId}`, durationSeconds: 5.1 }
    })
    expect(mock.requests.at(-1)!.path).toBe(`/v1/videos/image2video/${taskId}`)
    expect(mock.requests.at(-1)!.method).toBe("GET")
  })

  it("maps failed to failed with task_status_msg", async () => {
    mock.configure({ fail: true, failMessage: "Failure to pass the risk control system" })
    const { upstreamId } = await Effect.runPromise(kling.submit(provider, { prompt: "p" }))
    const { last } = await pollUntilDone(kling, provider, upstreamId)
    expect(last).toEqual({ status: "failed", error: "Failure to pass the risk control system" })
  })

  it("refuses by name what Kling cannot do, before sending anything", async () => {
    const before = mock.requests.length
    const ratio = await runEither(kling.submit(provider, { prompt: "p", aspectRatio: "4:3" }))
    if (Either.isLeft(ratio)) expect(ratio.left.message).toContain("aspectRatio 4:3 is not supported by kling")
    const imageRatio = await runEither(kling.submit(provider, { prompt: "p", imageUrl: "https://x.example/i.png", aspectRatio: "16:9" }))
    if (Either.isLeft(imageRatio)) expect(imageRatio.left.message).toContain("aspectRatio with imageUrl is not supported by kling")
    expect([Either.isLeft(ratio), Either.isLeft(imageRatio)]).toEqual([true, true])
    expect(mock.requests.length).toBe(before)
  })

  it("a token signed with the wrong secret is Kling's 401 (code 1000), not retryable", async () => {
    const result = await runEither(kling.submit(providerAt(mock.url, "wrong-secret"), { prompt: "p" }))
    expect(Either.isLeft(result) && result.left).toMatchObject({ kind: "http", status: 401, retryable: false })
    if (Either.isLeft(result)) expect(result.left.message).toContain("Authentication failed")
  })

  it("a bad parameter is 400 with Kling's message; 429 is retryable; an unknown task is 404", async () => {
    const bad = await runEither(kling.submit(provider, { prompt: "p", model: "kling-v9" }))
    expect(Either.isLeft(bad) && bad.left).toMatchObject({ status: 400, retryable: false })
    if (Either.isLeft(bad)) expect(bad.left.message).toContain("model_name value 'kling-v9' is invalid")
    mock.failNext(429)
    const throttled = await runEither(kling.submit(provider, { prompt: "p" }))
    expect(Either.isLeft(throttled) && throttled.left).toMatchObject({ status: 429, retryable: true })
    if (Either.isLeft(throttled)) expect(throttled.left.message).toContain("too fast")
    const missing = await runEither(kling.poll(provider, "text2video/123"))
    expect(Either.isLeft(missing) && missing.left).toMatchObject({ status: 404, retryable: false })
    const foreign = await runEither(kling.poll(provider, "123"))
    expect(Either.isLeft(foreign) && foreign.left).toMatchObject({ kind: "protocol" })
  })

  it("a task_id holding `/` and dots stays one escaped path segment, so the poll reaches that task and nothing else", async () => {
    mock.nextTaskId("../../../admin/x")
    const { upstreamId } = await Effect.runPromise(kling.submit(provider, { prompt: "p" }))
    expect(upstreamId).toBe("text2video/../../../admin/x")
    const { last } = await pollUntilDone(kling, provider, upstreamId)
    expect(last).toMatchObject({ status: "succeeded", details: { taskId: "../../../admin/x" } })
    expect(mock.requests.at(-1)!.path).toBe("/v1/videos/text2video/..%2F..%2F..%2Fadmin%2Fx")
  })

  it("a stored reference whose task id is a dot segment (`.`, `..`: escaping leaves them) is refused without a call", async () => {
    // submit refuses such ids now (VideoAdapter.submittedId); a job stored before that still holds one.
    for (const id of ["text2video/..", "image2video/.", `text2video/${"9".repeat(300)}`]) {
      const before = mock.requests.length
      const result = await runEither(kling.poll(provider, id))
      expect(Either.isLeft(result) && result.left.kind, id).toBe("protocol")
      expect(mock.requests.length, id).toBe(before)
    }
    mock.nextTaskId("..")
    const refused = await runEither(kling.submit(provider, { prompt: "p" }))
    expect(Either.isLeft(refused) && refused.left.kind).toBe("protocol")
  })

  it("a finished task without task_id is a video without that detail, not a failed job", () => {
    expect(Effect.runSync(toPoll("kling", { task_status: "succeed", task_result: { videos: [{ url: "https://cdn.klingai.com/v.mp4" }] } })))
      .toEqual({ status: "succeeded", videoUrl: "https://cdn.klingai.com/v.mp4", details: {} })
  })
})
