/**
 * One error type for every upstream failure, and one mapper from HTTP answers to it.
 * `retryable` decides fallback: connect errors, timeouts, 408, 429 and 5xx.
 */
import { sliceWhole } from "../Cut.ts"
import { Data } from "effect"
import { Busy, UpstreamFailed, UpstreamTimeout } from "../Errors.ts"
import type { TokenUsage } from "./Chat.ts"
import { parseUpstreamJson } from "../JsonText.ts"

export class UpstreamError extends Data.TaggedError("UpstreamError")<{
  readonly provider: string
  /** `stopped`: the gateway ended the attempt itself (a graceful stop), which says nothing of the provider. */
  readonly kind: "connect" | "timeout" | "http" | "protocol" | "stopped"
  readonly status?: number | undefined
  readonly message: string
  readonly retryable: boolean
  /** The upstream's own `Retry-After` on a 429 or 503, when it is a minute or less (`retryAfterOf`). */
  readonly retryAfterSeconds?: number | undefined
  /** The counts an answer reported that failed all the same (its finish reason says so): the failure's usage record keeps them. */
  readonly usage?: Partial<TokenUsage> | undefined
}> {}

/** Past this, an upstream's wait is its own business (a daily limit): clients are not told to sit it out. */
const MAX_PASSED_RETRY_AFTER_SECONDS = 60

/**
 * An upstream's `Retry-After` (delta seconds or an HTTP date) as whole seconds, when it is at most a
 * minute: the wait a client retrying through the gateway should keep. Undefined otherwise.
 */
export const retryAfterOf = (header: string | null | undefined, now = Date.now()): number | undefined => {
  if (header == null || header.trim() === "") return undefined
  const text = header.trim()
  const seconds = /^\d+$/.test(text) ? Number(text) : Math.ceil((Date.parse(text) - now) / 1000)
  return Number.isFinite(seconds) && seconds >= 0 && seconds <= MAX_PASSED_RETRY_AFTER_SECONDS ? seconds : undefined
}

export const isRetryableStatus = (status: number) => status === 408 || status === 429 || status >= 500

