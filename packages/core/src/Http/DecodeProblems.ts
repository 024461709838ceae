/** How a request part is decoded, and how its problems are told to the client. */
import { Option, ParseResult, SchemaAST as AST } from "effect"
import { cutText } from "../Cut.ts"
import type { ParseOptions } from "effect/SchemaAST"

/**
 * The first problem ends a decoding: collecting every problem of a hostile body (hundreds of thousands of
 * bad items in a few megabytes) and describing each held the event loop for seconds.
 */
export const parseOptions: ParseOptions = { errors: "first", onExcessProperty: "ignore" }

/**
 * `parseOptions` for the gateway's own API, whose every field is the gateway's to map: a field it does not
 * take is refused by name (`temprature: is unexpected`) rather than dropped without a word. The OpenAI and
 * Anthropic surfaces keep their own rules (unknown fields forwarded to upstreams of their wire, else refused
 * by name), and the avatar API its spec's leniency.
 */
export const strictParseOptions: ParseOptions = { errors: "first", onExcessProperty: "error" }

/**
 * A short picture of a value a problem names: the schema library prints the whole value, so a 400 for a
 * megabyte of wrong items cost as long to write as the body took to send, and echoed all of it.
 */
export const preview = (value: unknown, depth = 0): string => {
  if (typeof value === "string") return value.length > 80 ? `${JSON.stringify(value.slice(0, 80))}… (${value.length} characters)` : JSON.stringify(value)
  if (Array.isArray(value)) {
    return depth > 1 || value.length > 8 ? `an array of ${value.length} items` : `[${value.map((v) => preview(v, depth + 1)).join(",")}]`
  }
  if (typeof value === "object" && value !== null) {
    const entries = Object.entries(value)
    return depth > 1 || entries.length > 8
      ? `an object of ${entries.length} fields`
      : `{${entries.map(([k, v]) => `${preview(k, 2)}:${preview(v, depth + 1)}`).join(",")}}`
  }
  return String(value)
}

/**
 * A value named by its kind only (`a number`, `an object`): for input that carries secrets (a Lambda
 * event's headers and body), whose problems must not quote it.
 */
export const kindOf = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "an array" : typeof value === "object" ? "an object" : `a ${typeof value}`

/** Longer than this, the schema library's name of a schema is the schema written out: told by its kind instead. */
const NAME_LIMIT = 100

/** The values of a union of literals a problem lists before it says how many there are. */
const LITERALS_LISTED = 20

/**
 * What a schema expects: an object, an array or a union of them by its kind ("an object", "a string or
 * an array"), never written out as the whole schema; a refinement by its description; anything else as
 * the schema library names it.
 */
const expectedOf = (ast: AST.AST): string => {
  switch (ast._tag) {
    case "TypeLiteral":
      return "an object"
    case "TupleType":
      return "an array"
    case "Union": {
      // JSON has no `undefined`: an optional field's alternative the client cannot send is not named.
      const sendable = ast.types.filter((t) => t._tag !== "UndefinedKeyword")
      if (sendable.length > 0 && sendable.every((t) => t._tag === "Literal")) {
        const listed = sendable.slice(0, LITERALS_LISTED).map((t) => String(t)).join(", ")
        return `one of ${listed}${sendable.length > LITERALS_LISTED ? `, … (${sendable.length} values)` : ""}`
      }
      return [...new Set((sendable.length > 0 ? sendable : ast.types).map(expectedOf))].join(" or ")
    }
    case "Transformation":
      return expectedOf(ast.from)
    case "Suspend":
      return expectedOf(ast.f())
    case "Refinement": {
      const named = Option.firstSomeOf([AST.getDescriptionAnnotation(ast), AST.getTitleAnnotation(ast), AST.getIdentifierAnnotation(ast)])
      return Option.isSome(named) && named.value.length <= NAME_LIMIT ? named.value : expectedOf(ast.from)
    }
    default: {
      const named = String(ast)
      return named.length <= NAME_LIMIT ? named : `${named.slice(0, NAME_LIMIT)}…`
    }
  }
}

const issuesOf = (composite: ParseResult.Composite): ReadonlyArray<ParseResult.ParseIssue> =>
  Array.isArray(composite.issues) ? composite.issues : [composite.issues as ParseResult.ParseIssue]

/**
 * Whether an issue is the value refused at its field itself: a wrong type, or a union whose every
 * alternative refused it so (`"zzz"` for one of several literals), rather than an alternative that got
 * further into the value.
 */
