/**
 * What a guardrail vendor (Lakera Guard, Patronus) answers for one text: its verdict, the
 * categories it raised, and the spans it located. The capability (Capabilities/Guardrails.ts)
 * turns this into the gateway's result (masked previews, redacted text).
 */
import { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { MAX_MODERATION_CATEGORIES } from "../OpenAiMedia.ts"
import { protocolError, type UpstreamError } from "../UpstreamError.ts"

export interface VendorSpan {
  /** The vendor's name for what it found, e.g. `pii/email` (Lakera) or `pii` (Patronus). */
  readonly type: string
  readonly start: number
  /** Exclusive. */
  readonly end: number
}

export interface GuardrailVerdict {
  readonly flagged: boolean
  readonly categories: ReadonlyArray<string>
  readonly spans: ReadonlyArray<VendorSpan>
}

export interface GuardrailsAdapter {
  readonly check: (provider: ConfiguredProvider, text: string) => Effect.Effect<GuardrailVerdict, UpstreamError>
}

/** The spans of a vendor's list that are well-formed offsets (others are the vendor's noise, not findings). */
export const spansIn = (list: unknown, typeOf: (item: any) => unknown, startOf: (item: any) => unknown, endOf: (item: any) => unknown): Array<VendorSpan> =>
  (Array.isArray(list) ? list : []).flatMap((item) => {
    const type = typeOf(item)
    const start = startOf(item)
    const end = endOf(item)
    return typeof type === "string" && Number.isInteger(start) && Number.isInteger(end) && (start as number) >= 0 && (end as number) > (start as number)
      ? [{ type, start: start as number, end: end as number }]
      : []
  })

/** More spans than any real finding list (a span per word of a 10,000-word text). */
export const MAX_GUARDRAIL_SPANS = 10_000

/**
 * A vendor's verdict, bounded whichever vendor gave it: at most MAX_MODERATION_CATEGORIES categories
 * (as moderation) and MAX_GUARDRAIL_SPANS spans. 650,000 of them once held the event loop 2.4 s and
 * answered 6 MB.
 */
export const boundedVerdict = (provider: string) => (verdict: GuardrailVerdict): Effect.Effect<GuardrailVerdict, UpstreamError> =>
  verdict.categories.length > MAX_MODERATION_CATEGORIES
    ? Effect.fail(protocolError(provider, `the guard answer names more than ${MAX_MODERATION_CATEGORIES} categories`))
    : verdict.spans.length > MAX_GUARDRAIL_SPANS
    ? Effect.fail(protocolError(provider, `the guard answer locates more than ${MAX_GUARDRAIL_SPANS} spans`))
    : Effect.succeed(verdict)
