/**
 * Image generation vendors against local mocks of their APIs over the real transport: the exact
 * requests (paths, auth headers, multipart fields, JSON bodies), the mapped images, asynchronous
 * jobs (pending, failed, never finishing), refusals of what a vendor cannot honour, vendor error
 * bodies and hostile answers. Together AI's OpenAI-format images take width and height.
 */
import { Effect, Either, Option, Redacted } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { data } from "../../src/Catalog/Catalog.ts"
import type { ConfiguredProvider } from "../../src/Catalog/Catalog.ts"
import { IMAGE_JOB } from "../../src/Providers/Images/ImageVendor.ts"
import { endpointTypes, servedBy } from "../../src/Providers/Registry.ts"
import type { ImageRequest } from "../../src/Providers/Served.ts"
import type { UpstreamError } from "../../src/Providers/UpstreamError.ts"
import { type ImageVendor, type ImageVendorMock, startImageVendorMock } from "../support/mockImageVendors.ts"
import { type MockUpstream, startOpenAiMock } from "../support/mockUpstreams.ts"

const KEY = "img-key-123"

const providerFor = (id: string, url: string): ConfiguredProvider => {
  const entry = data.providers.find((p) => p.id === id)!
  return { ...entry, capabilities: endpointTypes(entry), endpoint: url, apiKey: Option.some(Redacted.make(KEY)), configured: true, settings: {}, missing: undefined }
}

const requestFor = (id: string, overrides: Partial<ImageRequest> = {}): ImageRequest => ({
  model: servedBy(providerFor(id, "")).images!.defaultModel,
  prompt: "a lighthouse at dusk",
  n: 1,
  ...overrides
})

const generate = (provider: ConfiguredProvider, request: ImageRequest) =>
  Effect.runPromise(Effect.either(servedBy(provider).images!.generate!(provider, request, { pollMs: 1 })))

const refusal = (id: string, overrides: Partial<ImageRequest>) => servedBy(providerFor(id, "")).images!.unsupported?.(requestFor(id, overrides))

const left = (result: Either.Either<unknown, UpstreamError>): UpstreamError => {
  if (Either.isRight(result)) throw new Error(`expected a failure, got ${JSON.stringify(result.right)}`)
  return result.left
}
const right = <A>(result: Either.Either<A, UpstreamError>): A => {
  if (Either.isLeft(result)) throw new Error(`expected images, got ${result.left.message}`)
  return result.right
}

describe("image vendors in the registry", () => {
  it("serve images through stability, fal, recraft and leonardo, each with a client of its own", () => {
    for (const id of ["stability", "fal", "recraft", "leonardo"]) {
      const entry = data.providers.find((p) => p.id === id)!
      expect(endpointTypes(entry), id).toContain("images")
      expect(servedBy(entry).images?.generate, id).toBeTypeOf("function")
    }
  })
})

/** One mock per vendor, closed after the file; requests cleared after each test. */
const mocks: Partial<Record<ImageVendor, ImageVendorMock>> = {}
const withMock = (vendor: ImageVendor) => {
  const ctx = {} as { mock: ImageVendorMock; provider: ConfiguredProvider }
  beforeAll(async () => {
    ctx.mock = mocks[vendor] = await startImageVendorMock(vendor, KEY)
    ctx.provider = providerFor(vendor, ctx.mock.url)
  })
  afterAll(() => ctx.mock.close())
  afterEach(() => {
    ctx.mock.requests.length = 0
    ctx.mock.setJob({})
  })
  return ctx
}

