/**
 * Rule-based guardrails, computed in-process (provider `local`): personal data (e-mail
 * addresses, phone numbers, payment cards passing the Luhn check, IBANs passing mod-97, US
 * social security numbers), credentials (well-known API-key formats, private keys) and
 * prompt-injection phrasings. Deterministic and explainable; not a content-moderation model.
 */
import { Effect } from "effect"
import { Unprocessable } from "../Errors.ts"

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
  { type: "pii.email", pattern: /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g },
  { type: "pii.payment_card", pattern: /\b(?:\d[ -]?){12,18}\d\b/g, accept: (m) => luhn(m.replace(/\D/g, "")) },
  { type: "pii.iban", pattern: /\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b/g, accept: ibanValid },
  { type: "pii.us_ssn", pattern: /\b(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}\b/g },
  { type: "pii.phone", pattern: /(?<![\w-])\+?\d{1,3}?[ .-]?\(?\d{2,4}\)?[ .-]\d{3,4}[ .-]\d{3,4}(?![\w-])/g },
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

/** All findings in `text`, in order; overlapping matches of later rules are dropped. */
export const scan = (text: string): ReadonlyArray<Finding> => {
  const found: Array<Finding> = []
  for (const rule of rules) {
    for (const m of text.matchAll(rule.pattern)) {
      const start = m.index ?? 0
      const end = start + m[0].length
      if (rule.accept && !rule.accept(m[0])) continue
      if (found.some((f) => start < f.end && end > f.start)) continue
      found.push({ type: rule.type, start, end, preview: mask(m[0]) })
    }
  }
  return found.sort((a, b) => a.start - b.start)
}

export const redact = (text: string, findings: ReadonlyArray<Finding>) => {
  let out = ""
  let at = 0
  for (const f of findings) {
    out += text.slice(at, f.start) + `[${f.type.toUpperCase()}]`
    at = f.end
  }
  return out + text.slice(at)
}

/** The refusal of a guardrail check that depends only on the request (answered before admission). */
export const checkProvider = (provider: string) =>
  provider === "auto" || provider === "local"
    ? Effect.void
    : Effect.fail(new Unprocessable({ message: `Guardrails run in-process (provider local); provider ${provider} is not supported for guardrails.` }))

/** The guardrail check of POST /v1/guardrails/check. */
export const check = (text: string, provider: string) =>
  Effect.zipRight(
    checkProvider(provider),
    Effect.sync(() => {
      const findings = scan(text)
      const categories = [...new Set(findings.map((f) => f.type))]
      return {
        passed: findings.length === 0,
        flagged: findings.length > 0,
        categories,
        findings,
        redactedText: redact(text, findings),
        provider: "local"
      }
    })
  )
