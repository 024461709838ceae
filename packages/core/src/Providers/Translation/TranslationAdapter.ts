/** A translation vendor (DeepL): one text into one target language, the source given or detected. */
import type { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import type { UpstreamError } from "../UpstreamError.ts"

export interface TranslationRequest {
  readonly text: string
  /** ISO 639-1, lower case. */
  readonly targetLanguage: string
  readonly sourceLanguage?: string | undefined
}

export interface Translated {
  readonly translation: string
  /** ISO 639-1, lower case, as the vendor detected it; null when it reports none. */
  readonly detectedSourceLanguage: string | null
}

export interface TranslationAdapter {
  readonly translate: (provider: ConfiguredProvider, request: TranslationRequest) => Effect.Effect<Translated, UpstreamError>
}
