/**
 * Rule-based guardrails, computed in-process (provider `local`, and `auto`): personal data (e-mail
 * addresses, phone numbers, payment cards passing the Luhn check, IBANs passing mod-97, US
 * social security numbers), credentials (well-known API-key formats, private keys) and
 * prompt-injection phrasings. Deterministic and explainable; not a content-moderation model.
 * A named guardrail vendor (Lakera Guard, Patronus: Providers/Guardrails/) checks the text on its
 * side instead; its verdict is mapped into the same result, with the spans it located as findings.
 */
import { Effect } from "effect"
import type { ConfiguredProvider } from "../Catalog/Catalog.ts"
import { Unprocessable } from "../Errors.ts"
import type { Lane } from "../Http/Lane.ts"
import type { Plan } from "../Plans.ts"
import { boundedVerdict, type GuardrailVerdict } from "../Providers/Guardrails/GuardrailsAdapter.ts"
import { servedBy } from "../Providers/Registry.ts"
import { Routing, type RoutingError } from "../Routing.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { vendorCall } from "./VendorCall.ts"

export type FindingType =
  | "pii.email"
  | "pii.phone"
  | "pii.payment_card"
  | "pii.iban"
  | "pii.us_ssn"
  | "secret.api_key"
  | "secret.private_key"
  | "prompt_injection"

export interface Finding {
  readonly type: FindingType
  readonly start: number
  readonly end: number
  /** The match with all but its edges masked. */
  readonly preview: string
}

const luhn = (digits: string) => {
  let sum = 0
  for (let i = 0; i < digits.length; i++) {
    let d = Number(digits[digits.length - 1 - i])
    if (i % 2 === 1) {
      d *= 2
      if (d > 9) d -= 9
    }
    sum += d
  }
  return sum % 10 === 0
}

const ibanValid = (raw: string) => {
  const iban = raw.replace(/\s+/g, "").toUpperCase()
  const moved = iban.slice(4) + iban.slice(0, 4)
  const numeric = moved.replace(/[A-Z]/g, (c) => String(c.charCodeAt(0) - 55))
  let remainder = 0
  for (const ch of numeric) remainder = (remainder * 10 + Number(ch)) % 97
  return remainder === 1
}

interface Rule {
  readonly type: FindingType
  readonly pattern: RegExp
  readonly accept?: (match: string) => boolean
}

const rules: ReadonlyArray<Rule> = [
  // Starts only where a run of local-part characters does, with RFC 5321's lengths: an unanchored, unbounded
  // local part rescanned a long run from every position (quadratic; docs/security.md).
  { type: "pii.email", pattern: /(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,253}\.[A-Za-z]{2,63}/g },
  { type: "pii.payment_card", pattern: /\b(?:\d[ -]?){12,18}\d\b/g, accept: (m) => luhn(m.replace(/\D/g, "")) },
  { type: "pii.iban", pattern: /\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b/g, accept: ibanValid },
  { type: "pii.us_ssn", pattern: /\b(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}\b/g },
  // Not a run of digit groups that goes on before or after it (a card number that failed its checksum is no phone).
  { type: "pii.phone", pattern: /(?<![\w-]|\d[ .])\+?\d{1,3}?[ .-]?\(?\d{2,4}\)?[ .-]\d{3,4}[ .-]\d{3,4}(?![\w-]|[ .]\d)/g },
  {
    type: "secret.api_key",
    pattern: /\b(?:sk-(?:proj-)?[A-Za-z0-9_-]{20,}|sk-ant-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|ghp_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{40,}|xox[abpr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}|aigw_[A-Za-z0-9_-]{40,})\b/g
  },
  { type: "secret.private_key", pattern: /-----BEGIN (?:RSA |EC |OPENSSH |DSA )?PRIVATE KEY-----/g },
  {
    type: "prompt_injection",
    pattern: /\b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|prior|above|earlier)\s+(?:instructions|prompts|rules|messages)\b|\b(?:reveal|show|print|repeat)\s+(?:me\s+)?(?:your|the)\s+(?:system\s+prompt|hidden\s+instructions|initial\s+instructions)\b|\byou\s+are\s+now\s+(?:DAN|in\s+developer\s+mode)\b|\bjailbreak\b/gi
  }
]

const mask = (s: string) => (s.length <= 4 ? "*".repeat(s.length) : `${s.slice(0, 2)}${"*".repeat(s.length - 4)}${s.slice(-2)}`)

