/**
 * Short-lived access tokens for providers whose key is exchanged for a bearer token (Google service
 * accounts, IBM Cloud IAM API keys): one token per provider and credential, reused until shortly
 * before it expires, one in-flight request shared by concurrent calls, failures never kept (the
 * next call asks again). The token request goes over the one transport (bounded reply, deadline).
 */
import { createHash } from "node:crypto"
import { fromHttp, protocolError, shownUpstreamText, UpstreamError, upstreamMessage } from "../UpstreamError.ts"
import { deadline } from "./http.ts"
import { nodeFetch } from "./nodeFetch.ts"
import { parseUpstreamJson } from "../../JsonText.ts"

export interface AccessToken {
  readonly token: string
  /** When it stops being valid, in epoch milliseconds. */
  readonly expiresAt: number
}

/** An OAuth-style token request: a form-encoded POST (RFC 6749 section 4, and IBM IAM). */
export interface TokenRequest {
  readonly url: string
  readonly form: Readonly<Record<string, string>>
}

/** A token is renewed this long before it expires, so no call goes out with one about to lapse. */
const RENEW_BEFORE_MS = 5 * 60_000

interface Entry {
  token?: AccessToken
  /** When the token is renewed: RENEW_BEFORE_MS before it expires, or halfway through a shorter life. */
  renewAt?: number
  pending?: Promise<AccessToken>
}

const entries = new Map<string, Entry>()

/** The cache key: the credential itself is kept only as a digest. */
const keyOf = (provider: string, credential: string) => `${provider}\0${createHash("sha256").update(credential).digest("base64url")}`

/** Waits for `promise`, or rejects as soon as the caller's `signal` aborts (the shared request goes on for the others). */
const until = <A>(promise: Promise<A>, signal: AbortSignal): Promise<A> => {
  if (signal.aborted) {
    // Nobody waits for `promise` then: its failure must not go unhandled (Node ends the process on one).
    promise.catch(() => undefined)
    return Promise.reject(signal.reason)
  }
  return new Promise<A>((resolve, reject) => {
    const onAbort = () => reject(signal.reason)
    signal.addEventListener("abort", onAbort, { once: true })
    promise.then(
      (a) => {
        signal.removeEventListener("abort", onAbort)
        resolve(a)
      },
      (e) => {
        signal.removeEventListener("abort", onAbort)
        reject(e)
      }
    )
  })
}

/**
 * The cached token of `provider` for `credential`, or a new one from `fetch` (called once however
 * many calls wait for it; a failure rejects all of them and is not remembered). `now` is the clock
 * (tests move it).
 */
export const cachedToken = (
  provider: string,
  credential: string,
  fetch: () => Promise<AccessToken>,
  signal: AbortSignal,
  now: () => number = Date.now
): Promise<string> => {
  const key = keyOf(provider, credential)
  let entry = entries.get(key)
  if (entry === undefined) entries.set(key, (entry = {}))
  if (entry.token !== undefined && now() < entry.renewAt!) return Promise.resolve(entry.token.token)
  let pending = entry.pending
  if (pending === undefined) {
    const current = entry
    pending = current.pending = Promise.resolve().then(fetch).then(
      (token) => {
        const issued = now()
        current.token = token
        current.renewAt = token.expiresAt - Math.min(RENEW_BEFORE_MS, (token.expiresAt - issued) / 2)
        current.pending = undefined
        return token
      },
      (e) => {
        current.pending = undefined
        throw e
      }
    )
  }
  return until(pending.then((t) => t.token), signal)
}

/** Forgets every cached token (tests). */
export const clearTokens = (): void => entries.clear()

/** The human part of an OAuth error answer (`error_description`; IBM IAM's `errorMessage`), else the usual mapping. */
const tokenErrorMessage = (body: string): string => {
  const parsed = parseUpstreamJson(body)
  if ("value" in parsed) {
    const json = parsed.value as any
    const found = [json?.error_description, json?.errorMessage].find((m) => typeof m === "string" && m.length > 0)
    if (found) return shownUpstreamText(found)
  }
  return upstreamMessage(body)
}

/** A failed token request as the provider's error: retryable like any answer of that status. */
const tokenRefused = (provider: string, status: number, body: string) => {
  const mapped = fromHttp(provider, status, body)
  return new UpstreamError({
    provider,
    kind: "http",
    status,
    message: `${provider} refused the access token request (HTTP ${status}): ${tokenErrorMessage(body)}`,
    retryable: mapped.retryable
  })
}

/**
 * POSTs a token request and reads `access_token` and `expires_in` (seconds) from the answer;
 * rejects with an UpstreamError naming the provider. `now` is the clock the expiry is counted from.
 */
export const requestToken = (provider: string, request: TokenRequest, now: () => number = Date.now): Promise<AccessToken> =>
  deadline(provider, "issue an access token", async (cancel) => {
    const res = await nodeFetch(request.url, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
      body: new URLSearchParams(request.form).toString()
    }, cancel)
    const text = await res.text()
    if (!res.ok) throw tokenRefused(provider, res.status, text)
    const parsed = parseUpstreamJson(text)
    if (!("value" in parsed)) throw protocolError(provider, "the access token answer is not JSON")
    const body = parsed.value as any
    if (typeof body?.access_token !== "string" || body.access_token === "") throw protocolError(provider, "the access token answer has no access_token")
    const seconds = typeof body.expires_in === "number" && body.expires_in > 0 ? body.expires_in : 3600
    return { token: body.access_token, expiresAt: now() + seconds * 1000 }
  })