describe("Stability AI images", () => {
  const ctx = withMock("stability")

  it("posts the prompt and aspect ratio as a multipart form to Stable Image Core and answers the base64 image", async () => {
    const images = right(await generate(ctx.provider, requestFor("stability", { width: 1024, height: 1024 }))).images
    expect(images).toEqual([{ b64Json: Buffer.from("a lighthouse at dusk|1:1").toString("base64") }])
    const [req] = ctx.mock.requests
    expect(req).toEqual(expect.objectContaining({ method: "POST", path: "/v2beta/stable-image/generate/core", fields: { prompt: "a lighthouse at dusk", output_format: "png", aspect_ratio: "1:1" } }))
    expect(req!.headers.authorization).toBe(`Bearer ${KEY}`)
    expect(req!.headers.accept).toBe("application/json")
  })

  it("maps 1024x576 to 16:9 and an SD 3.5 model to the sd3 route with its model field", async () => {
    const images = right(await generate(ctx.provider, requestFor("stability", { model: "sd3.5-large", width: 1024, height: 576 }))).images
    expect(images).toEqual([{ b64Json: Buffer.from("a lighthouse at dusk|16:9").toString("base64") }])
    expect(ctx.mock.requests[0]).toMatchObject({ path: "/v2beta/stable-image/generate/sd3", fields: { model: "sd3.5-large", aspect_ratio: "16:9" } })
  })

  it("refuses by name what it cannot honour", () => {
    expect(refusal("stability", {})).toBeUndefined()
    expect(refusal("stability", { width: 1024, height: 576 })).toBeUndefined()
    expect(refusal("stability", { n: 2 })).toBe("Stability AI makes at most 1 image per request (n is 2)")
    expect(refusal("stability", { width: 1000, height: 700 })).toMatch(/^Stability AI takes an aspect ratio, not a pixel size: width:height 10:7 is none of 16:9, 1:1/)
    expect(refusal("stability", { extra: { quality: "hd", style: "vivid" } })).toBe("Stability AI does not take the image fields quality, style")
    expect(refusal("stability", { model: "dall-e-3" })).toMatch(/^Stability AI has no model dall-e-3; use one of stable-image-core, stable-image-ultra/)
  })

  it("turns a filtered image, an error body and a hostile answer into clean upstream errors", async () => {
    expect(left(await generate(ctx.provider, requestFor("stability", { prompt: "something forbidden" })))).toMatchObject({ kind: "http", retryable: false, message: "stability filtered the image (finish_reason CONTENT_FILTERED)" })
    ctx.mock.failNext(400, "prompt: too long")
    const error = left(await generate(ctx.provider, requestFor("stability")))
    expect(error).toMatchObject({ kind: "http", status: 400 })
    expect(error.message).toContain("prompt: too long")
    ctx.mock.rawNext("not json")
    expect(left(await generate(ctx.provider, requestFor("stability")))).toMatchObject({ kind: "protocol" })
    ctx.mock.rawNext(JSON.stringify({ finish_reason: "SUCCESS" }))
    expect(left(await generate(ctx.provider, requestFor("stability")))).toMatchObject({ kind: "protocol", message: "stability sent an unexpected answer: no image in the answer" })
    const wrongKey = { ...ctx.provider, apiKey: Option.some(Redacted.make("wrong")) }
    expect(left(await generate(wrongKey, requestFor("stability")))).toMatchObject({ kind: "http", status: 401 })
  })
})

describe("fal images (queue)", () => {
  const ctx = withMock("fal")

  it("submits to the model's queue with Key auth, polls the app's request status, and answers the result's image URLs", async () => {
    ctx.mock.setJob({ pendingPolls: 2 })
    const images = right(await generate(ctx.provider, requestFor("fal", { n: 2, width: 1024, height: 768 }))).images
    const [submit, ...rest] = ctx.mock.requests
    expect(submit).toMatchObject({ method: "POST", path: "/fal-ai/flux/schnell", json: { prompt: "a lighthouse at dusk", num_images: 2, image_size: { width: 1024, height: 768 } } })
    const id = rest[0]!.path.split("/")[4]!
    expect(rest.map((r) => `${r.method} ${r.path}`)).toEqual([
      ...Array(3).fill(`GET /fal-ai/flux/requests/${id}/status`),
      `GET /fal-ai/flux/requests/${id}`
    ])
    for (const r of ctx.mock.requests) expect(r.headers.authorization).toBe(`Key ${KEY}`)
    expect(images).toEqual([{ url: `https://v3.fal.media/files/${id}/0.jpg` }, { url: `https://v3.fal.media/files/${id}/1.jpg` }])
  })

  it("stops a failed request with fal's message, and a request that never completes after the bounded polls", async () => {
    ctx.mock.setJob({ pendingPolls: 1, failWith: "NSFW content detected" })
    expect(left(await generate(ctx.provider, requestFor("fal")))).toMatchObject({ kind: "http", retryable: false, message: "fal could not generate the images: NSFW content detected" })
    ctx.mock.requests.length = 0
    ctx.mock.setJob({ never: true })
    expect(left(await generate(ctx.provider, requestFor("fal")))).toMatchObject({ kind: "timeout", message: "fal did not finish generating the images in time" })
    expect(ctx.mock.requests.filter((r) => r.method === "GET")).toHaveLength(IMAGE_JOB.maxPolls)
  })

  it("refuses by name what it cannot honour, and answers hostile replies with clean errors", async () => {
    expect(refusal("fal", { n: 5 })).toBe("fal makes at most 4 images per request (n is 5)")
    expect(refusal("fal", { model: "fal-ai/../admin" })).toBe("fal model ids look like owner/app[/path] (e.g. fal-ai/flux/schnell), not fal-ai/../admin")
    expect(refusal("fal", { extra: { quality: "hd" } })).toBe("fal does not take the image field quality")
    ctx.mock.rawNext(JSON.stringify({ status: "IN_QUEUE" }))
    expect(left(await generate(ctx.provider, requestFor("fal")))).toMatchObject({ kind: "protocol", message: "fal sent an unexpected answer: the queue answered no request_id" })
    ctx.mock.failNext(422, "prompt: field required")
    expect((left(await generate(ctx.provider, requestFor("fal")))).message).toBe("fal answered HTTP 422: prompt: field required")
  })
})

