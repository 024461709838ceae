/**
 * LandingAI Agentic Document Extraction (ADE) Parse as a document parser.
 *
 * Wire format (https://docs.landing.ai/api-reference/tools/ade-parse, JSON response described in
 * https://docs.landing.ai/ade/ade-json-response; the catalogue's base URL ends in `/v1`):
 * `POST {endpoint}/ade/parse` with a multipart body whose `document` part is the file (the model
 * is the API's default). The answer is `{markdown, chunks: [{id, type, markdown, grounding:
 * {page (0-based), box}}], splits, metadata: {page_count, credit_usage, duration_ms, ...}}`.
 * Auth: `Authorization: Bearer <key>`; errors are `{"detail": "..."}` (422 for documents it
 * cannot read).
 */
import { Effect } from "effect"
import { authHeaders, postMultipart } from "../internal/http.ts"
import type { Served } from "../Served.ts"
import { protocolError, type UpstreamError } from "../UpstreamError.ts"
import { byPage, type DocumentParser, fileForm, pageCount, pageNumber, type ParsedDocument } from "./DocumentParser.ts"

/** The parse answer to the parsed document: the whole Markdown, pages from the chunks' grounding. */
export const toParsed = (provider: string, answer: any): Effect.Effect<ParsedDocument, UpstreamError> => {
  if (typeof answer?.markdown !== "string") return Effect.fail(protocolError(provider, "the answer has no markdown"))
  const chunks: ReadonlyArray<any> = Array.isArray(answer.chunks) ? answer.chunks : []
  const parts = chunks.map((c) => ({ text: typeof c?.markdown === "string" ? c.markdown : "", page: pageNumber(c?.grounding?.page, 0) }))
  const { pageTexts } = byPage(parts)
  const pages = pageCount(answer.metadata?.page_count) ?? pageTexts?.length
  // Pages after the last chunk are empty; chunks on pages past the count make the pages untrustworthy.
  if (pageTexts === undefined || pages === undefined || pageTexts.length > pages) return Effect.succeed({ text: answer.markdown, pages })
  return Effect.succeed({ text: answer.markdown, pages, pageTexts: [...pageTexts, ...Array<string>(pages - pageTexts.length).fill("")] })
}

export const parser: DocumentParser = {
  parse: (provider, source) =>
    postMultipart(provider.id, `${provider.endpoint}/ade/parse`, authHeaders(provider), fileForm("document", source)).pipe(
      Effect.flatMap((answer) => toParsed(provider.id, answer))
    )
}

/** What aigw serves through LandingAI (a bespoke provider). */
export const served: Served = { documents: parser }
