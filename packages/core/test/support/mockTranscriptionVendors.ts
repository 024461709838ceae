/**
 * Local mocks of the speech-to-text vendors, each speaking its documented wire format on
 * 127.0.0.1:0 (references in the adapters: src/Providers/Transcription/*.ts). The "transcript" is
 * a transform a test can check: `heard <audio bytes as UTF-8>`; the language is the one asked
 * for, else `en` (detected, or the vendor's default). A wrong key is a 401 in the vendor's error shape.
 *  - deepgram: POST /v1/listen?model&language|detect_language, raw audio body → {metadata:
 *    {request_id, duration}, results: {channels: [{alternatives: [{transcript, confidence}],
 *    detected_language?}]}}; errors {err_code, err_msg, request_id}. `Authorization: Token <key>`.
 *  - assemblyai: POST /v2/upload raw body → {upload_url}; POST /v2/transcript {audio_url,
 *    speech_models (a list), language_code | language_detection} → {id, status: queued}; GET
 *    /v2/transcript/{id} → {status queued | processing | completed | error, text, language_code,
 *    error}; errors {error}. `Authorization: <key>` (no scheme).
 *  - speechmatics: POST /v2/jobs multipart data_file + config → {id}; GET /v2/jobs/{id} → {job:
 *    {status running | done | rejected, errors}}; GET /v2/jobs/{id}/transcript?format=txt → text;
 *    errors {code, error, detail}. Bearer.
 *  - rev-ai: POST /speechtotext/v1/jobs multipart media + options → {id, status in_progress}; GET
 *    /speechtotext/v1/jobs/{id} → {status in_progress | transcribed | failed, failure_detail,
 *    language}; GET .../transcript (Accept text/plain) → text; errors {title, detail, status}. Bearer.
 *  - elevenlabs: POST /v1/speech-to-text multipart file + model_id + language_code? →
 *    {language_code, language_probability, text, words}; errors {detail: {status, message}}. `xi-api-key`.
 *  - cartesia: POST /stt multipart file + model + language? (needs Cartesia-Version) → {type,
 *    text, language, duration}; errors {error, message}. `X-API-Key`.
 */
import { randomUUID } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { buffer } from "node:stream/consumers"
import { listenLocal } from "./localServer.ts"
import type { JobBehaviour } from "./mockImageVendors.ts"

export type TranscriptionVendor = "deepgram" | "assemblyai" | "speechmatics" | "rev-ai" | "elevenlabs" | "cartesia"

/** A multipart upload as the mock received it. */
export interface UploadedFile {
  readonly name: string
  readonly type: string
  readonly text: string
}

export interface RecordedRequest {
  readonly method: string
  /** The path with its query. */
  readonly url: string
  readonly headers: IncomingMessage["headers"]
  /** The raw body. */
  readonly body: Buffer
  readonly json?: any
  readonly fields?: Readonly<Record<string, string>>
  readonly files?: Readonly<Record<string, UploadedFile>>
}

export interface TranscriptionVendorMock {
  /** The base URL, as `<ID>_BASE_URL` takes it (the catalogue's path on the mock). */
  readonly url: string
  readonly requests: Array<RecordedRequest>
  /** The next answer is this HTTP error, in the vendor's error shape. */
  failNext(status: number, message: string): void
  /** The next answer is this raw body with status 200 (hostile replies). */
  rawNext(body: string): void
  /** The next transcript asked for (Speechmatics, Rev AI) is this body of this type, with status 200. */
  transcriptNext(contentType: string, body: string): void
  /** How the next asynchronous jobs run. */
  setJob(behaviour: JobBehaviour): void
  close(): Promise<void>
}

const prefixes: Record<TranscriptionVendor, string> = {
  deepgram: "/v1",
  assemblyai: "/v2",
  speechmatics: "/v2",
  "rev-ai": "/speechtotext/v1",
  elevenlabs: "/v1",
  cartesia: ""
}

/** The vendor's credential header and its expected value. */
const credential = (vendor: TranscriptionVendor, key: string): readonly [string, string] => {
  switch (vendor) {
    case "deepgram":
      return ["authorization", `Token ${key}`]
    case "assemblyai":
      return ["authorization", key]
    case "elevenlabs":
      return ["xi-api-key", key]
    case "cartesia":
      return ["x-api-key", key]
    default:
      return ["authorization", `Bearer ${key}`]
  }
}

