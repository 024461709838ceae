/**
 * Events for tests: a copy of an AWS documentation sample (fixtures/) with only the method, path,
 * query, body and headers replaced.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Writable } from "node:stream"
import { fileURLToPath } from "node:url"

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures")

export const fixture = (name: "http-api-v2" | "http-api-v1" | "rest-api-v1" | "function-url" | "scheduled-event"): any =>
  JSON.parse(fs.readFileSync(path.join(fixtures, `${name}.json`), "utf8"))

export interface Call {
  readonly method: string
  /** path with an optional query string, e.g. "/api/avatar/verify-email?token=x" */
  readonly path: string
  /** JSON (an object), text, or bytes (a Buffer: sent base64-encoded, as API Gateway sends binary bodies) */
  readonly body?: unknown
  /** send the body base64-encoded (isBase64Encoded: true) */
  readonly base64?: boolean
  readonly headers?: Record<string, string>
  readonly token?: string
  readonly apiKey?: string
}

const headersOf = (call: Call): Record<string, string> => {
  const h: Record<string, string> = { accept: "application/json", ...call.headers }
  if (call.body !== undefined) h["content-type"] ??= "application/json"
  if (call.token) h.authorization = `Bearer ${call.token}`
  if (call.apiKey) h["x-api-key"] = call.apiKey
  return h
}

const bodyOf = (call: Call) => {
  if (call.body === undefined) return { body: null, isBase64Encoded: false }
  if (Buffer.isBuffer(call.body)) return { body: call.body.toString("base64"), isBase64Encoded: true }
  const text = typeof call.body === "string" ? call.body : JSON.stringify(call.body)
  return call.base64
    ? { body: Buffer.from(text, "utf8").toString("base64"), isBase64Encoded: true }
    : { body: text, isBase64Encoded: false }
}

/** Replaces headers case-insensitively (the samples mix "Content-Type" and "content-type"). */
const mergeHeaders = <V>(base: Record<string, V> | null | undefined, extra: Record<string, V>) => {
  const out: Record<string, V> = {}
  const overridden = new Set(Object.keys(extra).map((k) => k.toLowerCase()))
  for (const [k, v] of Object.entries(base ?? {})) if (!overridden.has(k.toLowerCase())) out[k] = v
  return { ...out, ...extra }
}

/** An API Gateway HTTP API (payload 2.0) or Function URL event. */
export const v2Event = (call: Call, sample: "http-api-v2" | "function-url" = "http-api-v2") => {
  const event = fixture(sample)
  const [rawPath, rawQueryString = ""] = call.path.split("?") as [string, string?]
  const query: Record<string, string> = {}
  for (const [k, v] of new URLSearchParams(rawQueryString)) query[k] = query[k] === undefined ? v : `${query[k]},${v}`
  event.rawPath = rawPath
  event.rawQueryString = rawQueryString
  event.queryStringParameters = Object.keys(query).length > 0 ? query : undefined
  event.requestContext.http.method = call.method
  event.requestContext.http.path = rawPath
  event.headers = mergeHeaders(event.headers, headersOf(call))
  Object.assign(event, bodyOf(call))
  return event
}

export const functionUrlEvent = (call: Call) => v2Event(call, "function-url")

/** An API Gateway REST API (payload 1.0) event, with multi-value headers and query. */
export const v1Event = (call: Call, sample: "rest-api-v1" | "http-api-v1" = "rest-api-v1") => {
  const event = fixture(sample)
  const [p, q = ""] = call.path.split("?") as [string, string?]
  const single: Record<string, string> = {}
  const multi: Record<string, Array<string>> = {}
  for (const [k, v] of new URLSearchParams(q)) {
    single[k] = v
    ;(multi[k] ??= []).push(v)
  }
  event.path = p
  event.httpMethod = call.method
  event.requestContext.httpMethod = call.method
  if (event.pathParameters) event.pathParameters = { proxy: p.replace(/^\//, "") }
  event.queryStringParameters = Object.keys(single).length > 0 ? single : null
  event.multiValueQueryStringParameters = Object.keys(multi).length > 0 ? multi : null
  const headers = headersOf(call)
  event.headers = mergeHeaders(event.headers, headers)
  event.multiValueHeaders = mergeHeaders(
    event.multiValueHeaders,
    Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, [v]]))
  )
  Object.assign(event, bodyOf(call))
  return event
}

/** Parses a buffered result's JSON body. */
export const json = (result: { body: string; isBase64Encoded: boolean }) =>
  JSON.parse(result.isBase64Encoded ? Buffer.from(result.body, "base64").toString("utf8") : result.body)

/** The `data:` payloads of an SSE body. */
export const sseData = (text: string) =>
  text.split("\n\n").filter((b) => b.startsWith("data: ")).map((b) => b.slice(6))

/** The newest e-mail verification token sent to `email` by the file mailer under `dataDir`. */
export const verificationToken = (dataDir: string, email: string): string => {
  const dir = path.join(dataDir, "mail")
  for (const f of fs.readdirSync(dir).sort().reverse()) {
    const text = fs.readFileSync(path.join(dir, f), "utf8")
    if (text.includes(`To: ${email}`)) {
      const m = /verify-email\?token=([A-Za-z0-9_%-]+)/.exec(text)
      if (m) return decodeURIComponent(m[1]!)
    }
  }
  throw new Error(`no verification mail for ${email} in ${dir}`)
}

/**
 * A stand-in for the response stream Lambda hands a streaming handler (a Node Writable): records
 * each write with its time. Without the `awslambda` global the host writes the HTTP integration
 * prelude itself (JSON, then 8 NUL bytes), and `parts()` splits it off again.
 */
export class RecordingStream extends Writable {
  readonly writes: Array<{ at: number; bytes: Buffer }> = []
  endedAt = 0
  contentType: string | undefined

  setContentType(type: string) {
    this.contentType = type
  }
  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void) {
    this.writes.push({ at: Date.now(), bytes: Buffer.from(chunk) })
    callback()
  }
  override _final(callback: (error?: Error | null) => void) {
    this.endedAt = Date.now()
    callback()
  }

  /** The prelude (parsed) and the body that followed it, with the time of each body write. */
  parts() {
    const all = Buffer.concat(this.writes.map((w) => w.bytes))
    const nul = all.indexOf(Buffer.alloc(8))
    if (nul < 0) throw new Error("no prelude delimiter")
    return { metadata: JSON.parse(all.subarray(0, nul).toString("utf8")), body: all.subarray(nul + 8).toString("utf8") }
  }
}
