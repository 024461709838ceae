/**
 * Text-to-speech vendors against local mocks of their APIs over the real transport: the exact
 * requests (paths, queries, auth headers, JSON bodies), each vendor's default voice, the audio
 * bytes and content types back, refusals of what a vendor cannot honour, vendor error bodies and
 * hostile answers; OpenAI-format speech keeps `alloy` as its default voice.
 */
import { Effect, Either, Option, Redacted } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { data } from "../../src/Catalog/Catalog.ts"
import type { ConfiguredProvider } from "../../src/Catalog/Catalog.ts"
import { synthesize } from "../../src/Providers/OpenAiMedia.ts"
import { endpointTypes, servedBy } from "../../src/Providers/Registry.ts"
import { speak } from "../../src/Providers/Speech/SpeechVendor.ts"
import type { SpeechRequest, SynthesizedSpeech } from "../../src/Providers/Served.ts"
import type { UpstreamError } from "../../src/Providers/UpstreamError.ts"
import { type SpeechVendor, type SpeechVendorMock, startSpeechVendorMock } from "../support/mockSpeechVendors.ts"
import { startOpenAiMock } from "../support/mockUpstreams.ts"

const KEY = "tts-key-123"
const VENDORS: ReadonlyArray<SpeechVendor> = ["elevenlabs", "cartesia", "lmnt", "deepgram"]

const providerFor = (id: string, url: string, key = KEY): ConfiguredProvider => {
  const entry = data.providers.find((p) => p.id === id)!
  return { ...entry, capabilities: endpointTypes(entry), endpoint: url, apiKey: Option.some(Redacted.make(key)), configured: true, settings: {}, missing: undefined }
}

const requestFor = (id: string, overrides: Partial<SpeechRequest> = {}): SpeechRequest => ({
  model: servedBy(providerFor(id, "")).speech!.defaultModel,
  text: "Hello there.",
  format: "mp3",
  ...overrides
})

const refusal = (id: string, overrides: Partial<SpeechRequest>) => servedBy(providerFor(id, "")).speech!.unsupported?.(requestFor(id, overrides))

// As every speech call goes: the vendor's client, its answer checked to be audio.
const run = (provider: ConfiguredProvider, request: SpeechRequest) => Effect.runPromise(Effect.either(speak(servedBy(provider).speech!.synthesize!, provider, request)))

const audio = (result: Either.Either<SynthesizedSpeech, UpstreamError>) => {
  if (Either.isLeft(result)) throw new Error(`expected audio, got ${result.left.message}`)
  return { text: Buffer.from(result.right.bytes).toString("utf8"), contentType: result.right.contentType }
}
const left = (result: Either.Either<unknown, UpstreamError>): UpstreamError => {
  if (Either.isRight(result)) throw new Error("expected a failure, got audio")
  return result.left
}

describe("speech vendors in the registry", () => {
  it("serve speech through elevenlabs, cartesia, lmnt and deepgram, each with a client of its own", () => {
    for (const id of VENDORS) {
      const entry = data.providers.find((p) => p.id === id)!
      expect(endpointTypes(entry), id).toContain("speech")
      expect(servedBy(entry).speech?.synthesize, id).toBeTypeOf("function")
    }
  })

  it("refuse by name a format the vendor cannot produce, and a Deepgram voice that is no Aura model", () => {
    expect(refusal("elevenlabs", { format: "aac" })).toBe("ElevenLabs cannot produce format aac; use one of mp3, wav, opus, pcm")
    expect(refusal("elevenlabs", { format: "flac" })).toMatch(/^ElevenLabs cannot produce format flac/)
    expect(refusal("cartesia", { format: "opus" })).toBe("Cartesia cannot produce format opus; use one of mp3, wav, pcm")
    expect(refusal("lmnt", { format: "flac" })).toBe("LMNT cannot produce format flac; use one of mp3, wav, aac, pcm")
    expect(refusal("deepgram", { voice: "alloy" })).toBe("Deepgram's voice is an Aura model such as aura-2-thalia-en; alloy is not one")
    for (const id of VENDORS) expect(refusal(id, {}), id).toBeUndefined()
    for (const format of ["mp3", "wav", "opus", "aac", "flac", "pcm"] as const) expect(refusal("deepgram", { format })).toBeUndefined()
  })
})