describe("Recraft images", () => {
  const ctx = withMock("recraft")

  it("posts the OpenAI-format request with Recraft's model and size, and answers its images", async () => {
    const images = right(await generate(ctx.provider, requestFor("recraft", { n: 2, width: 1365, height: 1024, extra: { style: "digital_illustration" } }))).images
    const [req] = ctx.mock.requests
    expect(req).toMatchObject({ method: "POST", path: "/v1/images/generations", json: { prompt: "a lighthouse at dusk", model: "recraftv3", n: 2, size: "1365x1024", style: "digital_illustration" } })
    expect(req!.headers.authorization).toBe(`Bearer ${KEY}`)
    expect(images).toEqual([{ url: "https://img.recraft.ai/recraftv3/0.png" }, { url: "https://img.recraft.ai/recraftv3/1.png" }])
    const b64 = right(await generate(ctx.provider, requestFor("recraft", { extra: { response_format: "b64_json" } }))).images
    expect(b64).toEqual([{ b64Json: Buffer.from("a lighthouse at dusk|0").toString("base64") }])
  })

  it("refuses a size it lacks, more than 6 images and OpenAI fields it has no use for", async () => {
    expect(refusal("recraft", { width: 1024, height: 1024 })).toBeUndefined()
    expect(refusal("recraft", { width: 1000, height: 1000 })).toMatch(/^Recraft has no size 1000x1000; its sizes: 1024x1024, 1365x1024/)
    expect(refusal("recraft", { n: 7 })).toBe("Recraft makes at most 6 images per request (n is 7)")
    expect(refusal("recraft", { extra: { quality: "hd" } })).toBe("Recraft does not take the image field quality")
    ctx.mock.failNext(400, "invalid style")
    expect(left(await generate(ctx.provider, requestFor("recraft"))).message).toBe("recraft answered HTTP 400: invalid style")
  })
})

