/**
 * Calls to vendors that bill per request, not per token (media, guardrails, translation, memory,
 * documents, sandboxes): their upstream errors become gateway errors (502/504), and each call is
 * recorded in usage with its latency, no known price and no tokens unless the vendor reports them
 * (token-billed image models) — also when it fails or its caller leaves (`ok: false`), as the
 * engine records the calls no upstream answered.
 */
import { Effect, Exit } from "effect"
import type { ConfiguredProvider } from "../Catalog/Catalog.ts"
import type { UpstreamError } from "../Providers/UpstreamError.ts"
import { toGatewayError } from "../Providers/UpstreamError.ts"
import { ProviderCalls } from "../Engine/ProviderCalls.ts"
import type { FallbackCandidate } from "../Routing.ts"
import { Usage } from "../Usage.ts"

/** Who answered (or was asked last): read when the call ends, so a fallback names the last provider tried. */
export type Called = () => { readonly provider: string; readonly model: string }

/** The tokens a vendor reported for an answer, to record beside the call. */
export type ReportedTokens<A> = (value: A) => { readonly promptTokens: number; readonly completionTokens: number } | undefined

/** Runs `call` and records it in usage when it ends, whatever its end. */
export const recordedCall = <A>(avatarId: string, capability: string, called: Called, call: Effect.Effect<A, UpstreamError>, tokensOf?: ReportedTokens<A>) =>
  Effect.flatMap(Usage, (usage) =>
    Effect.suspend(() => {
      const started = performance.now()
      return Effect.onExit(Effect.mapError(call, toGatewayError), (exit) => {
        const tokens = Exit.isSuccess(exit) ? tokensOf?.(exit.value) : undefined
        return usage.record({
          avatarId, ...called(), capability, promptTokens: tokens?.promptTokens ?? 0, completionTokens: tokens?.completionTokens ?? 0, costUSD: 0,
          latencyMs: Math.round(performance.now() - started), estimated: false, ok: Exit.isSuccess(exit)
        })
      })
    }))

/**
 * Runs `call` on the candidates in order as the engine's attempts run (`firstSuccessEffect`: the next after a
 * retryable upstream failure, refused after a graceful stop's notice when made for a request, counted in
 * provider health and the upstream metrics), recorded in usage under the candidate that answered or was tried last.
 */
export const recordedFirstAnswer = <C extends FallbackCandidate, A>(
  avatarId: string,
  capability: string,
  candidates: ReadonlyArray<C>,
  call: (candidate: C) => Effect.Effect<A, UpstreamError>,
  tokensOf?: ReportedTokens<A>
) =>
  Effect.flatMap(ProviderCalls, (calls) =>
    Effect.suspend(() => {
      let tried = candidates[0]!
      const attempt = (candidate: C) => {
        tried = candidate
        return call(candidate)
      }
      const called = () => ({ provider: tried.provider.id, model: tried.model })
      return recordedCall(avatarId, capability, called, calls.firstSuccessEffect(candidates, attempt), tokensOf && ((answered) => tokensOf(answered.value)))
    }))

/** One call to a task vendor, recorded under its id (the vendor is the model): `recordedFirstAnswer` of one candidate. */
export const vendorCall = <A>(avatarId: string, vendor: ConfiguredProvider, capability: string, call: Effect.Effect<A, UpstreamError>) =>
  Effect.map(recordedFirstAnswer(avatarId, capability, [{ provider: vendor, model: vendor.id }], () => call), (answered) => answered.value)