/** Whether [start, end) overlaps a span of `spans` (sorted by start, not overlapping each other): a binary search. */
const overlapsAny = (spans: ReadonlyArray<{ readonly start: number; readonly end: number }>, start: number, end: number) => {
  let lo = 0
  let hi = spans.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (spans[mid]!.end <= start) lo = mid + 1
    else hi = mid
  }
  return lo < spans.length && spans[lo]!.start < end
}

/** All findings in `text`, in order; overlapping matches of later rules are dropped. */
export const scan = (text: string): ReadonlyArray<Finding> => {
  let found: Array<Finding> = []
  for (const rule of rules) {
    // A rule's own matches never overlap each other: each is checked against the earlier rules' findings.
    const earlier = found
    const matches: Array<Finding> = []
    for (const m of text.matchAll(rule.pattern)) {
      const start = m.index ?? 0
      const end = start + m[0].length
      if (rule.accept && !rule.accept(m[0])) continue
      if (overlapsAny(earlier, start, end)) continue
      matches.push({ type: rule.type, start, end, preview: mask(m[0]) })
    }
    if (matches.length > 0) found = [...earlier, ...matches].sort((a, b) => a.start - b.start)
  }
  return found
}

export const redact = (text: string, findings: ReadonlyArray<{ readonly type: string; readonly start: number; readonly end: number }>) => {
  let out = ""
  let at = 0
  for (const f of findings) {
    out += text.slice(at, f.start) + `[${f.type.toUpperCase()}]`
    at = f.end
  }
  return out + text.slice(at)
}

const isLocal = (provider: string) => provider === "auto" || provider === "local" || provider === ""

/** Where a check runs: in-process, or the named vendor (unknown, not configured or above the plan: refused). */
const placement = (avatar: AvatarRecord, provider: string): Effect.Effect<"local" | ConfiguredProvider, RoutingError, Routing> =>
  isLocal(provider)
    ? Effect.succeed("local")
    : Effect.flatMap(Routing, (r) => r.providerFor("guardrails", provider, avatar.plan as Plan))

/** The refusal of a guardrail check that depends only on the request and configuration (answered before admission). */
export const checkProvider = (avatar: AvatarRecord, provider: string) => Effect.asVoid(placement(avatar, provider))

const resultOf = (text: string, findings: ReadonlyArray<{ readonly type: string; readonly start: number; readonly end: number; readonly preview: string }>, categories: ReadonlyArray<string>, flagged: boolean, provider: string) => ({
  passed: !flagged,
  flagged,
  categories,
  findings,
  redactedText: redact(text, findings),
  provider
})

/** A vendor's verdict as findings: spans inside the text, in order, without overlaps. */
const vendorFindings = (text: string, verdict: GuardrailVerdict) => {
  const kept: Array<{ type: string; start: number; end: number; preview: string }> = []
  // Sorted by start, so a span overlaps a kept one exactly when it starts before the last kept end.
  let keptEnd = 0
  for (const s of [...verdict.spans].sort((a, b) => a.start - b.start || b.end - a.end)) {
    if (s.end > text.length || s.start < keptEnd) continue
    kept.push({ type: s.type, start: s.start, end: s.end, preview: mask(text.slice(s.start, s.end)) })
    keptEnd = s.end
  }
  return kept
}

/** Checks through the vendor (recorded in usage). */
const checkWithVendor = (avatar: AvatarRecord, text: string, vendor: ConfiguredProvider) =>
  Effect.gen(function*() {
    const adapter = servedBy(vendor).guardrails
    if (adapter === undefined) return yield* Effect.fail(new Unprocessable({ message: `Provider ${vendor.id} cannot check guardrails.` }))
    const verdict = yield* vendorCall(avatar.id, vendor, "guardrails", Effect.flatMap(adapter.check(vendor, text), boundedVerdict(vendor.id)))
    return resultOf(text, vendorFindings(text, verdict), verdict.categories, verdict.flagged, vendor.id)
  })

/** The in-process check. */
const checkLocally = (text: string) => {
  const findings = scan(text)
  return resultOf(text, findings, [...new Set(findings.map((f) => f.type))], findings.length > 0, "local")
}

/** The guardrail check of POST /v1/guardrails/check. */
export const check = (avatar: AvatarRecord, text: string, provider: string) =>
  Effect.gen(function*() {
    const where = yield* placement(avatar, provider)
    return where === "local" ? checkLocally(text) : yield* checkWithVendor(avatar, text, where)
  })

/** The fast-lane plan of POST /v1/guardrails/check (Http/Lane.ts): the in-process check; a vendor's stays the route's. */
export const lane: Lane<{ readonly text: string; readonly provider: string }> = {
  plan: (_services, _avatar, { provider, text }) => (isLocal(provider) ? async () => checkLocally(text) : undefined)
}
