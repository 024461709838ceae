/**
 * POST /v1/audio/transcriptions through speech-to-text vendors end to end: Deepgram (synchronous:
 * the raw audio bytes, Token auth, language detection) and AssemblyAI (asynchronous: upload,
 * submit, polls) configured against mocks of their APIs; a failed job is a 502 with the vendor's
 * reason, a plan below the vendor's a 403 before any call.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTranscriptionVendorMock, type TranscriptionVendorMock } from "../../../packages/core/test/support/mockTranscriptionVendors.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const AUDIO = "ID3-fake-mp3 good morning"

describe("transcription vendors", () => {
  let deepgram: TranscriptionVendorMock
  let assemblyai: TranscriptionVendorMock
  let speechmatics: TranscriptionVendorMock
  let server: RunningServer
  let free: TestAvatar
  let silver: TestAvatar

  const transcribe = async (user: TestAvatar, fields: Record<string, string>) => {
    const form = new FormData()
    form.append("file", new File([AUDIO], "morning.mp3", { type: "audio/mpeg" }))
    for (const [name, value] of Object.entries(fields)) form.append(name, value)
    const res = await fetch(`${server.url}/v1/audio/transcriptions`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: form })
    return { status: res.status, body: await res.json() }
  }

  beforeAll(async () => {
    deepgram = await startTranscriptionVendorMock("deepgram", "dg-e2e")
    assemblyai = await startTranscriptionVendorMock("assemblyai", "aai-e2e")
    speechmatics = await startTranscriptionVendorMock("speechmatics", "sm-e2e")
    server = await startServer({
      ...adminEnv,
      DEEPGRAM_API_KEY: "dg-e2e",
      DEEPGRAM_BASE_URL: deepgram.url,
      ASSEMBLYAI_API_KEY: "aai-e2e",
      ASSEMBLYAI_BASE_URL: assemblyai.url,
      SPEECHMATICS_API_KEY: "sm-e2e",
      SPEECHMATICS_BASE_URL: speechmatics.url,
      AIGW_JOB_POLL_MS: "20"
    })
    free = await signUp(server, "sttfree")
    silver = await signUp(server, "sttsilver")
    const plan = await call(server.url, "PUT", `/v1/admin/avatars/${silver.id}/plan`, { token: await adminToken(server), body: { plan: "Silver" } })
    expect(plan.status).toBe(200)
  })
  afterAll(async () => {
    await server?.stop()
    await Promise.all([deepgram?.close(), assemblyai?.close(), speechmatics?.close()])
  })

  it("transcribes through Deepgram: the raw bytes with their type, Token auth; the detected language back", async () => {
    const res = await transcribe(silver, { provider: "deepgram" })
    expect(res.status).toBe(200)
    expect(res.body.result).toEqual({ text: `heard ${AUDIO}`, language: "en", provider: "deepgram", model: "nova-3" })
    const req = deepgram.requests.at(-1)!
    expect(req.url).toBe("/v1/listen?model=nova-3&detect_language=true")
    expect(req.headers.authorization).toBe("Token dg-e2e")
    expect(req.headers["content-type"]).toBe("audio/mpeg")
    expect(req.body.toString("utf8")).toBe(AUDIO)

    const german = await transcribe(silver, { provider: "deepgram", language: "de" })
    expect(german.body.result).toMatchObject({ language: "de" })
    expect(deepgram.requests.at(-1)!.url).toBe("/v1/listen?model=nova-3&language=de")
  })

  it("transcribes through AssemblyAI's jobs: upload, submit, polls; a failed job is a 502 with AssemblyAI's reason", async () => {
    assemblyai.setJob({ pendingPolls: 2 })
    const res = await transcribe(silver, { provider: "assemblyai", language: "fr" })
    expect(res.status).toBe(200)
    expect(res.body.result).toEqual({ text: `heard ${AUDIO}`, language: "fr", provider: "assemblyai", model: "universal-3-pro" })
    expect(assemblyai.requests.map((r) => `${r.method} ${r.url.replace(/\/[0-9a-f-]{36}$/, "/{id}")}`)).toEqual([
      "POST /v2/upload",
      "POST /v2/transcript",
      ...Array(3).fill("GET /v2/transcript/{id}")
    ])
    expect(assemblyai.requests.every((r) => r.headers.authorization === "aai-e2e")).toBe(true)

    assemblyai.setJob({ failWith: "File does not appear to contain audio" })
    const failed = await transcribe(silver, { provider: "assemblyai" })
    expect(failed.status).toBe(502)
    expect(failed.body.message).toContain("File does not appear to contain audio")
  })

  it("refuses a plan below the vendor's before calling it", async () => {
    const res = await transcribe(free, { provider: "speechmatics" })
    expect(res.status).toBe(403)
    expect(speechmatics.requests.length).toBe(0)
  })
})
