/**
 * Cartesia text to speech (the catalogue's base URL is `https://api.cartesia.ai`).
 *
 * Wire format (https://docs.cartesia.ai/api-reference/tts/bytes):
 *  - `POST {endpoint}/tts/bytes`, JSON `{model_id (sonic-2, sonic-3, ...), transcript, voice: {mode:
 *    "id", id}, output_format: {container: mp3 | wav | raw, encoding (wav, raw), sample_rate,
 *    bit_rate (mp3)}}`, answers the audio bytes.
 *  - the voice is a Cartesia voice id (a UUID from its voice library); without one,
 *    `694f9389-aac1-45b6-b726-9d9369183238` (the voice of its documented examples).
 *  - auth: `X-API-Key: <key>` (the catalogue's `x-api-key` style) and the required
 *    `Cartesia-Version` header; errors are `{error: <message>}` or plain text.
 */
import { authHeaders, postForBytes } from "../internal/http.ts"
import type { SpeechEndpoint, SpeechFormat } from "../Served.ts"
import { formatRefusal } from "./SpeechVendor.ts"

export const DEFAULT_VOICE = "694f9389-aac1-45b6-b726-9d9369183238"

/** The API version this client is written against. */
export const CARTESIA_VERSION = "2025-04-16"

/** Cartesia's `output_format` for each format it can produce (pcm: raw 16-bit little-endian). */
const OUTPUT_FORMATS: Partial<Record<SpeechFormat, Record<string, string | number>>> = {
  mp3: { container: "mp3", sample_rate: 44100, bit_rate: 128000 },
  wav: { container: "wav", encoding: "pcm_s16le", sample_rate: 44100 },
  pcm: { container: "raw", encoding: "pcm_s16le", sample_rate: 24000 }
}

export const speech: SpeechEndpoint = {
  defaultModel: "sonic-2",
  unsupported: (request) => formatRefusal("Cartesia", request, Object.keys(OUTPUT_FORMATS) as Array<SpeechFormat>),
  synthesize: (provider, request) =>
    postForBytes(provider.id, `${provider.endpoint}/tts/bytes`, { ...authHeaders(provider), "cartesia-version": CARTESIA_VERSION }, {
      model_id: request.model,
      transcript: request.text,
      voice: { mode: "id", id: request.voice ?? DEFAULT_VOICE },
      output_format: OUTPUT_FORMATS[request.format] ?? OUTPUT_FORMATS.mp3
    })
}
