/**
 * Webhook delivery from the outbox: POST the stored body, signed when WEBHOOK_SECRET is set;
 * 2xx is delivered, anything else (a host that does not resolve included) is retried with
 * exponential backoff and jitter until the delivery is older than the maximum age; a URL the SSRF
 * guard refuses is dead at once. Every attempt is counted when its delivery is claimed, before
 * anything is sent (a crash mid-attempt cannot resend the same attempt number), and its outcome
 * recorded after. The target address is re-checked against SSRF at connect time (the DNS answer
 * used is the one checked). The receiver's answer body is never read (cancelled unread).
 * `X-GATEWAY-Request-Id` names the request that submitted the job (when it had one).
 */
import { Context, Duration, Effect, Layer, Option, Redacted } from "effect"
import { GatewayConfig } from "../Config.ts"
import { claimedRound } from "../Jobs/ClaimedRound.ts"
import { type DeliveryRecord, JobStore } from "../Jobs/JobStore.ts"
import { shownUrl } from "../RedactedUrl.ts"
import * as UrlGuard from "../UrlGuard.ts"
import { makeReceivers } from "./Receivers.ts"
import { sign } from "./Signature.ts"

export interface DeliveryOptions {
  /** First retry delay; attempt n waits base x 3^(n-1), capped at one hour, +-20% jitter. */
  readonly retryBaseMs: number
  /** Deliveries older than this stop retrying ("dead"). */
  readonly maxAgeMs: number
  readonly timeoutMs: number
}

export const defaultDeliveryOptions: DeliveryOptions = {
  retryBaseMs: 2_000,
  maxAgeMs: 24 * 60 * 60 * 1000,
  timeoutMs: 10_000
}

/** Deliveries sent at once by one process (and claimed at once: see `drain`). */
export const DELIVERIES_AT_ONCE = 8

export const backoffMs = (attempt: number, baseMs: number, random = Math.random): number => {
  const raw = Math.min(60 * 60 * 1000, baseMs * 3 ** Math.max(0, attempt - 1))
  return Math.round(raw * (0.8 + 0.4 * random()))
}