/** One mock per vendor, closed after the file; requests cleared after each test. */
const mocks: Partial<Record<SpeechVendor, SpeechVendorMock>> = {}
beforeAll(async () => {
  for (const v of VENDORS) mocks[v] = await startSpeechVendorMock(v, KEY)
})
afterAll(async () => {
  await Promise.all(VENDORS.map((v) => mocks[v]?.close()))
})
afterEach(() => {
  for (const v of VENDORS) mocks[v]!.requests.length = 0
})
const mock = (v: SpeechVendor) => mocks[v]!
const provider = (v: SpeechVendor, key?: string) => providerFor(v, mock(v).url, key)

describe("ElevenLabs", () => {
  it("posts text and model_id to /text-to-speech/{voice} with output_format and xi-api-key; the default voice is George", async () => {
    const got = audio(await run(provider("elevenlabs"), requestFor("elevenlabs")))
    expect(got).toEqual({ text: "elevenlabs|JBFqnCBsd6RMkjVDRZzb|eleven_multilingual_v2|mp3_44100_128|Hello there.", contentType: "audio/mpeg" })
    const sent = mock("elevenlabs").requests[0]!
    expect(sent.path).toBe("/v1/text-to-speech/JBFqnCBsd6RMkjVDRZzb?output_format=mp3_44100_128")
    expect(sent.json).toEqual({ text: "Hello there.", model_id: "eleven_multilingual_v2" })
    expect(sent.headers["xi-api-key"]).toBe(KEY)
    expect(sent.headers.authorization).toBeUndefined()
  })

  it("takes a voice id and maps wav, opus and pcm to its output formats (raw PCM typed audio/pcm)", async () => {
    expect(audio(await run(provider("elevenlabs"), requestFor("elevenlabs", { voice: "21m00Tcm4TlvDq8ikWAM", format: "wav" }))).text).toBe(
      "elevenlabs|21m00Tcm4TlvDq8ikWAM|eleven_multilingual_v2|wav_44100|Hello there."
    )
    expect(audio(await run(provider("elevenlabs"), requestFor("elevenlabs", { format: "opus" }))).contentType).toBe("audio/ogg")
    expect(audio(await run(provider("elevenlabs"), requestFor("elevenlabs", { format: "pcm" })))).toEqual({
      text: "elevenlabs|JBFqnCBsd6RMkjVDRZzb|eleven_multilingual_v2|pcm_24000|Hello there.",
      contentType: "audio/pcm"
    })
  })

  it("a wrong key is a 401 carrying ElevenLabs' message", async () => {
    const e = left(await run(provider("elevenlabs", "wrong"), requestFor("elevenlabs")))
    expect([e.kind, e.status, e.retryable]).toEqual(["http", 401, false])
    expect(e.message).toContain("Invalid API key")
  })
})

describe("Cartesia", () => {
  it("posts to /tts/bytes with model_id, transcript, voice by id, the mp3 output format, X-API-Key and Cartesia-Version", async () => {
    const got = audio(await run(provider("cartesia"), requestFor("cartesia")))
    expect(got).toEqual({ text: "cartesia|694f9389-aac1-45b6-b726-9d9369183238|sonic-2|mp3|Hello there.", contentType: "audio/mpeg" })
    const sent = mock("cartesia").requests[0]!
    expect(sent.path).toBe("/tts/bytes")
    expect(sent.json).toEqual({
      model_id: "sonic-2",
      transcript: "Hello there.",
      voice: { mode: "id", id: "694f9389-aac1-45b6-b726-9d9369183238" },
      output_format: { container: "mp3", sample_rate: 44100, bit_rate: 128000 }
    })
    expect(sent.headers["x-api-key"]).toBe(KEY)
    expect(sent.headers["cartesia-version"]).toBe("2025-04-16")
  })

  it("takes a voice id; wav is 16-bit PCM in a WAV container, pcm the raw samples", async () => {
    const voice = "a0e99841-438c-4a64-b679-ae501e7d6091"
    expect(audio(await run(provider("cartesia"), requestFor("cartesia", { voice, format: "wav" })))).toEqual({
      text: `cartesia|${voice}|sonic-2|wav|Hello there.`,
      contentType: "audio/wav"
    })
    expect(mock("cartesia").requests[0]!.json.output_format).toEqual({ container: "wav", encoding: "pcm_s16le", sample_rate: 44100 })
    expect(audio(await run(provider("cartesia"), requestFor("cartesia", { format: "pcm" }))).contentType).toBe("audio/pcm")
    expect(mock("cartesia").requests[1]!.json.output_format).toEqual({ container: "raw", encoding: "pcm_s16le", sample_rate: 24000 })
  })

  it("an error answer is an UpstreamError with Cartesia's message; a server error is retryable", async () => {
    mock("cartesia").failNext(500, "synthesis failed")
    const e = left(await run(provider("cartesia"), requestFor("cartesia")))
    expect([e.status, e.retryable]).toEqual([500, true])
    expect(e.message).toContain("synthesis failed")
  })
})

