/**
 * Speech-to-text vendors against local mocks of their APIs over the real transport: the exact
 * requests (raw audio bodies, multipart parts, query strings, each vendor's auth header), the
 * mapped transcripts and languages, asynchronous jobs (pending, failed, never finishing),
 * refusals of what a vendor cannot honour, vendor error bodies and hostile answers.
 */
import { Effect, Either, Option, Redacted } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { data } from "../../src/Catalog/Catalog.ts"
import type { ConfiguredProvider } from "../../src/Catalog/Catalog.ts"
import { endpointTypes, servedBy } from "../../src/Providers/Registry.ts"
import type { TranscriptionRequest, TranscriptionResult } from "../../src/Providers/Served.ts"
import { TRANSCRIPTION_JOB } from "../../src/Providers/Transcription/TranscriptionVendor.ts"
import type { UpstreamError } from "../../src/Providers/UpstreamError.ts"
import { startTranscriptionVendorMock, type TranscriptionVendor, type TranscriptionVendorMock } from "../support/mockTranscriptionVendors.ts"

const KEY = "stt-key-123"
const VENDORS: ReadonlyArray<TranscriptionVendor> = ["deepgram", "assemblyai", "speechmatics", "rev-ai", "elevenlabs", "cartesia"]
const AUDIO = "RIFF-fake-wave-bytes hello world"

const providerFor = (id: string, url: string, key: string = KEY): ConfiguredProvider => {
  const entry = data.providers.find((p) => p.id === id)!
  return { ...entry, capabilities: endpointTypes(entry), endpoint: url, apiKey: Option.some(Redacted.make(key)), configured: true, settings: {}, missing: undefined }
}

const requestFor = (id: string, overrides: Partial<TranscriptionRequest> = {}): TranscriptionRequest => ({
  model: servedBy(providerFor(id, "")).transcription!.defaultModel,
  file: new File([AUDIO], "clip.wav", { type: "audio/wav" }),
  ...overrides
})

const transcribe = (provider: ConfiguredProvider, request: TranscriptionRequest) =>
  Effect.runPromise(Effect.either(servedBy(provider).transcription!.transcribe!(provider, request, { pollMs: 1 })))

const left = (result: Either.Either<unknown, UpstreamError>): UpstreamError => {
  if (Either.isRight(result)) throw new Error(`expected a failure, got ${JSON.stringify(result.right)}`)
  return result.left
}
const right = (result: Either.Either<TranscriptionResult, UpstreamError>): TranscriptionResult => {
  if (Either.isLeft(result)) throw new Error(`expected a transcript, got ${result.left.message}`)
  return result.right
}

describe("transcription vendors in the registry", () => {
  it("serve transcription through each of the six, each with a client of its own", () => {
    for (const id of VENDORS) {
      const entry = data.providers.find((p) => p.id === id)!
      expect(endpointTypes(entry), id).toContain("transcription")
      expect(servedBy(entry).transcription?.transcribe, id).toBeTypeOf("function")
    }
  })

  it("refuse by name the models a vendor does not have", () => {
    expect(servedBy(providerFor("speechmatics", "")).transcription!.unsupported!(requestFor("speechmatics", { model: "nova-3" }))).toMatch(/Speechmatics has no operating point nova-3/)
    expect(servedBy(providerFor("rev-ai", "")).transcription!.unsupported!(requestFor("rev-ai", { model: "whisper" }))).toMatch(/Rev AI has no transcriber whisper/)
    expect(servedBy(providerFor("rev-ai", "")).transcription!.unsupported!(requestFor("rev-ai"))).toBeUndefined()
  })
})

const mocks: Partial<Record<TranscriptionVendor, TranscriptionVendorMock>> = {}
const withMock = (vendor: TranscriptionVendor) => {
  const ctx = {} as { mock: TranscriptionVendorMock; provider: ConfiguredProvider }
  beforeAll(async () => {
    ctx.mock = mocks[vendor] = await startTranscriptionVendorMock(vendor, KEY)
    ctx.provider = providerFor(vendor, ctx.mock.url)
  })
  afterAll(() => ctx.mock.close())
  afterEach(() => {
    ctx.mock.requests.length = 0
    ctx.mock.setJob({})
  })
  return ctx
}

/** What every vendor answers alike: a wrong key, an error status and a hostile body, as clean UpstreamErrors. */
const failures = (ctx: { mock: TranscriptionVendorMock; provider: ConfiguredProvider }, vendor: TranscriptionVendor) => {
  it("maps a wrong key to a non-retryable 401 error", async () => {
    const e = left(await transcribe(providerFor(vendor, ctx.mock.url, "wrong"), requestFor(vendor)))
    expect(e.status).toBe(401)
    expect(e.retryable).toBe(false)
  })
  it("maps a 5xx in the vendor's error shape to a retryable error and a non-JSON body to a protocol error", async () => {
    ctx.mock.failNext(503, "overloaded")
    const e = left(await transcribe(ctx.provider, requestFor(vendor)))
    expect(e.status).toBe(503)
    expect(e.retryable).toBe(true)
    ctx.mock.rawNext("<html>not json")
    expect(left(await transcribe(ctx.provider, requestFor(vendor))).kind).toBe("protocol")
    ctx.mock.rawNext(JSON.stringify({ unexpected: true }))
    expect(left(await transcribe(ctx.provider, requestFor(vendor))).kind).toBe("protocol")
  })
}