/** Credentials an upstream may echo back (a proxy's error page showing the request's headers). */
const ECHOED_CREDENTIALS = /\b(Bearer|Basic|DeepL-Auth-Key)\s+[^\s"',;<]+/gi
/** The headers the gateway's keys travel in, echoed as `name: value` or `name=value`. */
const ECHOED_KEY_HEADERS = /\b(x-api-key|x-goog-api-key|api-key|x-auth-token|authorization|proxy-authorization)(["']?\s*[:=]\s*["']?)(?!Bearer\b|Basic\b)[^\s"',;&<]+/gi
/** Keys in a URL's query. */
const ECHOED_QUERY_KEYS = /([?&](?:key|api_key|apikey|token|access_token)=)[^\s"'&#<]+/gi
/** Key formats that are secrets wherever they appear (OpenAI and Anthropic `sk-…`, Google `AIza…`, Groq `gsk_…`, xAI `xai-…`). */
const KEY_FORMATS = /\b(?:sk-[A-Za-z0-9_-]{8,}|AIza[0-9A-Za-z_-]{20,}|gsk_[A-Za-z0-9]{20,}|xai-[A-Za-z0-9]{20,})/g

/**
 * The credentials the gateway holds for its upstreams (each configured provider's key and secret
 * settings, `knowCredential`): redacted wherever an upstream echoes one, whatever its format or the
 * scheme before it (Deepgram's `Token …`, a vendor's own key format the patterns above do not know).
 */
const knownCredentials = new Set<string>()
let longestKnownCredential = 0
/** Shorter values could be ordinary words of a message: they are left to the patterns. */
const MIN_KNOWN_CREDENTIAL = 8

export const knowCredential = (value: string) => {
  if (value.length < MIN_KNOWN_CREDENTIAL || knownCredentials.has(value)) return
  // As written, and as a URL or a form would carry it (`+` and `/` escaped).
  for (const form of new Set([value, encodeURIComponent(value)])) {
    knownCredentials.add(form)
    longestKnownCredential = Math.max(longestKnownCredential, form.length)
  }
}

const withoutKnownCredentials = (text: string) => {
  let out = text
  for (const credential of knownCredentials) if (out.includes(credential)) out = out.split(credential).join("[redacted]")
  return out
}

/** Of an error body that holds no JSON message, the start shown. */
const PLAIN_BODY_SHOWN = 300

/** Longest upstream text shown to a caller (an error message, a stream's error event): the rest is counted, not sent or logged. */
const SHOWN_CHARACTERS = 1_000

/**
 * Text an upstream wrote, as a caller may see it: an HTML page (a proxy's or a framework's error page,
 * often with internals) named, not shown; credentials it echoes redacted (an `Authorization` scheme's,
 * the key headers', query keys, well-known key formats, and every credential the gateway holds for an
 * upstream); cut at `shown` characters.
 */
export const shownUpstreamText = (text: string, shown = SHOWN_CHARACTERS): string => {
  if (/^\s*</.test(text)) return `an HTML page of ${text.length} characters (not shown)`
  // Known credentials first, on as much as the cut could split one of.
  const redacted = withoutKnownCredentials(text.length > shown ? text.slice(0, shown + longestKnownCredential) : text)
  const cut = text.length > shown ? `${sliceWhole(redacted, shown)}… (${text.length} characters)` : redacted
  return cut
    .replace(ECHOED_CREDENTIALS, "$1 [redacted]")
    .replace(ECHOED_KEY_HEADERS, "$1$2[redacted]")
    .replace(ECHOED_QUERY_KEYS, "$1[redacted]")
    .replace(KEY_FORMATS, "[redacted]")
}

/**
 * The human message of an upstream's error body, for the caller: the message field of the usual
 * JSON shapes (OpenAI, Anthropic, Gemini, Cohere, plain), else the start of a plain-text body, as
 * `shownUpstreamText` shows it.
 */
export const upstreamMessage = (body: string): string => {
  let message: string | undefined
  let text = body
  const parsed = parseUpstreamJson(body)
  if ("value" in parsed) {
    const json = parsed.value as any
    // OpenAI/Anthropic/Gemini, Cohere/Bedrock, plain strings, FastAPI-style, IBM watsonx (`errors[]`).
    const candidates = [json?.error?.message, json?.message, typeof json?.error === "string" ? json.error : undefined, json?.detail, json?.errors?.[0]?.message]
    message = candidates.find((m) => typeof m === "string" && m.length > 0)
    // JSON without a message field is shown re-serialised: its `\u…` escapes written out, so a credential in them is seen and redacted.
    text = JSON.stringify(json)
  }
  // A body that is no JSON message is shown by its start only.
  return (message !== undefined ? shownUpstreamText(message) : shownUpstreamText(text, PLAIN_BODY_SHOWN)) || "no error body"
}

export const fromHttp = (provider: string, status: number, body: string, retryAfter?: string | null) => {
  const wait = status === 429 || status === 503 ? retryAfterOf(retryAfter) : undefined
  return new UpstreamError({
    provider,
    kind: "http",
    status,
    message: `${provider} answered HTTP ${status}: ${upstreamMessage(body)}`,
    retryable: isRetryableStatus(status),
    ...(wait !== undefined ? { retryAfterSeconds: wait } : {})
  })
}

export const connectFailed = (provider: string, cause: unknown) =>
  new UpstreamError({
    provider,
    kind: "connect",
    message: `cannot reach ${provider}: ${(cause as Error)?.message ?? String(cause)}`,
    retryable: true
  })

/** An answer that is not what the wire says; `detail` may quote the upstream (a stream's error event), shown as `shownUpstreamText` shows it. */
export const protocolError = (provider: string, detail: string, usage?: Partial<TokenUsage>) =>
  new UpstreamError({
    provider,
    kind: "protocol",
    message: `${provider} sent an unexpected answer: ${shownUpstreamText(detail)}`,
    retryable: false,
    // The counts an answer the gateway cannot relay reported: the provider billed them (the failure's usage record keeps them).
    ...(usage !== undefined ? { usage } : {})
  })

/**
 * An answer an adapter threw on while reading it (a shape it did not foresee): the answer's fault, a
 * protocol error, never the server's crash (a throw in a stream's reader would end the process).
 */
export const unreadableAnswer = (provider: string, cause: unknown) =>
  protocolError(provider, `an answer aigw cannot read (${(cause as Error)?.message ?? String(cause)})`)

/** What `read` makes of an upstream answer, or, should it throw, the answer's protocol error (`unreadableAnswer`). */
export const readSafely = <A>(provider: string, read: () => A | UpstreamError): A | UpstreamError => {
  try {
    return read()
  } catch (e) {
    return unreadableAnswer(provider, e)
  }
}

/** An attempt the gateway ended itself with `message` (not retried on another provider). */
export const stoppedError = (provider: string, message: string) =>
  new UpstreamError({ provider, kind: "stopped", message, retryable: false })

/** To the gateway's error set: timeouts 504, attempts the gateway stopped 503 (with Retry-After), everything else 502. */
export const toGatewayError = (e: UpstreamError) =>
  e.kind === "timeout"
    ? new UpstreamTimeout({ message: e.message, provider: e.provider })
    : e.kind === "stopped"
    ? new Busy({ message: e.message, retryAfterSeconds: 1 })
    : new UpstreamFailed({ message: e.message, provider: e.provider, status: e.status, retryAfterSeconds: e.retryAfterSeconds })
