/** Checks on JSON text before it is parsed: used by every edge (Http/Route.ts) and for uploaded JSON documents. */

export const NUL_PROBLEM = "NUL characters (\\u0000) are not accepted."
export const LONE_SURROGATE_PROBLEM = "a \\u escape of half a UTF-16 surrogate pair (\\uD800 to \\uDFFF without its other half) is no character: send valid Unicode."

const tooManyItems = (maxItems: number) => `JSON holds more than ${maxItems} array items and object members.`
const tooManyContainers = (maxContainers: number) => `JSON holds more than ${maxContainers} objects and arrays.`
const tooManyMembers = (maxMembers: number) => `JSON holds an object of more than ${maxMembers} members.`

/** Whether the escape starting at the backslash at `at` is `\u0000`. */
const isNulEscape = (text: string, at: number) => text.charCodeAt(at + 1) === 0x75 && text.startsWith("0000", at + 2)

/** The surrogate an escape `\uD800`…`\uDFFF` at the backslash at `at` stands for, else -1. */
const surrogateEscape = (text: string, at: number): number => {
  if (text.charCodeAt(at) !== 0x5c || text.charCodeAt(at + 1) !== 0x75 || (text.charCodeAt(at + 2) | 0x20) !== 0x64) return -1
  const hex = text.slice(at + 2, at + 6)
  const unit = /^[0-9a-f]{4}$/i.test(hex) ? parseInt(hex, 16) : -1
  return unit >= 0xd800 && unit <= 0xdfff ? unit : -1
}

/** What a JSON text may hold before it is parsed. */
export interface JsonTextLimits {
  /** Nesting of arrays and objects: a deep value overflows the stack of every recursive step after JSON.parse. */
  readonly maxDepth: number
  /** Array items and object members (counted as commas and opening brackets, an upper bound). */
  readonly maxItems?: number | undefined
  /** Objects and arrays: each is an allocation, what a parse spends most on (11 million `{}` held the event loop 11 s). */
  readonly maxContainers?: number | undefined
  /** Members of one object: each distinct name is hashed into it (3.5 million in one object held the event loop 9–19 s). */
  readonly maxMembers?: number | undefined
  /**
   * Text that cannot be kept as sent refused: NUL characters, raw or escaped (PostgreSQL cannot store
   * them), and an escaped half of a surrogate pair (UTF-8 cannot hold it: stored, it became U+FFFD, and
   * two different passwords one). True for what clients send.
   */
  readonly refuseUnstorable?: boolean | undefined
}

/** The members counted so far in the object open at each depth (reused: the scan is synchronous). */
let membersAt = new Int32Array(130)

/**
 * Why a JSON text must not be parsed, or undefined: a bound of `limits` passed, or (`refuseUnstorable`)
 * a NUL character in a string, raw or as the escape `\u0000`, or an escaped lone surrogate. One linear
 * pass before JSON.parse: structure is read character by character, a string's contents from escape to
 * escape with indexOf, which searches natively (most of a request's text is inside strings).
 */
export const jsonTextProblem = (text: string, limits: JsonTextLimits): string | undefined => {
  const { maxDepth } = limits
  const maxItems = limits.maxItems ?? Infinity
  const maxContainers = limits.maxContainers ?? Infinity
  const maxMembers = limits.maxMembers ?? Infinity
  const refuseUnstorable = limits.refuseUnstorable ?? true
  if (membersAt.length < maxDepth + 2) membersAt = new Int32Array(maxDepth + 2)
  if (refuseUnstorable && text.indexOf("\u0000") !== -1) return NUL_PROBLEM
  let depth = 0
  let items = 0
  let containers = 0
  // The next quote and backslash at or after the position being read, each searched again only
  // once passed (linear in the text): -2 before the first search, -1 once none is left. (Searched
  // first inside the loop: with the first search before it, V8 compiled the loop several times
  // slower for a text without backslashes.)
  let quote = -2
  let escape = -2
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      // A string: its contents up to the closing quote, skipping each escape whole (`\"` does not end it).
      let at = i + 1
      for (;;) {
        if (quote !== -1 && quote < at) quote = text.indexOf('"', at)
        if (escape !== -1 && escape < at) escape = text.indexOf("\\", at)
        if (quote === -1) {
          // Unterminated (JSON.parse refuses it): an escaped NUL in it is still the problem named.
          if (refuseUnstorable) for (let e = escape; e !== -1; e = text.indexOf("\\", e + 2)) if (isNulEscape(text, e)) return NUL_PROBLEM
          return undefined
        }
        if (escape === -1 || escape > quote) break
        if (refuseUnstorable) {
          if (isNulEscape(text, escape)) return NUL_PROBLEM
          const unit = surrogateEscape(text, escape)
          if (unit >= 0xdc00) return LONE_SURROGATE_PROBLEM
          if (unit !== -1) {
            // A high half: its low half must be the next escape.
            if (surrogateEscape(text, escape + 6) < 0xdc00) return LONE_SURROGATE_PROBLEM
            at = escape + 12
            continue
          }
        }
        at = escape + 2
      }
      i = quote
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > maxDepth) return `JSON nested deeper than ${maxDepth} levels.`
      if (++items > maxItems) return tooManyItems(maxItems)
      if (++containers > maxContainers) return tooManyContainers(maxContainers)
      membersAt[depth] = 0
    } else if (c === 0x7d || c === 0x5d) depth--
    else if (c === 0x2c) {
      if (++items > maxItems) return tooManyItems(maxItems)
    } else if (c === 0x3a && depth > 0 && ++membersAt[depth]! > maxMembers) return tooManyMembers(maxMembers)
  }
  return undefined
}

const PROTO = "__proto__"

