/**
 * Deepgram text to speech, Aura (the catalogue's base URL ends in `/v1`).
 *
 * Wire format (https://developers.deepgram.com/reference/text-to-speech-api/speak):
 *  - `POST {endpoint}/speak?model=<aura model>&encoding=<linear16 | mp3 | opus | flac | aac |
 *    ...>[&container=wav | none | ogg]`, JSON `{text}`, answers the audio bytes.
 *  - Deepgram's voice is its model: `aura-2-<voice>-<language>`, e.g. `aura-2-thalia-en` (the
 *    default); a request's `voice` names that model, anything else is refused by name.
 *  - auth: `Authorization: Token <key>` (the catalogue's `token` style); errors are
 *    `{err_code, err_msg, request_id}`.
 */
import { authHeaders, postForBytes } from "../internal/http.ts"
import type { SpeechEndpoint, SpeechFormat } from "../Served.ts"

/** The query of each format: WAV and raw PCM are linear16 in a WAV container or none. */
const QUERIES: Readonly<Record<SpeechFormat, string>> = {
  mp3: "encoding=mp3",
  opus: "encoding=opus",
  aac: "encoding=aac",
  flac: "encoding=flac",
  wav: "encoding=linear16&container=wav",
  pcm: "encoding=linear16&container=none"
}

export const speech: SpeechEndpoint = {
  defaultModel: "aura-2-thalia-en",
  unsupported: (request) =>
    request.voice === undefined || request.voice.startsWith("aura-")
      ? undefined
      : `Deepgram's voice is an Aura model such as aura-2-thalia-en; ${request.voice} is not one`,
  synthesize: (provider, request) =>
    postForBytes(
      provider.id,
      `${provider.endpoint}/speak?model=${encodeURIComponent(request.voice ?? request.model)}&${QUERIES[request.format]}`,
      authHeaders(provider),
      { text: request.text }
    )
}
