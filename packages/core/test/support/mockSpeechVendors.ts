/**
 * Local mocks of the text-to-speech vendors, each speaking its documented wire format on
 * 127.0.0.1:0 (references in the adapters: src/Providers/Speech/*.ts). The "audio" is text a test
 * can check, `<vendor>|<voice>|<model>|<format>|<text>`, with the content type the vendor sends for
 * that format (raw PCM: application/octet-stream). A wrong key is a 401 in the vendor's error shape;
 * a body missing a required field is a 400.
 *  - elevenlabs: POST /v1/text-to-speech/{voice_id}?output_format=<codec_rate[_bitrate]> {text, model_id};
 *    `xi-api-key`; errors {detail: {status, message}}.
 *  - cartesia: POST /tts/bytes {model_id, transcript, voice: {mode: "id", id}, output_format: {container,
 *    encoding?, sample_rate, bit_rate?}}; `X-API-Key` and `Cartesia-Version`; errors {error}.
 *  - lmnt: POST /v1/ai/speech/bytes {voice, text, model?, format}; `X-API-Key`; errors {error}.
 *  - deepgram: POST /v1/speak?model=<aura model>&encoding=...[&container=...] {text};
 *    `Authorization: Token <key>`; errors {err_code, err_msg, request_id}.
 */
import { randomUUID } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { buffer } from "node:stream/consumers"
import { listenLocal, sendJson } from "./localServer.ts"

export type SpeechVendor = "elevenlabs" | "cartesia" | "lmnt" | "deepgram"

export interface RecordedSpeechRequest {
  readonly method: string
  /** The path with its query. */
  readonly path: string
  readonly headers: IncomingMessage["headers"]
  readonly json: any
}

export interface SpeechVendorMock {
  /** The base URL, as `<ID>_BASE_URL` takes it. */
  readonly url: string
  readonly requests: Array<RecordedSpeechRequest>
  /** The next answer is this HTTP error, in the vendor's error shape. */
  failNext(status: number, message: string): void
  /** The next answer is this raw body with status 200 (hostile replies). */
  rawNext(contentType: string, body: string): void
  close(): Promise<void>
}

const prefixes: Record<SpeechVendor, string> = { elevenlabs: "/v1", cartesia: "", lmnt: "/v1", deepgram: "/v1" }

/** Each vendor's error body. */
const errorBody = (vendor: SpeechVendor, status: number, message: string): unknown => {
  switch (vendor) {
    case "elevenlabs":
      return { detail: { status: status === 401 ? "invalid_api_key" : "invalid_request", message } }
    case "deepgram":
      return { err_code: status === 401 ? "INVALID_AUTH" : "Bad Request", err_msg: message, request_id: randomUUID() }
    default:
      return { error: message }
  }
}

/** The content type a vendor sends for a format name of its own. */
const contentTypeOf = (format: string): string =>
  format.startsWith("mp3") ? "audio/mpeg"
  : format.startsWith("wav") ? "audio/wav"
  : format.startsWith("opus") ? "audio/ogg"
  : format.startsWith("aac") ? "audio/aac"
  : format.startsWith("flac") ? "audio/flac"
  : "application/octet-stream"

type Synthesis = { readonly voice: string; readonly model: string; readonly format: string; readonly text: string }
type Outcome = { readonly synthesis: Synthesis } | { readonly status: number; readonly message: string }

const str = (v: unknown): v is string => typeof v === "string" && v.length > 0
const missing = (field: string): Outcome => ({ status: 400, message: `${field} is required` })