const makeService = (overrides: Partial<DeliveryOptions>) =>
  Effect.gen(function*() {
    const config = yield* GatewayConfig
    const options: DeliveryOptions = { ...defaultDeliveryOptions, retryBaseMs: config.webhookRetryBaseMs, ...overrides }
    const store = yield* JobStore
    const client = UrlGuard.guardedClient(config.allowPrivateUrls)
    yield* Effect.addFinalizer(() => Effect.promise(() => client.close()))
    const secret = Option.map(config.webhookSecret, Redacted.value)

    const headersFor = (d: DeliveryRecord): Record<string, string> => ({
      "content-type": "application/json",
      "user-agent": `aigw-webhooks/${config.version}`,
      "x-gateway-delivery": d.id,
      // Counted by claimDeliveries: this attempt's number.
      "x-gateway-attempt": String(d.attempts),
      ...(d.requestId ? { "x-gateway-request-id": d.requestId } : {}),
      ...(Option.isSome(secret) ? { "x-gateway-signature": sign(secret.value, d.body), "x-gateway-event": d.event } : {})
    })

    // Receivers that stopped answering hold one delivery slot each (Receivers.ts).
    const receivers = makeReceivers()

    /** Sends `d` (its URL checked again first): its status code, or why none came, and whether its receiver answered at all. */
    const send = (d: DeliveryRecord) =>
      Effect.gen(function*() {
        const checked = yield* Effect.either(UrlGuard.inspect(d.url, { allowPrivate: config.allowPrivateUrls, field: "callbackUrl" }))
        if (checked._tag === "Left") return { checked, statusCode: null, error: checked.left.message }
        const sent = yield* Effect.tryPromise({
          try: (signal) =>
            client.fetch(d.url, { method: "POST", headers: headersFor(d), body: d.body, signal, redirect: "manual" }).then(
              async (res) => {
                await res.body?.cancel().catch(() => undefined)
                return { statusCode: res.status, error: res.ok ? null : `HTTP ${res.status}` }
              }
            ),
          catch: (e) => e
        }).pipe(
          Effect.timeoutFail({ duration: Duration.millis(options.timeoutMs), onTimeout: () => new Error(`no answer within ${options.timeoutMs} ms`) }),
          Effect.catchAll((e) => Effect.succeed({ statusCode: null, error: `delivery failed: ${(e as Error)?.cause ?? (e as Error)?.message ?? e}` }))
        )
        return { checked, ...sent }
      })

    /** One attempt of a claimed delivery (claimDeliveries counted it); never fails (the outcome is recorded). */
    const deliver = (d: DeliveryRecord) =>
      Effect.gen(function*() {
        // The job's owner: receivers are kept per caller (Receivers.ts).
        const owner = Option.match(yield* store.get(d.jobId), { onNone: () => "", onSome: (job) => job.avatarId })
        const started = Date.now()
        const admitted = receivers.admit(owner, d.url, started)
        if (admitted !== "send") {
          // Put back unsent and uncounted: a stalled receiver's once its attempt under way has had its time, a busy one's soon.
          yield* store.putBack(d.id, d.lockedUntil!, started + (admitted === "stalled" ? options.timeoutMs : 0) + backoffMs(1, options.retryBaseMs))
          return false
        }
        const outcome = yield* Effect.onExit(send(d), (exit) =>
            Effect.sync(() => {
              const done = exit._tag === "Success" ? exit.value : undefined
              receivers.ended(owner, d.url, done === undefined || done.checked._tag === "Left" ? "released" : done.statusCode !== null ? "answered" : "unanswered", Date.now())
            }))
        const { checked } = outcome
        const now = Date.now()
        const delivered = outcome.error === null
        const attempt = d.attempts
        // A refused URL never passes; a name that does not resolve (ENOTFOUND, EAI_AGAIN) may later.
        const refused = checked._tag === "Left" && checked.left._tag === "Unprocessable"
        const expired = now - d.createdAt >= options.maxAgeMs || refused
        const next = delivered
          ? { status: "delivered" as const, nextAttemptAt: now, lastError: null }
          : expired
          ? { status: "dead" as const, nextAttemptAt: now, lastError: outcome.error }
          : { status: "pending" as const, nextAttemptAt: now + backoffMs(attempt, options.retryBaseMs), lastError: outcome.error }
        const attemptRecord = { deliveryId: d.id, at: started, statusCode: outcome.statusCode, error: outcome.error, durationMs: now - started }
        const held = yield* store.recordAttempt(attemptRecord, d.lockedUntil!, next)
        if (!held) {
          yield* Effect.logWarning(
            `webhook ${d.id} attempt ${attempt} outlived its lease: the delivery was claimed again, so its state (not ${next.status}) is the new claim's to record`
          )
        } else if (!delivered) yield* Effect.logWarning(`webhook ${d.id} to ${shownUrl(d.url)} attempt ${attempt}: ${outcome.error} -> ${next.status}`)
        return delivered
      })

    /**
     * Delivers what is due now; returns how many deliveries were attempted. It claims only as many as
     * it sends at once: each starts when claimed and ends within its timeout, inside its lease. (A
     * second wave would start a timeout later and could outlive the lease, and another process would
     * claim and send it again.)
     */
    const claim = (n: number) => store.claimDeliveries(Date.now(), n, options.timeoutMs + 5_000)

    const drain = claimedRound(claim, deliver, DELIVERIES_AT_ONCE)

    return { claim, deliver, drain }
  })

export class WebhookDelivery extends Context.Tag("aigw/WebhookDelivery")<
  WebhookDelivery,
  Effect.Effect.Success<ReturnType<typeof makeService>>
>() {}

export const layer = (options: Partial<DeliveryOptions> = {}) => Layer.scoped(WebhookDelivery, makeService(options))
