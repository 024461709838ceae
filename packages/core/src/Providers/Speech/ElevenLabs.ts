/**
 * ElevenLabs text to speech (the catalogue's base URL ends in `/v1`).
 *
 * Wire format (https://elevenlabs.io/docs/api-reference/text-to-speech/convert):
 *  - `POST {endpoint}/text-to-speech/{voice_id}?output_format=<codec_samplerate[_bitrate]>`, JSON
 *    `{text, model_id}` (eleven_multilingual_v2, eleven_flash_v2_5, eleven_turbo_v2_5, eleven_v3),
 *    answers the audio bytes.
 *  - the voice is an ElevenLabs voice id (from its voice library or `GET /v1/voices`); without one,
 *    `JBFqnCBsd6RMkjVDRZzb` ("George", the voice of the API reference's examples).
 *  - auth: the `xi-api-key` header, not one of the catalogue's auth styles, so it is set here;
 *    errors are `{detail: {status, message}}`.
 */
import { Option, Redacted } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { postForBytes } from "../internal/http.ts"
import type { SpeechEndpoint, SpeechFormat } from "../Served.ts"
import { formatRefusal } from "./SpeechVendor.ts"

export const DEFAULT_VOICE = "JBFqnCBsd6RMkjVDRZzb"

/** ElevenLabs' `output_format` for each format it can produce (WAV at 44.1 kHz needs its Pro tier). */
const OUTPUT_FORMATS: Partial<Record<SpeechFormat, string>> = {
  mp3: "mp3_44100_128",
  wav: "wav_44100",
  opus: "opus_48000_128",
  pcm: "pcm_24000"
}

const headersOf = (provider: ConfiguredProvider): Record<string, string> =>
  Option.isSome(provider.apiKey) ? { "xi-api-key": Redacted.value(provider.apiKey.value) } : {}

export const speech: SpeechEndpoint = {
  defaultModel: "eleven_multilingual_v2",
  unsupported: (request) => formatRefusal("ElevenLabs", request, Object.keys(OUTPUT_FORMATS) as Array<SpeechFormat>),
  synthesize: (provider, request) =>
    postForBytes(
      provider.id,
      `${provider.endpoint}/text-to-speech/${encodeURIComponent(request.voice ?? DEFAULT_VOICE)}?output_format=${OUTPUT_FORMATS[request.format] ?? "mp3_44100_128"}`,
      headersOf(provider),
      { text: request.text, model_id: request.model }
    )
}