const refusedHere = (issue: ParseResult.ParseIssue): boolean =>
  issue._tag === "Type" || (issue._tag === "Composite" && issue.ast._tag === "Union" && issuesOf(issue).every(refusedHere))

const hasMessage = (ast: AST.AST) => Option.isSome(AST.getMessageAnnotation(ast))

/**
 * The schema whose words refuse a value a union refused at its field: the union's own message, else the
 * one alternative with a message of its own (`n must be 1` of an optional, nullable 1), else the union.
 */
const refusingSchema = (ast: AST.AST): AST.AST => {
  if (ast._tag !== "Union" || hasMessage(ast)) return ast
  const alternatives = (t: AST.AST): ReadonlyArray<AST.AST> => (t._tag === "Union" && !hasMessage(t) ? t.types.flatMap(alternatives) : [t])
  const told = alternatives(ast).filter(hasMessage)
  return told.length === 1 ? told[0]! : ast
}

/**
 * The issue with each wrong value's default message written from its preview (a schema's own message
 * still wins). A union that refused a value at its field is one problem naming what the union takes, not
 * its first alternative's (`Expected one of "code", "math", …`, or the union's own message).
 */
const withPreviews = (issue: ParseResult.ParseIssue, show: (value: unknown) => string): ParseResult.ParseIssue => {
  if (issue._tag === "Composite" && issue.ast._tag === "Union" && refusedHere(issue)) {
    return withPreviews(new ParseResult.Type(refusingSchema(issue.ast), issue.actual), show)
  }
  switch (issue._tag) {
    case "Type":
      return issue.message !== undefined || hasMessage(issue.ast)
        ? issue
        : new ParseResult.Type(issue.ast, issue.actual, `Expected ${expectedOf(issue.ast)}, actual ${show(issue.actual)}`)
    case "Pointer":
      return new ParseResult.Pointer(issue.path, issue.actual, withPreviews(issue.issue, show))
    case "Refinement":
      return new ParseResult.Refinement(issue.ast, issue.actual, issue.kind, withPreviews(issue.issue, show))
    case "Transformation":
      return new ParseResult.Transformation(issue.ast, issue.actual, issue.kind, withPreviews(issue.issue, show))
    case "Composite":
      return new ParseResult.Composite(
        issue.ast,
        issue.actual,
        issuesOf(issue).map((i) => withPreviews(i, show)) as [ParseResult.ParseIssue, ...Array<ParseResult.ParseIssue>],
        issue.output
      )
    default:
      return issue
  }
}

/** A path's key as a problem names it: a client's own key (an unexpected field) may be any length, and is cut. */
// An empty field name shows as `""`: a problem at it read "Invalid request body: : is unexpected".
const keyOf = (key: PropertyKey) => (key === "" ? '""' : cutText(String(key), 100))

/** A field's path as OpenAI's error `param` writes it: `messages.[0].content`. */
const paramOf = (path: ReadonlyArray<PropertyKey>) => path.map((p) => (typeof p === "number" ? `[${p}]` : keyOf(p))).join(".")

/**
 * The problems of a decoding, one per field, and the field of the first: a union's alternatives each
 * report theirs, so only the deepest problems are kept (an alternative that got further says more than
 * one that failed at the field itself), and the first problem of each field.
 */
export const problemsOf = (
  error: ParseResult.ParseError,
  show: (value: unknown) => string = preview
): { readonly text: string; readonly param: string | undefined } => {
  const issues = ParseResult.ArrayFormatter.formatIssueSync(withPreviews(error.issue, show)).map((i) => ({ ...i, at: i.path.map(keyOf).join(".") }))
  // Every proper prefix of an issue's path: an issue at one of them has a deeper one. A set, so a hostile
  // body with many problems costs linear time, not a comparison of every pair.
  const above = new Set<string>()
  for (const i of issues) for (let n = 0; n < i.path.length; n++) above.add(i.path.slice(0, n).map(keyOf).join("."))
  const seen = new Set<string>()
  const kept = issues
    .filter((i) => !above.has(i.at))
    .filter((i) => !seen.has(i.at) && seen.add(i.at) !== undefined)
    .slice(0, 10)
  const first = kept[0]
  return {
    text: kept.map((i) => (i.path.length > 0 ? `${i.at}: ${i.message}` : i.message)).join("; "),
    param: first !== undefined && first.path.length > 0 ? paramOf(first.path) : undefined
  }
}

/** The problems of a decoding, as `field.path: problem; …`; `show` pictures a wrong value (`kindOf`: never quoted). */
export const describeParseError = (error: ParseResult.ParseError, show: (value: unknown) => string = preview): string => problemsOf(error, show).text
