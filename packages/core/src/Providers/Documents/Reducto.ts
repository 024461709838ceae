/**
 * Reducto as a document parser: upload, then a synchronous parse.
 *
 * Wire format (https://docs.reducto.ai/api, the upload and parse operations; base URL
 * https://platform.reducto.ai):
 *  - upload: `POST {endpoint}/upload`, multipart with the document as `file` → `{file_id:
 *    "reducto://...", presigned_url}`.
 *  - parse: `POST {endpoint}/parse` with `{input: file_id}` → `{job_id, duration, usage:
 *    {num_pages, credits}, result}`, where `result` is `{type: "full", chunks: [{content, embed,
 *    blocks}]}` or, when it is too large to return, `{type: "url", url}` (a presigned URL to the
 *    JSON of the chunks).
 *  - auth: `Authorization: Bearer <key>`; errors are `{"detail": "..."}`.
 */
import { Effect } from "effect"
import * as UrlGuard from "../../UrlGuard.ts"
import { authHeaders, postJson, postMultipart, REQUEST_TIMEOUT, timeoutError } from "../internal/http.ts"
import { currentReplyLimit } from "../internal/nodeFetch.ts"
import type { Served } from "../Served.ts"
import { protocolError, type UpstreamError } from "../UpstreamError.ts"
import { type DocumentParser, fileForm, pageCount, type ParsedDocument, type ParseOptions } from "./DocumentParser.ts"

/** Chunks (an array, or an object holding `chunks`) to the document's text. */
export const chunksText = (provider: string, value: any): Effect.Effect<string, UpstreamError> => {
  const chunks = Array.isArray(value) ? value : value?.chunks
  if (!Array.isArray(chunks) || chunks.some((c) => typeof c?.content !== "string")) {
    return Effect.fail(protocolError(provider, "the result has no chunks with content"))
  }
  return Effect.succeed(chunks.map((c) => c.content as string).join("\n\n"))
}

/**
 * The result a URL answer points at, fetched without the key through the URL guard: the address
 * connected to is checked, and a redirect is refused rather than followed. Within the transport's
 * deadline, as every upstream request is: a result URL that never answered held the call for good.
 */
const fetchResult = (provider: string, url: unknown, options: ParseOptions) =>
  typeof url !== "string"
    ? Effect.fail(protocolError(provider, "the URL result has no url"))
    : UrlGuard.guardedGetJson(url, { allowPrivate: options.allowPrivateUrls, field: "result url", limit: currentReplyLimit() }).pipe(
      Effect.mapError((e) => protocolError(provider, e.message)),
      Effect.timeoutFail({ duration: REQUEST_TIMEOUT, onTimeout: () => timeoutError(provider, "answer at its result url") })
    )

/** The parse answer to the parsed document. */
export const toParsed = (provider: string, answer: any, options: ParseOptions): Effect.Effect<ParsedDocument, UpstreamError> =>
  Effect.gen(function*() {
    const result = answer?.result
    const text = result?.type === "full"
      ? yield* chunksText(provider, result)
      : result?.type === "url"
      ? yield* Effect.flatMap(fetchResult(provider, result.url, options), (r) => chunksText(provider, r))
      : yield* Effect.fail(protocolError(provider, `unknown result type ${JSON.stringify(result?.type)}`))
    return { text, pages: pageCount(answer.usage?.num_pages) }
  })

export const parser: DocumentParser = {
  parse: (provider, source, options) =>
    Effect.gen(function*() {
      const headers = authHeaders(provider)
      const upload = yield* postMultipart(provider.id, `${provider.endpoint}/upload`, headers, fileForm("file", source))
      if (typeof upload?.file_id !== "string" || upload.file_id.length === 0) return yield* Effect.fail(protocolError(provider.id, "the upload answered no file_id"))
      const answer = yield* postJson(provider.id, `${provider.endpoint}/parse`, headers, { input: upload.file_id })
      return yield* toParsed(provider.id, answer, options)
    })
}

/** What aigw serves through Reducto (a bespoke provider). */
export const served: Served = { documents: parser }
