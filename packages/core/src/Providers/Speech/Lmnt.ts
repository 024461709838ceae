/**
 * LMNT text to speech (the catalogue's base URL ends in `/v1`).
 *
 * Wire format (https://docs.lmnt.com/api-reference/speech/synthesize-speech-bytes):
 *  - `POST {endpoint}/ai/speech/bytes`, JSON `{voice, text, model, format: aac | mp3 | mulaw | raw
 *    | wav}`, answers the audio bytes (`raw` is 16-bit PCM).
 *  - the voice is an LMNT voice id (`leah`, `lily`, ... or a cloned voice's id); without one,
 *    `leah` (the voice of its documented examples).
 *  - auth: `X-API-Key: <key>` (the catalogue's `x-api-key` style); errors are `{error: <message>}`.
 */
import { authHeaders, postForBytes } from "../internal/http.ts"
import type { SpeechEndpoint, SpeechFormat } from "../Served.ts"
import { formatRefusal } from "./SpeechVendor.ts"

export const DEFAULT_VOICE = "leah"

/** LMNT's `format` for each format it can produce. */
const FORMATS: Partial<Record<SpeechFormat, string>> = { mp3: "mp3", wav: "wav", aac: "aac", pcm: "raw" }

export const speech: SpeechEndpoint = {
  defaultModel: "blizzard",
  unsupported: (request) => formatRefusal("LMNT", request, Object.keys(FORMATS) as Array<SpeechFormat>),
  synthesize: (provider, request) =>
    postForBytes(provider.id, `${provider.endpoint}/ai/speech/bytes`, authHeaders(provider), {
      voice: request.voice ?? DEFAULT_VOICE,
      text: request.text,
      model: request.model,
      format: FORMATS[request.format] ?? "mp3"
    })
}
