/**
 * A local AWS Bedrock runtime (Converse / ConverseStream) speaking its wire format, for the Bedrock
 * adapter and end-to-end tests: it recomputes each request's SigV4 signature from what it received
 * (method, path, signed headers, body; the payload hash from the body itself) and answers 403 like
 * Bedrock when it does not match, checks Bedrock API keys (bearer), answers Converse JSON and
 * streams AWS binary event stream frames split at odd byte boundaries.
 *
 * References: Bedrock API reference (Converse, ConverseStream, MessageStopEvent stop reasons,
 * ContentBlockStartEvent/DeltaEvent, ConverseStreamMetadataEvent usage, common errors with the
 * `x-amzn-errortype` header and a `{"message"}` body), AWS SigV4 (Authorization header with
 * Credential scope, SignedHeaders and Signature), AWS event stream encoding (prelude, headers
 * `:message-type`/`:event-type`/`:exception-type`, payload, CRC32s).
 */
import { Sha256 } from "@aws-crypto/sha256-js"
import { EventStreamCodec } from "@smithy/core/event-streams"
import { SignatureV4 } from "@smithy/signature-v4"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

export const ACCESS_KEY = "AKIDEXAMPLE"
export const SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
export const API_KEY = "ABSKbedrock-api-key-example"

export const codec = new EventStreamCodec((b) => new TextDecoder().decode(b), (s) => new TextEncoder().encode(s))
export const str = (value: string) => ({ type: "string" as const, value })
/** One event message of a ConverseStream answer. */
export const event = (type: string, payload: unknown) =>
  codec.encode({
    headers: { ":message-type": str("event"), ":event-type": str(type), ":content-type": str("application/json") },
    body: new TextEncoder().encode(JSON.stringify(payload))
  })
/** One exception message (e.g. throttlingException) of a ConverseStream answer. */
export const exception = (type: string, message: string) =>
  codec.encode({
    headers: { ":message-type": str("exception"), ":exception-type": str(type), ":content-type": str("application/json") },
    body: new TextEncoder().encode(JSON.stringify({ message }))
  })

export type Reply =
  | { kind: "json"; body: unknown }
  | { kind: "raw"; status: number; contentType: string; body: string }
  | { kind: "frames"; frames: ReadonlyArray<Uint8Array>; pieceBytes?: number }

export interface Received {
  path: string
  headers: IncomingMessage["headers"]
  body: any
}

/** A Bedrock runtime mock: verifies credentials, then sends the queued reply. */
export type BedrockMock = Awaited<ReturnType<typeof startBedrockMock>>

export const startBedrockMock = async (expectedRegion = "us-east-1") => {
  const received: Array<Received> = []
  let reply: Reply = { kind: "json", body: {} }
  const fail = (res: ServerResponse, status: number, type: string, message: string) => {
    res.writeHead(status, { "content-type": "application/json", "x-amzn-errortype": `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/` })
    res.end(JSON.stringify({ message }))
  }
  /** Recomputes the SigV4 Authorization header from the request as received; undefined when it matches. */
  const signatureProblem = async (req: IncomingMessage, body: string): Promise<string | undefined> => {
    const auth = String(req.headers.authorization ?? "")
    const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(auth)
    if (m === null) return "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature'."
    const [, keyId, , region, service, signedHeaders] = m
    if (keyId !== ACCESS_KEY) return "The security token included in the request is invalid."
    if (region !== expectedRegion || service !== "bedrock") return `Credential should be scoped to a valid region (${expectedRegion}) and service bedrock.`
    const amzDate = String(req.headers["x-amz-date"] ?? "")
    const d = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate)
    if (d === null) return "missing x-amz-date"
    const headers: Record<string, string> = {}
    // The payload hash is recomputed from the body received, not taken from the client's header.
    for (const name of signedHeaders!.split(";")) if (name !== "x-amz-content-sha256") headers[name] = String(req.headers[name] ?? "")
    const signer = new SignatureV4({ service: "bedrock", region: region!, credentials: { accessKeyId: keyId!, secretAccessKey: SECRET, ...(req.headers["x-amz-security-token"] ? { sessionToken: String(req.headers["x-amz-security-token"]) } : {}) }, sha256: Sha256 })
    const url = new URL(req.url!, "http://mock")
    const expected = await signer.sign(
      { method: req.method!, protocol: "http:", hostname: url.hostname, path: url.pathname, query: {}, headers, body },
      { signingDate: new Date(Date.UTC(+d[1]!, +d[2]! - 1, +d[3]!, +d[4]!, +d[5]!, +d[6]!)) }
    )
    return expected.headers.authorization === auth
      ? undefined
      : "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."
  }
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Array<Buffer> = []
    for await (const c of req) chunks.push(c as Buffer)
    const text = Buffer.concat(chunks).toString("utf8")
    const path = /^\/model\/([^/]+)\/(converse|converse-stream)$/.exec(req.url ?? "")
    if (req.method !== "POST" || path === null) return fail(res, 404, "UnknownOperationException", "Unknown operation")
    const auth = String(req.headers.authorization ?? "")
    if (auth.startsWith("Bearer ")) {
      if (auth !== `Bearer ${API_KEY}`) return fail(res, 403, "AccessDeniedException", "Invalid API Key")
    } else {
      const problem = await signatureProblem(req, text)
      if (problem !== undefined) return fail(res, 403, problem.startsWith("The request signature") ? "InvalidSignatureException" : "UnrecognizedClientException", problem)
    }
    received.push({ path: req.url!, headers: req.headers, body: JSON.parse(text) })
    if (reply.kind === "json") {
      res.writeHead(200, { "content-type": "application/json" })
      return res.end(JSON.stringify(reply.body))
    }
    if (reply.kind === "raw") {
      res.writeHead(reply.status, { "content-type": reply.contentType })
      return res.end(reply.body)
    }
    res.writeHead(200, { "content-type": "application/vnd.amazon.eventstream" })
    // Split the frames at odd boundaries so the decoder has to join partial frames.
    const all = Buffer.concat(reply.frames)
    const piece = reply.pieceBytes ?? 7
    for (let i = 0; i < all.length; i += piece) {
      res.write(all.subarray(i, i + piece))
      await new Promise((r) => setTimeout(r, 0))
    }
    res.end()
  }
  const server = createServer((req, res) => void handle(req, res).catch(() => res.destroy()))
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    answer: (r: Reply) => void (reply = r),
    close: () => new Promise<void>((r) => server.close(() => r()))
  }
}