/** What every asynchronous vendor answers alike: a failed job names the vendor's reason; a job that never ends times out. */
const jobFailures = (ctx: { mock: TranscriptionVendorMock; provider: ConfiguredProvider }, vendor: TranscriptionVendor) => {
  it("fails a failed job with the vendor's reason, and a job that never ends as a timeout", async () => {
    ctx.mock.setJob({ pendingPolls: 1, failWith: "the audio has no speech" })
    const failed = left(await transcribe(ctx.provider, requestFor(vendor)))
    expect(failed.message).toContain(`could not ${TRANSCRIPTION_JOB.task}`)
    expect(failed.message).toContain("the audio has no speech")
    expect(failed.retryable).toBe(false)
    ctx.mock.setJob({ never: true })
    const slow = await Effect.runPromise(Effect.either(servedBy(ctx.provider).transcription!.transcribe!(ctx.provider, requestFor(vendor), { pollMs: 1 })))
    expect(left(slow).kind).toBe("timeout")
  }, 20_000)
}

describe("Deepgram", () => {
  const ctx = withMock("deepgram")

  it("posts the raw audio with its content type to /listen with model and language, Token auth, and maps the transcript", async () => {
    const result = right(await transcribe(ctx.provider, requestFor("deepgram", { language: "de" })))
    expect(result).toEqual({ text: `heard ${AUDIO}`, language: "de" })
    const [req] = ctx.mock.requests
    expect(req!.method).toBe("POST")
    expect(req!.url).toBe("/v1/listen?model=nova-3&language=de")
    expect(req!.headers.authorization).toBe(`Token ${KEY}`)
    expect(req!.headers["content-type"]).toBe("audio/wav")
    expect(req!.body.toString("utf8")).toBe(AUDIO)
  })

  it("asks for language detection without a language and answers the detected one", async () => {
    expect(right(await transcribe(ctx.provider, requestFor("deepgram")))).toEqual({ text: `heard ${AUDIO}`, language: "en" })
    expect(ctx.mock.requests[0]!.url).toBe("/v1/listen?model=nova-3&detect_language=true")
  })
  failures(ctx, "deepgram")
})

