/**
 * Response streaming for Lambda Function URLs in InvokeMode RESPONSE_STREAM: status, headers and
 * cookies go first as the HTTP integration prelude, then the body as it is produced. Inside Lambda
 * (and lambda-local) the runtime's `awslambda` global marks the handler and writes the prelude;
 * elsewhere the same wire format is written directly.
 * https://docs.aws.amazon.com/lambda/latest/dg/configuration-response-streaming.html
 */
import { Effect } from "effect"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import type { ReadableStream as NodeReadableStream } from "node:stream/web"
import { singleHeaders } from "./Events.ts"

/** A Node writable as handed over by `awslambda.streamifyResponse`. */
export interface ResponseStream extends NodeJS.WritableStream {
  setContentType?: (type: string) => void
}

/** The metadata prelude of a streamed response (HttpResponseStream.from). */
export interface StreamMetadata {
  statusCode: number
  headers: Record<string, string>
  cookies: Array<string>
}

export const toStreamMetadata = (response: Response): StreamMetadata => ({
  statusCode: response.status,
  headers: singleHeaders(response.headers),
  cookies: response.headers.getSetCookie()
})

/** The runtime's global in the Lambda Node.js runtime and lambda-local; absent elsewhere. */
interface AwsLambdaGlobal {
  readonly streamifyResponse?: <H>(handler: H) => H
  readonly HttpResponseStream?: { readonly from?: (stream: ResponseStream, metadata: StreamMetadata) => ResponseStream }
}
const awsLambda = (): AwsLambdaGlobal | undefined => (globalThis as { awslambda?: AwsLambdaGlobal }).awslambda

/** The prelude of Lambda's HTTP integration response, as `awslambda.HttpResponseStream.from` writes it. */
const PRELUDE_DELIMITER = new Uint8Array(8)

/**
 * Sends status, headers and cookies before the body: the runtime's `HttpResponseStream.from`
 * when there is one, else the JSON prelude followed by 8 NUL bytes.
 */
const withPrelude = (stream: ResponseStream, metadata: StreamMetadata): ResponseStream => {
  const from = awsLambda()?.HttpResponseStream?.from
  if (from) return from(stream, metadata)
  stream.setContentType?.("application/vnd.awslambda.http-integration-response")
  stream.write(JSON.stringify(metadata))
  stream.write(PRELUDE_DELIMITER)
  return stream
}

/**
 * Writes `response` to the response stream: the prelude, then the body as it arrives. A client
 * that goes away (the stream errors or closes) aborts `abort`, which interrupts the upstream call.
 * Never rejects.
 */
export const streamResponse = async (stream: ResponseStream, response: Response, abort: AbortController): Promise<void> => {
  const out = withPrelude(stream, toStreamMetadata(response))
  const onGone = () => abort.abort()
  out.on("error", onGone)
  out.on("close", onGone)
  // The prelude is sent on the first write: write even when the body is empty.
  out.write("")
  try {
    if (response.body) {
      await pipeline(Readable.fromWeb(response.body as NodeReadableStream), out)
    } else {
      await new Promise<void>((resolve) => out.end(resolve))
    }
  } catch (e) {
    abort.abort()
    Effect.runSync(Effect.logWarning(`aigw: response stream ended early: ${(e as Error).message}`))
  } finally {
    out.removeListener("error", onGone)
    out.removeListener("close", onGone)
  }
}

/**
 * Marks a handler for response streaming when the runtime provides `awslambda.streamifyResponse`;
 * elsewhere (tests, other runtimes) the handler is returned as it is.
 */
export const streamify = <H extends (event: unknown, stream: ResponseStream, context?: any) => Promise<void>>(handler: H): H => {
  const lambda = awsLambda()
  return lambda?.streamifyResponse ? lambda.streamifyResponse(handler) : handler
}