const errorBody = (vendor: TranscriptionVendor, status: number, message: string): unknown => {
  switch (vendor) {
    case "deepgram":
      return { err_code: status === 401 ? "INVALID_AUTH" : "Bad Request", err_msg: message, request_id: randomUUID() }
    case "assemblyai":
      return { error: message }
    case "speechmatics":
      return { code: status, error: status === 401 ? "Permission Denied" : "Bad Request", detail: message }
    case "rev-ai":
      return { title: status === 401 ? "Authorization has been denied for this request" : "Your request parameters didn't validate", detail: message, status }
    case "elevenlabs":
      return { detail: { status: status === 401 ? "invalid_api_key" : "invalid_request", message } }
    case "cartesia":
      return { error: status === 401 ? "unauthorized" : "bad_request", message }
  }
}

const heard = (audio: string) => `heard ${audio}`

interface Job {
  readonly audio: string
  readonly language: string
  readonly behaviour: JobBehaviour
  polls: number
}

export const startTranscriptionVendorMock = async (vendor: TranscriptionVendor, apiKey: string): Promise<TranscriptionVendorMock> => {
  const requests: Array<RecordedRequest> = []
  const jobs = new Map<string, Job>()
  const uploads = new Map<string, string>()
  let nextFailure: { status: number; message: string } | undefined
  let nextRaw: string | undefined
  let nextTranscript: { readonly contentType: string; readonly body: string } | undefined
  let behaviour: JobBehaviour = {}
  const [authName, authValue] = credential(vendor, apiKey)
  let base = ""

  const poll = (job: Job): "running" | "done" | "failed" => {
    job.polls++
    if (job.behaviour.never || job.polls <= (job.behaviour.pendingPolls ?? 0)) return "running"
    return job.behaviour.failWith !== undefined ? "failed" : "done"
  }
  const newJob = (audio: string, language: string) => {
    const id = randomUUID()
    jobs.set(id, { audio, language, behaviour, polls: 0 })
    return id
  }

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const body = await buffer(req)
    const url = new URL(req.url ?? "/", "http://mock")
    const contentType = req.headers["content-type"] ?? ""
    const fields: Record<string, string> = {}
    const files: Record<string, UploadedFile> = {}
    const multipart = contentType.startsWith("multipart/form-data")
    if (multipart) {
      const form = await new Request("http://mock/", { method: "POST", headers: { "content-type": contentType }, body: new Uint8Array(body) }).formData()
      for (const [name, value] of form.entries()) {
        if (typeof value === "string") fields[name] = value
        else files[name] = { name: value.name, type: value.type, text: await value.text() }
      }
    }
    const json = contentType.startsWith("application/json") ? (() => {
      try {
        return JSON.parse(body.toString("utf8"))
      } catch {
        return undefined
      }
    })() : undefined
    requests.push({ method: req.method ?? "", url: req.url ?? "/", headers: req.headers, body, ...(json !== undefined ? { json } : {}), ...(multipart ? { fields, files } : {}) })
    const send = (status: number, answer: unknown) => {
      res.writeHead(status, { "content-type": "application/json" })
      res.end(JSON.stringify(answer))
    }
    const sendText = (text: string) => {
      res.writeHead(200, { "content-type": "text/plain" })
      res.end(text)
    }
    const fail = (status: number, message: string) => send(status, errorBody(vendor, status, message))

    if (req.headers[authName] !== authValue) return fail(401, "invalid credentials")
    if (nextFailure) {
      const { message, status } = nextFailure
      nextFailure = undefined
      return fail(status, message)
    }
    if (nextRaw !== undefined) {
      const raw = nextRaw
      nextRaw = undefined
      res.writeHead(200, { "content-type": "application/json" })
      return res.end(raw)
    }
    const prefix = prefixes[vendor]
    if (!url.pathname.startsWith(prefix)) return fail(404, `no route ${url.pathname}`)
    const route = url.pathname.slice(prefix.length)
    const post = req.method === "POST"

    switch (vendor) {
      case "deepgram": {
        if (!post || route !== "/listen") return fail(404, `no route ${url.pathname}`)
        if (!url.searchParams.get("model")) return fail(400, "model is required")
        if (body.length === 0 || contentType.startsWith("application/json") || multipart) return fail(400, "the body must be the raw audio")
        const detect = url.searchParams.get("detect_language") === "true"
        return send(200, {
          metadata: { request_id: randomUUID(), duration: body.length / 1000, channels: 1 },
          results: { channels: [{ alternatives: [{ transcript: heard(body.toString("utf8")), confidence: 0.98 }], ...(detect ? { detected_language: "en" } : {}) }] }
        })
      }
      case "assemblyai": {
        if (post && route === "/upload") {
          if (contentType !== "application/octet-stream" || body.length === 0) return fail(400, "upload the raw bytes as application/octet-stream")
          const id = randomUUID()
          uploads.set(id, body.toString("utf8"))
          return send(200, { upload_url: `${base}/uploads/${id}` })
        }
        if (post && route === "/transcript") {
          const audio = typeof json?.audio_url === "string" ? uploads.get(json.audio_url.split("/").pop()) : undefined
          if (audio === undefined) return fail(400, "audio_url is not an upload of this account")
          if (!Array.isArray(json.speech_models) || json.speech_models.length === 0) return fail(400, "speech_models must list at least one model")
          const id = newJob(audio, json.language_code ?? "en")
          return send(200, { id, status: "queued", audio_url: json.audio_url })
        }
        const get = /^\/transcript\/([^/]+)$/.exec(route)
        if (req.method === "GET" && get) {
          const job = jobs.get(get[1]!)
          if (!job) return fail(404, "Transcript not found")
          const state = poll(job)
          if (state === "running") return send(200, { id: get[1], status: job.polls === 1 ? "queued" : "processing", text: null })
          if (state === "failed") return send(200, { id: get[1], status: "error", error: job.behaviour.failWith, text: null })
          return send(200, { id: get[1], status: "completed", text: heard(job.audio), language_code: job.language, audio_duration: 1 })
        }
        return fail(404, `no route ${url.pathname}`)
      }
      case "speechmatics":
      case "rev-ai": {
        const sm = vendor === "speechmatics"
        if (post && route === "/jobs") {
          const file = files[sm ? "data_file" : "media"]
          const config = (() => {
            try {
              return JSON.parse(fields[sm ? "config" : "options"] ?? "")
            } catch {
              return undefined
            }
          })()
          if (!file || config === undefined) return fail(400, sm ? "data_file and config are required" : "media and options are required")
          if (sm && (config.type !== "transcription" || typeof config.transcription_config?.language !== "string")) return fail(400, "config.transcription_config.language is required")
          const language = sm ? (config.transcription_config.language === "auto" ? "en" : config.transcription_config.language) : config.language ?? "en"
          const id = newJob(file.text, language)
          return send(201, sm ? { id } : { id, status: "in_progress", created_on: new Date().toISOString() })
        }
        const status = /^\/jobs\/([^/]+)$/.exec(route)
        const transcript = /^\/jobs\/([^/]+)\/transcript$/.exec(route)
        const job = jobs.get((status ?? transcript)?.[1] ?? "")
        if (req.method !== "GET" || !(status || transcript)) return fail(404, `no route ${url.pathname}`)
        if (!job) return fail(404, "job not found")
        if (transcript) {
          if (job.polls === 0 || job.behaviour.never || job.behaviour.failWith !== undefined) return fail(404, "the transcript is not ready")
          if (sm && url.searchParams.get("format") !== "txt") return fail(400, "this mock answers format=txt only")
          if (!sm && req.headers.accept !== "text/plain") return fail(406, "this mock answers Accept: text/plain only")
          if (nextTranscript !== undefined) {
            const { body, contentType } = nextTranscript
            nextTranscript = undefined
            res.writeHead(200, { "content-type": contentType })
            return res.end(body)
          }
          return sendText(`${heard(job.audio)}\n`)
        }
        const state = poll(job)
        if (sm) {
          const s = state === "failed" ? "rejected" : state === "done" ? "done" : "running"
          return send(200, { job: { id: status![1], status: s, ...(state === "failed" ? { errors: [{ timestamp: "2026-01-01T00:00:00Z", message: job.behaviour.failWith }] } : {}) } })
        }
        const s = state === "failed" ? "failed" : state === "done" ? "transcribed" : "in_progress"
        return send(200, { id: status![1], status: s, language: job.language, ...(state === "failed" ? { failure: "internal_processing", failure_detail: job.behaviour.failWith } : {}) })
      }
      case "elevenlabs": {
        if (!post || route !== "/speech-to-text") return fail(404, `no route ${url.pathname}`)
        if (!files.file || !fields.model_id) return fail(422, "file and model_id are required")
        return send(200, { language_code: fields.language_code ?? "en", language_probability: 0.99, text: heard(files.file.text), words: [] })
      }
      case "cartesia": {
        if (!post || route !== "/stt") return fail(404, `no route ${url.pathname}`)
        if (!req.headers["cartesia-version"]) return fail(400, "Cartesia-Version header is required")
        if (!files.file || fields.model !== "ink-whisper") return fail(400, "file and model ink-whisper are required")
        return send(200, { type: "transcript", text: heard(files.file.text), language: fields.language ?? "en", duration: 1, request_id: randomUUID(), is_final: true })
      }
    }
  }

  const server = createServer((req, res) => void handle(req, res))
  const { close, port } = await listenLocal(server)
  base = `http://127.0.0.1:${port}`
  return {
    url: `${base}${prefixes[vendor]}`,
    requests,
    failNext: (status, message) => (nextFailure = { status, message }),
    rawNext: (body) => (nextRaw = body),
    transcriptNext: (contentType, body) => (nextTranscript = { contentType, body }),
    setJob: (b) => (behaviour = b),
    close
  }
}