describe("LMNT", () => {
  it("posts voice, text, model and format to /ai/speech/bytes with X-API-Key; the default voice is leah", async () => {
    const got = audio(await run(provider("lmnt"), requestFor("lmnt")))
    expect(got).toEqual({ text: "lmnt|leah|blizzard|mp3|Hello there.", contentType: "audio/mpeg" })
    const sent = mock("lmnt").requests[0]!
    expect(sent.path).toBe("/v1/ai/speech/bytes")
    expect(sent.json).toEqual({ voice: "leah", text: "Hello there.", model: "blizzard", format: "mp3" })
    expect(sent.headers["x-api-key"]).toBe(KEY)
  })

  it("takes a voice id; aac stays aac, pcm is LMNT's raw", async () => {
    expect(audio(await run(provider("lmnt"), requestFor("lmnt", { voice: "lily", format: "aac" })))).toEqual({ text: "lmnt|lily|blizzard|aac|Hello there.", contentType: "audio/aac" })
    expect(audio(await run(provider("lmnt"), requestFor("lmnt", { format: "pcm" })))).toEqual({ text: "lmnt|leah|blizzard|raw|Hello there.", contentType: "audio/pcm" })
  })

  it("a wrong key is a 401 carrying LMNT's message", async () => {
    const e = left(await run(provider("lmnt", "wrong"), requestFor("lmnt")))
    expect(e.status).toBe(401)
    expect(e.message).toContain("Invalid API key")
  })
})

describe("Deepgram", () => {
  it("posts text to /speak with the Aura model and encoding in the query and Authorization: Token", async () => {
    const got = audio(await run(provider("deepgram"), requestFor("deepgram")))
    expect(got).toEqual({ text: "deepgram|aura-2-thalia-en|aura-2-thalia-en|mp3|Hello there.", contentType: "audio/mpeg" })
    const sent = mock("deepgram").requests[0]!
    expect(sent.path).toBe("/v1/speak?model=aura-2-thalia-en&encoding=mp3")
    expect(sent.json).toEqual({ text: "Hello there." })
    expect(sent.headers.authorization).toBe(`Token ${KEY}`)
  })

  it("the voice names the Aura model; wav and pcm are linear16 in a WAV container or none", async () => {
    expect(audio(await run(provider("deepgram"), requestFor("deepgram", { voice: "aura-2-orion-en", format: "wav" })))).toEqual({
      text: "deepgram|aura-2-orion-en|aura-2-orion-en|wav|Hello there.",
      contentType: "audio/wav"
    })
    expect(mock("deepgram").requests[0]!.path).toBe("/v1/speak?model=aura-2-orion-en&encoding=linear16&container=wav")
    expect(audio(await run(provider("deepgram"), requestFor("deepgram", { format: "pcm" }))).contentType).toBe("audio/pcm")
    expect(mock("deepgram").requests[1]!.path).toBe("/v1/speak?model=aura-2-thalia-en&encoding=linear16&container=none")
    expect(audio(await run(provider("deepgram"), requestFor("deepgram", { format: "flac" }))).contentType).toBe("audio/flac")
  })

  it("a wrong key is a 401 with Deepgram's err_msg", async () => {
    const e = left(await run(provider("deepgram", "wrong"), requestFor("deepgram")))
    expect(e.status).toBe(401)
    expect(e.message).toContain("Invalid credentials.")
  })
})