/** Whether a JSON text may have "__proto__" as a key: it spells the name, or has \u escapes, which may. */
const mayHoldProtoKey = (text: string): boolean => text.includes(PROTO) || text.includes("\\u")

/**
 * Why a parsed JSON value must not be used, or undefined: an own "__proto__" key anywhere in it.
 * JSON.parse makes it an ordinary property, but a copy by assignment turns it into the copy's
 * prototype (Effect's schema decode copies records and kept fields that way), so its fields would
 * reach the gateway as inherited, unvalidated values. Refused rather than dropped: no API of the
 * gateway has a field of that name. `text` is the value's source: only a text that may hold the
 * name is walked.
 */
export const protoKeyProblem = (text: string, value: unknown): string | undefined => {
  if (!mayHoldProtoKey(text)) return undefined
  // The path to the value being looked at (one array, pushed and popped); depth is bounded by
  // jsonTextProblem's check, which runs first.
  const path: Array<string | number> = []
  const found = (): string => `the field name ${PROTO} is not accepted${path.length === 0 ? "" : ` (at ${path.join(".")})`}.`
  const walk = (v: unknown): string | undefined => {
    if (typeof v !== "object" || v === null) return undefined
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        path.push(i)
        const problem = walk(v[i])
        path.pop()
        if (problem !== undefined) return problem
      }
      return undefined
    }
    if (Object.prototype.hasOwnProperty.call(v, PROTO)) return found()
    for (const k in v) {
      path.push(k)
      const problem = walk((v as Record<string, unknown>)[k])
      path.pop()
      if (problem !== undefined) return problem
    }
    return undefined
  }
  return walk(value)
}

/** A request's JSON text parsed, or why it is refused: `malformed` for text JSON.parse rejects. */
/**
 * V8's parse error without the stretch of the body it quotes (`…, ..."password":MySecretPa"... is not valid
 * JSON`): a body may hold a password or a key, and an error message is shown and logged.
 */
const withoutQuote = (message: string) => message.replace(/, (?:\.\.\.)?".*"(?:\.\.\.)? is not valid JSON$/s, "")

export type ParsedJson = { readonly value: unknown } | { readonly problem: string; readonly malformed: boolean }

/**
 * The checks every JSON request body passes (the HTTP edge, /mcp): depth, objects and arrays, and
 * NUL characters before parsing, then JSON.parse, then prototype keys.
 */
export const parseJsonText = (text: string, limits: JsonTextLimits): ParsedJson => {
  const problem = jsonTextProblem(text, limits)
  if (problem !== undefined) return { problem, malformed: false }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (e) {
    return { problem: withoutQuote((e as Error).message), malformed: true }
  }
  const proto = protoKeyProblem(text, value)
  return proto === undefined ? { value } : { problem: proto, malformed: false }
}

/**
 * What an upstream's JSON (an answer, a stream event, an error body, a job's output) may hold. Its
 * bytes are bounded (AIGW_MAX_UPSTREAM_RESPONSE_BYTES), but 32 MiB of `{},` held the event loop
 * 13 s and took 900 MB to parse: objects and arrays are bounded too, with room for the largest real
 * answers (an embeddings batch of a couple of million numbers, a parsed document of a few hundred
 * thousand elements), and so are the members of one object (a moderation answer names at most 1,000
 * categories); nesting is bounded for whatever reads the answer recursively afterwards
 * (serialising it to the client). Escaped NULs are the model's text: not refused.
 */
export const UPSTREAM_JSON_LIMITS: JsonTextLimits = { maxDepth: 128, maxItems: 4_000_000, maxContainers: 1_000_000, maxMembers: 100_000, refuseUnstorable: false }

/** A text shorter than this holds nothing a parse or a recursive read could choke on: it is parsed without the scan. */
const SCANNED_FROM = 4_096

/** An upstream's JSON text parsed, or why not: a bound of UPSTREAM_JSON_LIMITS passed, or `malformed` text. */
export const parseUpstreamJson = (text: string): ParsedJson => {
  if (text.length >= SCANNED_FROM) {
    const problem = jsonTextProblem(text, UPSTREAM_JSON_LIMITS)
    if (problem !== undefined) return { problem, malformed: false }
  }
  try {
    return { value: JSON.parse(text) }
  } catch (e) {
    return { problem: withoutQuote((e as Error).message), malformed: true }
  }
}

/**
 * The fields of a parsed JSON object outside `known` (null counts as absent), or undefined when there
 * are none: what a request carries beyond the modelled fields, or an upstream answer beyond the
 * neutral result, to forward or refuse. A "__proto__" field is left out: a request with one is refused
 * before it gets here (`protoKeyProblem`), and one an upstream sends would reach clients, where merging
 * the answer into an object makes it that object's prototype.
 */
export const fieldsOutside = (o: unknown, known: ReadonlySet<string>): Record<string, unknown> | undefined => {
  if (typeof o !== "object" || o === null) return undefined
  let out: Record<string, unknown> | undefined
  // for-in, not Object.keys or entries: this runs on every stream event, and those allocate an array
  // (and a pair per field). JSON.parse's objects have no enumerable inherited keys.
  for (const k in o) {
    const v = (o as Record<string, unknown>)[k]
    if (known.has(k) || k === PROTO || v === null || v === undefined) continue
    ;(out ??= {})[k] = v
  }
  return out
}

/** Why a text is not JSON, without quoting it (`withoutQuote`): for configuration values, where a secret sits. */
export const jsonSyntaxProblem = (error: unknown): string =>
  // Not even the one character node names: a secret written without quotes begins there.
  `not valid JSON (${withoutQuote(error instanceof Error ? error.message : String(error)).replace(/^Unexpected token '.*?'/s, "Unexpected token")})`