describe("AssemblyAI", () => {
  const ctx = withMock("assemblyai")

  it("uploads the raw bytes, submits the transcript with the bare key in Authorization, polls until completed", async () => {
    ctx.mock.setJob({ pendingPolls: 2 })
    const result = right(await transcribe(ctx.provider, requestFor("assemblyai", { language: "fr" })))
    expect(result).toEqual({ text: `heard ${AUDIO}`, language: "fr" })
    const [upload, submit, ...polls] = ctx.mock.requests
    expect(upload!.url).toBe("/v2/upload")
    expect(upload!.headers["content-type"]).toBe("application/octet-stream")
    expect(upload!.body.toString("utf8")).toBe(AUDIO)
    expect(submit!.url).toBe("/v2/transcript")
    expect(submit!.json).toEqual({ audio_url: expect.stringMatching(/\/uploads\//), speech_models: ["universal-3-pro", "universal-2"], language_code: "fr" })
    expect(polls.map((p) => `${p.method} ${p.url.replace(/[^/]+$/, "{id}")}`)).toEqual(Array(3).fill("GET /v2/transcript/{id}"))
    for (const r of ctx.mock.requests) expect(r.headers.authorization).toBe(KEY)
  })

  it("asks for language detection without a language", async () => {
    expect(right(await transcribe(ctx.provider, requestFor("assemblyai"))).language).toBe("en")
    expect(ctx.mock.requests[1]!.json).toEqual(expect.objectContaining({ language_detection: true }))
    expect(ctx.mock.requests[1]!.json).not.toHaveProperty("language_code")
  })
  failures(ctx, "assemblyai")
  jobFailures(ctx, "assemblyai")
})

describe("Speechmatics", () => {
  const ctx = withMock("speechmatics")

  it("submits data_file and config as multipart, polls the job, fetches the txt transcript", async () => {
    ctx.mock.setJob({ pendingPolls: 1 })
    const result = right(await transcribe(ctx.provider, requestFor("speechmatics", { language: "zh" })))
    expect(result).toEqual({ text: `heard ${AUDIO}`, language: "zh" })
    const [submit, poll1, poll2, transcript] = ctx.mock.requests
    expect(submit!.url).toBe("/v2/jobs")
    expect(JSON.parse(submit!.fields!.config!)).toEqual({ type: "transcription", transcription_config: { language: "cmn", operating_point: "enhanced" } })
    expect(submit!.files!.data_file).toEqual({ name: "clip.wav", type: "audio/wav", text: AUDIO })
    expect([poll1!.method, poll2!.method]).toEqual(["GET", "GET"])
    expect(transcript!.url).toMatch(/^\/v2\/jobs\/[^/]+\/transcript\?format=txt$/)
    for (const r of ctx.mock.requests) expect(r.headers.authorization).toBe(`Bearer ${KEY}`)
  })

  it("asks for language identification (auto) without a language", async () => {
    const result = right(await transcribe(ctx.provider, requestFor("speechmatics")))
    expect(result.text).toBe(`heard ${AUDIO}`)
    expect(JSON.parse(ctx.mock.requests[0]!.fields!.config!).transcription_config.language).toBe("auto")
  })
  failures(ctx, "speechmatics")
  jobFailures(ctx, "speechmatics")
})

describe("Rev AI", () => {
  const ctx = withMock("rev-ai")

  it("submits media and options as multipart, polls the job, fetches the text/plain transcript", async () => {
    ctx.mock.setJob({ pendingPolls: 1 })
    const result = right(await transcribe(ctx.provider, requestFor("rev-ai", { language: "es" })))
    expect(result).toEqual({ text: `heard ${AUDIO}`, language: "es" })
    const [submit, , , transcript] = ctx.mock.requests
    expect(submit!.url).toBe("/speechtotext/v1/jobs")
    expect(JSON.parse(submit!.fields!.options!)).toEqual({ transcriber: "machine", language: "es" })
    expect(submit!.files!.media).toEqual({ name: "clip.wav", type: "audio/wav", text: AUDIO })
    expect(transcript!.url).toMatch(/^\/speechtotext\/v1\/jobs\/[^/]+\/transcript$/)
    expect(transcript!.headers.accept).toBe("text/plain")
    for (const r of ctx.mock.requests) expect(r.headers.authorization).toBe(`Bearer ${KEY}`)
  })

  it("a transcript answered as an HTML page or a JSON body is a protocol error, never the text (both were taken as it)", async () => {
    for (const [contentType, body] of [["text/html; charset=utf-8", "<html><body><h1>502 Bad Gateway</h1></body></html>"], ["application/json", '{"error":"oops"}']] as const) {
      ctx.mock.transcriptNext(contentType, body)
      const failed = await transcribe(ctx.provider, requestFor("rev-ai"))
      expect(Either.isLeft(failed) && failed.left.message).toBe(`rev-ai sent an unexpected answer: ${contentType.split(";")[0]} instead of plain text`)
    }
  })

  it("sends no language when none is asked (Rev AI transcribes English) and reports the job's language", async () => {
    expect(right(await transcribe(ctx.provider, requestFor("rev-ai"))).language).toBe("en")
    expect(JSON.parse(ctx.mock.requests[0]!.fields!.options!)).toEqual({ transcriber: "machine" })
  })
  failures(ctx, "rev-ai")
  jobFailures(ctx, "rev-ai")
})

describe("ElevenLabs", () => {
  const ctx = withMock("elevenlabs")

  it("posts file, model_id and language_code as multipart with xi-api-key and maps text and language_code", async () => {
    const result = right(await transcribe(ctx.provider, requestFor("elevenlabs", { language: "ja" })))
    expect(result).toEqual({ text: `heard ${AUDIO}`, language: "ja" })
    const [req] = ctx.mock.requests
    expect(req!.url).toBe("/v1/speech-to-text")
    expect(req!.headers["xi-api-key"]).toBe(KEY)
    expect(req!.headers.authorization).toBeUndefined()
    expect(req!.fields).toEqual({ model_id: "scribe_v1", language_code: "ja" })
    expect(req!.files!.file).toEqual({ name: "clip.wav", type: "audio/wav", text: AUDIO })
  })
  failures(ctx, "elevenlabs")
})

describe("Cartesia", () => {
  const ctx = withMock("cartesia")

  it("posts file, model and language as multipart with X-API-Key and Cartesia-Version and maps text and language", async () => {
    const result = right(await transcribe(ctx.provider, requestFor("cartesia", { language: "pt" })))
    expect(result).toEqual({ text: `heard ${AUDIO}`, language: "pt" })
    const [req] = ctx.mock.requests
    expect(req!.url).toBe("/stt")
    expect(req!.headers["x-api-key"]).toBe(KEY)
    expect(req!.headers["cartesia-version"]).toBe("2025-04-16")
    expect(req!.fields).toEqual({ model: "ink-whisper", language: "pt" })
    expect(req!.files!.file).toEqual({ name: "clip.wav", type: "audio/wav", text: AUDIO })
  })
  failures(ctx, "cartesia")
})