describe("hostile answers", () => {
  it.each(VENDORS)("%s: a JSON body or an empty body with 200 is a protocol error, never audio", async (v) => {
    mock(v).rawNext("application/json", '{"error":"quota"}')
    const json = left(await run(provider(v), requestFor(v)))
    expect([json.kind, json.retryable]).toEqual(["protocol", false])
    expect(json.message).toContain("application/json instead of audio")
    mock(v).rawNext("audio/mpeg", "")
    expect(left(await run(provider(v), requestFor(v))).message).toContain("no audio in the answer")
  })
})

describe("OpenAI-format speech", () => {
  it("sends alloy when no voice is given, and the voice given otherwise", async () => {
    const openai = await startOpenAiMock({ apiKey: KEY })
    try {
      const p = providerFor("openai", openai.url)
      const run = (voice?: string) => Effect.runPromise(synthesize(p, { model: "gpt-4o-mini-tts", text: "hi", voice, format: "mp3" }))
      expect(Buffer.from((await run()).bytes).toString("latin1")).toContain("alloy:hi")
      expect(Buffer.from((await run("nova")).bytes).toString("latin1")).toContain("nova:hi")
    } finally {
      await openai.close()
    }
  })

  it("an answer that is no audio (an HTML page, a JSON error, nothing) with 200 is a protocol error, as from the vendors", async () => {
    // It was relayed as it came, its content type too: a page served from the gateway's own origin.
    const page = "<html><script>alert(document.cookie)</script></html>"
    for (const [contentType, body, problem] of [["text/html", page, "text/html instead of audio"], ["application/json", '{"error":"x"}', "application/json instead of audio"], ["audio/mpeg", "", "no audio in the answer"]]) {
      const upstream = http.createServer((_req, res) => void res.writeHead(200, { "content-type": contentType! }).end(body))
      await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve))
      try {
        const p = providerFor("openai", `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`)
        const failed = left(await Effect.runPromise(Effect.either(speak(synthesize, p, { model: "gpt-4o-mini-tts", text: "hi", format: "mp3" }))))
        expect([failed.kind, failed.message]).toEqual(["protocol", `openai sent an unexpected answer: ${problem}`])
      } finally {
        upstream.close()
      }
    }
  })

  it("a JSON error body or a page labelled audio is a protocol error too (it was relayed as the audio); raw PCM is not judged by its first byte", async () => {
    for (const [format, body, ok] of [["mp3", '  {"error":"quota"}', false], ["mp3", "<svg onload=alert(1)>", false], ["wav", "[1,2]", false], ["pcm", "{raw samples", true]] as const) {
      const upstream = http.createServer((_req, res) => void res.writeHead(200, { "content-type": "audio/mpeg" }).end(body))
      await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve))
      try {
        const p = providerFor("openai", `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`)
        const result = await Effect.runPromise(Effect.either(speak(synthesize, p, { model: "gpt-4o-mini-tts", text: "hi", format })))
        if (ok) expect(audio(result).text).toBe(body)
        else expect(left(result).message).toBe("openai sent an unexpected answer: JSON or markup labelled audio/mpeg, not audio")
      } finally {
        upstream.close()
      }
    }
  })

  it("audio of a content type that is no audio type is sent as the format's", async () => {
    const upstream = http.createServer((_req, res) => void res.writeHead(200, { "content-type": "image/svg+xml" }).end("ID3 bytes"))
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve))
    try {
      const p = providerFor("openai", `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`)
      expect(audio(await Effect.runPromise(Effect.either(speak(synthesize, p, { model: "gpt-4o-mini-tts", text: "hi", format: "wav" }))))).toEqual({ text: "ID3 bytes", contentType: "audio/wav" })
    } finally {
      upstream.close()
    }
  })
})
