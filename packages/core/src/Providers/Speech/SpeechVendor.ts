/**
 * What the speech vendors' own clients (ElevenLabs, Cartesia, LMNT, Deepgram) share: the refusal
 * of an audio format a vendor cannot produce; and what every speech call (OpenAI's format too) goes
 * through: the check that an answer is audio.
 */
import { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import type { SpeechFormat, SpeechRequest, SynthesizedSpeech } from "../Served.ts"
import { protocolError, type UpstreamError } from "../UpstreamError.ts"

/** The content type of each format, when the vendor does not name one of its own. */
const CONTENT_TYPES: Readonly<Record<SpeechFormat, string>> = {
  mp3: "audio/mpeg",
  wav: "audio/wav",
  opus: "audio/ogg",
  aac: "audio/aac",
  flac: "audio/flac",
  pcm: "audio/pcm"
}

/** A format the vendor cannot produce, refused by name with the ones it can (undefined: it can). */
export const formatRefusal = (vendor: string, request: SpeechRequest, formats: ReadonlyArray<SpeechFormat>): string | undefined =>
  formats.includes(request.format) ? undefined : `${vendor} cannot produce format ${request.format}; use one of ${formats.join(", ")}`

/**
 * Whether bytes begin (after ASCII white space) as a JSON object or list or as markup does: no encoded
 * audio format does (MP3 frames and ID3 tags, RIFF, Ogg, FLAC, ADTS, MP4 boxes); raw PCM may, so it is
 * not asked of PCM. An error body or a page labelled `audio/mpeg` was relayed as the audio.
 */
const looksLikeJsonOrMarkup = (bytes: Uint8Array): boolean => {
  for (const b of bytes) {
    if (b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d) continue
    return b === 0x7b || b === 0x5b || b === 0x3c
  }
  return false
}

/**
 * The audio of a successful answer: empty bodies and JSON or text bodies (an error sent with 200)
 * are protocol errors; the vendor's `audio/*` content type is kept, else the format's.
 */
export const audioOf = (provider: string, format: SpeechFormat) => (answer: SynthesizedSpeech): Effect.Effect<SynthesizedSpeech, UpstreamError> => {
  if (answer.bytes.length === 0) return Effect.fail(protocolError(provider, "no audio in the answer"))
  if (/json|^text\//.test(answer.contentType)) return Effect.fail(protocolError(provider, `${answer.contentType} instead of audio`))
  if (format !== "pcm" && looksLikeJsonOrMarkup(answer.bytes)) return Effect.fail(protocolError(provider, `JSON or markup labelled ${answer.contentType}, not audio`))
  return Effect.succeed({ bytes: answer.bytes, contentType: answer.contentType.startsWith("audio/") ? answer.contentType : CONTENT_TYPES[format] })
}

/**
 * Speech from `synthesize` (a vendor's, or OpenAI's format): its answer as `audioOf` takes it, the
 * one way every speech call goes (Capabilities/Media.ts), so no vendor's page or error body is ever
 * relayed from the gateway's origin as if it were audio.
 */
export const speak = (
  synthesize: (provider: ConfiguredProvider, request: SpeechRequest) => Effect.Effect<SynthesizedSpeech, UpstreamError>,
  provider: ConfiguredProvider,
  request: SpeechRequest
): Effect.Effect<SynthesizedSpeech, UpstreamError> => Effect.flatMap(synthesize(provider, request), audioOf(provider.id, request.format))