describe("Leonardo.Ai images", () => {
  const ctx = withMock("leonardo")

  it("creates a generation, polls it until COMPLETE and answers its image URLs", async () => {
    ctx.mock.setJob({ pendingPolls: 2 })
    const images = right(await generate(ctx.provider, requestFor("leonardo", { n: 2, width: 1024, height: 768 }))).images
    const [create, ...polls] = ctx.mock.requests
    expect(create).toMatchObject({
      method: "POST",
      path: "/api/rest/v1/generations",
      json: { prompt: "a lighthouse at dusk", modelId: "b24e16ff-06e3-43eb-8d33-4416c2d75876", num_images: 2, width: 1024, height: 768 }
    })
    const id = polls[0]!.path.split("/").at(-1)!
    expect(polls.map((r) => `${r.method} ${r.path}`)).toEqual(Array(3).fill(`GET /api/rest/v1/generations/${id}`))
    for (const r of ctx.mock.requests) expect(r.headers.authorization).toBe(`Bearer ${KEY}`)
    expect(images).toEqual([0, 1].map((i) => ({ url: `https://cdn.leonardo.ai/users/u/generations/${id}/${i}.jpg` })))
  })

  it("stops a FAILED generation, refuses what it cannot honour, and answers hostile replies with clean errors", async () => {
    ctx.mock.setJob({ failWith: "failed" })
    expect(left(await generate(ctx.provider, requestFor("leonardo")))).toMatchObject({ kind: "http", message: "leonardo could not generate the images: the generation failed" })
    expect(refusal("leonardo", { n: 9 })).toBe("Leonardo.Ai makes at most 8 images per request (n is 9)")
    expect(refusal("leonardo", { width: 1020, height: 1024 })).toBe("Leonardo.Ai takes width and height as multiples of 8 from 32 to 1536 (not 1020x1024)")
    expect(refusal("leonardo", { width: 2048, height: 1024 })).toMatch(/not 2048x1024/)
    expect(refusal("leonardo", { extra: { style: "vivid" } })).toBe("Leonardo.Ai does not take the image field style")
    ctx.mock.rawNext(JSON.stringify({ sdGenerationJob: {} }))
    expect(left(await generate(ctx.provider, requestFor("leonardo")))).toMatchObject({ kind: "protocol", message: "leonardo sent an unexpected answer: the generation answered no generationId" })
    ctx.mock.failNext(401, "Invalid API key")
    expect(left(await generate(ctx.provider, requestFor("leonardo"))).message).toBe("leonardo answered HTTP 401: Invalid API key")
  })
})

describe("Together AI images", () => {
  let openai: MockUpstream
  beforeAll(async () => {
    openai = await startOpenAiMock({ apiKey: KEY })
  })
  afterAll(() => openai.close())

  it("sends width and height, which Together's image API takes instead of OpenAI's size", async () => {
    const provider = providerFor("together-ai", openai.url)
    expect(provider.capabilities).toContain("images")
    const images = right(await generate(provider, requestFor("together-ai", { n: 2, width: 1024, height: 768 }))).images
    expect(images).toHaveLength(2)
    const body = openai.requests.at(-1)!.body as Record<string, unknown>
    expect(body).toEqual({ model: "black-forest-labs/FLUX.1-schnell", prompt: "a lighthouse at dusk", n: 2, width: 1024, height: 768 })
    expect(openai.requests.at(-1)!.path).toMatch(/\/images\/generations$/)
  })
})

describe("OpenAI and xAI image sizes", () => {
  it("refuses a size OpenAI's fixed-size models do not make, and passes the others and other models on", () => {
    // gpt-image-1 used to get `512x512`, which OpenAI refuses upstream.
    expect(refusal("openai", { width: 512, height: 512 })).toBe("OpenAI's gpt-image-1 has no size 512x512; its sizes: 1024x1024, 1536x1024, 1024x1536")
    expect(refusal("openai", { width: 1536, height: 1024 })).toBeUndefined()
    expect(refusal("openai", { model: "gpt-image-1-mini", width: 1792, height: 1024 })).toMatch(/^OpenAI's gpt-image-1-mini has no size 1792x1024/)
    expect(refusal("openai", { model: "dall-e-3", width: 1792, height: 1024 })).toBeUndefined()
    expect(refusal("openai", { model: "dall-e-3", width: 512, height: 512 })).toMatch(/^OpenAI's dall-e-3 has no size 512x512; its sizes: 1024x1024, 1792x1024, 1024x1792$/)
    expect(refusal("openai", { model: "dall-e-2", width: 512, height: 512 })).toBeUndefined()
    // A model whose sizes are not fixed here (gpt-image-2 takes any) gets the size as asked.
    expect(refusal("openai", { model: "gpt-image-2", width: 1000, height: 700 })).toBeUndefined()
    expect(refusal("openai", {})).toBeUndefined()
  })

  it("refuses a pixel size for xAI, whose image API takes none", () => {
    expect(refusal("xai", { width: 1024, height: 1024 })).toMatch(/^xAI's image API takes no pixel size/)
    expect(refusal("xai", {})).toBeUndefined()
  })
})
