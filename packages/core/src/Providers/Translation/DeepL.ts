/**
 * DeepL as a translation vendor.
 *
 * Wire format (https://developers.deepl.com/api-reference/translate):
 *  - `POST {base}/translate` (the catalogue's base is `https://api.deepl.com/v2`) with
 *    `{text: [..], target_lang, source_lang?}`, language codes in upper case; header
 *    `Authorization: DeepL-Auth-Key <key>`.
 *  - answer `{translations: [{detected_source_language, text}]}`, one per text sent; errors
 *    `{message}` (456: quota exceeded).
 *  - keys of DeepL API Free end in `:fx` and only work on `https://api-free.deepl.com/v2`: such a
 *    key goes there unless `DEEPL_BASE_URL` names another host.
 * DeepL's document translation is an upload-and-download job that answers a translated file, not
 * the parsed text POST /v1/documents/parse returns: not served.
 */
import { Effect, Option, Redacted } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { postJson } from "../internal/http.ts"
import type { Served } from "../Served.ts"
import { protocolError } from "../UpstreamError.ts"
import type { TranslationAdapter, TranslationRequest } from "./TranslationAdapter.ts"

export const FREE_ENDPOINT = "https://api-free.deepl.com/v2"

const keyOf = (provider: ConfiguredProvider) => (Option.isSome(provider.apiKey) ? Redacted.value(provider.apiKey.value) : undefined)

/** The host a key works on: DeepL API Free keys (`:fx`) on the free host, unless the base URL is set. */
export const endpointOf = (provider: ConfiguredProvider) =>
  keyOf(provider)?.endsWith(":fx") && provider.endpoint === provider.baseUrl.replace(/\/+$/, "") ? FREE_ENDPOINT : provider.endpoint

export const translateBody = (request: TranslationRequest) => ({
  text: [request.text],
  target_lang: request.targetLanguage.toUpperCase(),
  ...(request.sourceLanguage !== undefined ? { source_lang: request.sourceLanguage.toUpperCase() } : {})
})

export const deepl: TranslationAdapter = {
  translate: (provider, request) =>
    postJson(provider.id, `${endpointOf(provider)}/translate`, { authorization: `DeepL-Auth-Key ${keyOf(provider) ?? ""}` }, translateBody(request)).pipe(
      Effect.flatMap((answer) => {
        const first = Array.isArray(answer?.translations) ? answer.translations[0] : undefined
        if (typeof first?.text !== "string") return Effect.fail(protocolError(provider.id, "no translated text in the translate answer"))
        const detected = typeof first.detected_source_language === "string" && /^[A-Za-z]{2}$/.test(first.detected_source_language)
          ? first.detected_source_language.toLowerCase()
          : null
        return Effect.succeed({ translation: first.text, detectedSourceLanguage: detected })
      })
    )
}

/** What aigw serves through DeepL (a bespoke provider). */
export const served: Served = {
  translate: deepl,
  notServed: {
    documents: "DeepL translates documents into translated files (upload, poll, download), which is not the parsed text POST /v1/documents/parse answers"
  }
}
