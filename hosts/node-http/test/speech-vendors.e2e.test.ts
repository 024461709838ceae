/**
 * POST /v1/audio/speech through a speech vendor end to end: ElevenLabs configured against a mock
 * of its API (its `xi-api-key` header, the voice in the path, `output_format` in the query), the
 * audio bytes and content type back with the provider and model headers; what the vendor cannot
 * honour refused by name (400) before any call, its errors as 502s, a plan below its own (403).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type SpeechVendorMock, startSpeechVendorMock } from "../../../packages/core/test/support/mockSpeechVendors.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

describe("speech vendors", () => {
  let elevenlabs: SpeechVendorMock
  let server: RunningServer
  let free: TestAvatar
  let silver: TestAvatar

  const speak = (user: TestAvatar, body: unknown) =>
    fetch(`${server.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": user.apiKey }, body: JSON.stringify(body) })

  beforeAll(async () => {
    elevenlabs = await startSpeechVendorMock("elevenlabs", "xi-e2e")
    server = await startServer({ ...adminEnv, ELEVENLABS_API_KEY: "xi-e2e", ELEVENLABS_BASE_URL: elevenlabs.url })
    free = await signUp(server, "ttsfree")
    silver = await signUp(server, "ttssilver")
    const plan = await call(server.url, "PUT", `/v1/admin/avatars/${silver.id}/plan`, { token: await adminToken(server), body: { plan: "Silver" } })
    expect(plan.status).toBe(200)
  })
  afterAll(async () => {
    await server?.stop()
    await elevenlabs?.close()
  })

  it("synthesises through ElevenLabs with its default voice: the audio bytes, content type and provider headers back", async () => {
    const res = await speak(silver, { provider: "elevenlabs", text: "Good evening." })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toBe("audio/mpeg")
    expect([res.headers.get("x-aigw-provider"), res.headers.get("x-aigw-model")]).toEqual(["elevenlabs", "eleven_multilingual_v2"])
    expect(Buffer.from(await res.arrayBuffer()).toString("utf8")).toBe("elevenlabs|JBFqnCBsd6RMkjVDRZzb|eleven_multilingual_v2|mp3_44100_128|Good evening.")
    const sent = elevenlabs.requests.at(-1)!
    expect(sent.path).toBe("/v1/text-to-speech/JBFqnCBsd6RMkjVDRZzb?output_format=mp3_44100_128")
    expect(sent.headers["xi-api-key"]).toBe("xi-e2e")
    expect(sent.json).toEqual({ text: "Good evening.", model_id: "eleven_multilingual_v2" })
  })

  it("takes an ElevenLabs voice id and a format it has", async () => {
    const res = await speak(silver, { provider: "elevenlabs", text: "Hi.", voice: "21m00Tcm4TlvDq8ikWAM", format: "wav" })
    expect([res.status, res.headers.get("content-type")]).toEqual([200, "audio/wav"])
    expect(Buffer.from(await res.arrayBuffer()).toString("utf8")).toBe("elevenlabs|21m00Tcm4TlvDq8ikWAM|eleven_multilingual_v2|wav_44100|Hi.")
  })

  it("refuses a format ElevenLabs lacks by name before calling it, and a plan below the vendor's", async () => {
    const before = elevenlabs.requests.length
    const res = await speak(silver, { provider: "elevenlabs", text: "Hi.", format: "flac" })
    expect(res.status).toBe(400)
    expect((await res.json()).message).toBe("ElevenLabs cannot produce format flac; use one of mp3, wav, opus, pcm")
    expect(elevenlabs.requests.length).toBe(before)
    expect((await speak(free, { provider: "elevenlabs", text: "Hi." })).status).toBe(403)
    expect(elevenlabs.requests.length).toBe(before)
  })

  it("an ElevenLabs error is a 502 envelope carrying its message", async () => {
    elevenlabs.failNext(401, "Invalid API key")
    const res = await speak(silver, { provider: "elevenlabs", text: "Hi." })
    expect(res.status).toBe(502)
    expect((await res.json()).message).toContain("Invalid API key")
  })
})