/** Checks a request the way the vendor does; answers what it would synthesise, or its error. */
const handle = (vendor: SpeechVendor, key: string, url: URL, headers: IncomingMessage["headers"], b: any): Outcome => {
  const path = url.pathname
  const q = url.searchParams
  switch (vendor) {
    case "elevenlabs": {
      if (headers["xi-api-key"] !== key) return { status: 401, message: "Invalid API key" }
      const m = /^\/v1\/text-to-speech\/([^/]+)$/.exec(path)
      if (!m) return { status: 404, message: `no route ${path}` }
      if (!str(b?.text)) return missing("text")
      return { synthesis: { voice: decodeURIComponent(m[1]!), model: b.model_id ?? "eleven_multilingual_v2", format: q.get("output_format") ?? "mp3_44100_128", text: b.text } }
    }
    case "cartesia": {
      if (headers["x-api-key"] !== key) return { status: 401, message: "Invalid API key" }
      if (!str(headers["cartesia-version"])) return { status: 400, message: "Cartesia-Version header is required" }
      if (path !== "/tts/bytes") return { status: 404, message: `no route ${path}` }
      if (!str(b?.model_id)) return missing("model_id")
      if (!str(b?.transcript)) return missing("transcript")
      if (b?.voice?.mode !== "id" || !str(b?.voice?.id)) return missing("voice.id")
      if (!str(b?.output_format?.container)) return missing("output_format.container")
      return { synthesis: { voice: b.voice.id, model: b.model_id, format: b.output_format.container, text: b.transcript } }
    }
    case "lmnt": {
      if (headers["x-api-key"] !== key) return { status: 401, message: "Invalid API key" }
      if (path !== "/v1/ai/speech/bytes") return { status: 404, message: `no route ${path}` }
      if (!str(b?.voice)) return missing("voice")
      if (!str(b?.text)) return missing("text")
      return { synthesis: { voice: b.voice, model: b.model ?? "blizzard", format: b.format ?? "mp3", text: b.text } }
    }
    case "deepgram": {
      if (headers.authorization !== `Token ${key}`) return { status: 401, message: "Invalid credentials." }
      if (path !== "/v1/speak") return { status: 404, message: `no route ${path}` }
      if (!str(b?.text)) return missing("text")
      const encoding = q.get("encoding") ?? "mp3"
      const format = encoding === "linear16" ? (q.get("container") === "none" ? "linear16" : "wav") : encoding
      const model = q.get("model") ?? "aura-asteria-en"
      return { synthesis: { voice: model, model, format, text: b.text } }
    }
  }
}

export const startSpeechVendorMock = async (vendor: SpeechVendor, key: string): Promise<SpeechVendorMock> => {
  const requests: Array<RecordedSpeechRequest> = []
  const pending: Array<(res: ServerResponse) => void> = []
  const server = createServer((req, res) => {
    void buffer(req).then((raw) => {
      let json: any
      try {
        json = raw.length > 0 ? JSON.parse(raw.toString("utf8")) : undefined
      } catch {
        json = undefined
      }
      requests.push({ method: req.method ?? "GET", path: req.url ?? "/", headers: req.headers, json })
      const next = pending.shift()
      if (next) return next(res)
      if (req.method !== "POST") return sendJson(res, 405, errorBody(vendor, 405, "method not allowed"))
      const outcome = handle(vendor, key, new URL(req.url ?? "/", "http://mock"), req.headers, json)
      if ("status" in outcome) return sendJson(res, outcome.status, errorBody(vendor, outcome.status, outcome.message))
      const { format, model, text, voice } = outcome.synthesis
      const audio = Buffer.from(`${vendor}|${voice}|${model}|${format}|${text}`)
      res.writeHead(200, { "content-type": contentTypeOf(format), "content-length": audio.length })
      res.end(audio)
    })
  })
  const { close, port } = await listenLocal(server)
  return {
    url: `http://127.0.0.1:${port}${prefixes[vendor]}`,
    requests,
    failNext: (status, message) => pending.push((res) => sendJson(res, status, errorBody(vendor, status, message))),
    rawNext: (contentType, body) =>
      pending.push((res) => {
        res.writeHead(200, { "content-type": contentType })
        res.end(body)
      }),
    close
  }
}
