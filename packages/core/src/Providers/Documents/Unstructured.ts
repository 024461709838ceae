/**
 * Unstructured's Partition Endpoint as a document parser.
 *
 * Wire format (https://docs.unstructured.io/api-reference/partition/post-requests, the API's
 * OpenAPI `partition` operation): `POST {endpoint}/general` (the catalogue's base URL ends in
 * `/general/v0`) with a multipart body whose `files` part is the document; the key goes in the
 * `unstructured-api-key` header (not `x-api-key`, the catalogue's nearest auth style, so the
 * module sets it). The answer is a JSON array of elements `{type, element_id, text, metadata:
 * {page_number, filename, ...}}`; errors are FastAPI's `{"detail": ...}`.
 */
import { Effect, Option, Redacted } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { postMultipart } from "../internal/http.ts"
import type { Served } from "../Served.ts"
import { protocolError } from "../UpstreamError.ts"
import { byPage, type DocumentParser, fileForm, pageNumber, type ParsedDocument } from "./DocumentParser.ts"

/** The key header Unstructured reads. */
export const keyHeader = (provider: ConfiguredProvider): Record<string, string> =>
  Option.isSome(provider.apiKey) ? { "unstructured-api-key": Redacted.value(provider.apiKey.value) } : {}

/** The element array to the parsed document; anything else is a protocol error. */
export const toParsed = (provider: string, answer: unknown): Effect.Effect<ParsedDocument, ReturnType<typeof protocolError>> => {
  if (!Array.isArray(answer)) return Effect.fail(protocolError(provider, "the answer is not an array of elements"))
  const parts: Array<{ text: string; page: number | undefined }> = []
  for (const element of answer) {
    if (typeof element?.text !== "string") return Effect.fail(protocolError(provider, "an element has no text"))
    parts.push({ text: element.text, page: pageNumber(element.metadata?.page_number, 1) })
  }
  const { text, pageTexts } = byPage(parts)
  return Effect.succeed(pageTexts === undefined ? { text } : { text, pages: pageTexts.length, pageTexts })
}

export const parser: DocumentParser = {
  parse: (provider, source) =>
    postMultipart(provider.id, `${provider.endpoint}/general`, keyHeader(provider), fileForm("files", source)).pipe(
      Effect.flatMap((answer) => toParsed(provider.id, answer))
    )
}

/** What aigw serves through Unstructured (a bespoke provider). */
export const served: Served = { documents: parser }
