/** Request fields shared by many endpoints and MCP tools. */
import { Schema, SchemaAST as AST } from "effect"

/** `provider`: a provider id or `auto` (the default). */
export const Provider = Schema.optionalWith(Schema.String.pipe(Schema.maxLength(100)), { default: () => "auto" })

/**
 * A body in a framework's own shape (CrewAI's crew, AutoGen's conversation, LangGraph's node and its
 * RunnableConfig): it carries the framework's other settings (callbacks, recursion limits, an agent's
 * backstory), which configure the framework, not the model call. They are passed over, at every depth,
 * where the rest of the gateway's own API refuses a field it does not take (DecodeProblems.strictParseOptions).
 */
export const frameworkPayload = <S extends Schema.Schema.Any>(schema: S): S =>
  schema.annotations({ parseOptions: { onExcessProperty: "ignore" } }) as S

/** Any array, its items not looked at (they are decoded once its length is known to be in bounds). */
const anArray = Schema.declare((u): u is ReadonlyArray<unknown> => Array.isArray(u), { title: "an array" })

/**
 * A bound on what the items of an array hold together: the lengths of the arrays in `fields` of each
 * item, summed (a field that is not an array counts nothing). Bounds each alone multiply: 1,000
 * messages of 500 parts are half a million parts to decode.
 */
export interface TotalBound {
  readonly fields: ReadonlyArray<string>
  readonly max: number
  /** What is counted, for the message ("tool calls"). */
  readonly what: string
}

/** The bounds of a {@link BoundedArray}, with the messages that name them (a default names the count). */
export interface ArrayBounds {
  readonly min?: number
  readonly max: number
  readonly minMessage?: string
  readonly maxMessage?: string
  readonly description?: string
  /** Bounds on what the items hold together, checked on the raw items with the length. */
  readonly totals?: ReadonlyArray<TotalBound>
}

/** The first total of `totals` that the raw `items` exceed, as a problem, or true. */
const withinTotals = (totals: ReadonlyArray<TotalBound>) => (items: ReadonlyArray<unknown>): string | true => {
  for (const { fields, max, what } of totals) {
    let held = 0
    for (const item of items) {
      if (item === null || typeof item !== "object") continue
      for (const field of fields) {
        const value = (item as Record<string, unknown>)[field]
        if (Array.isArray(value)) held += value.length
      }
    }
    if (held > max) return `holds more than ${max} ${what} in all`
  }
  return true
}

/**
 * An array of `min` to `max` items whose length (and `totals`) is checked before any item is decoded. A plain
 * `Schema.Array(item).pipe(Schema.maxItems(max))` decodes every item first (and describes the problems of
 * each), so a hostile body of many bad items held the event loop for seconds before its length was refused.
 * Documented (OpenAPI, MCP input schemas) as that plain array.
 */
export const BoundedArray = <A, I, R>(item: Schema.Schema<A, I, R>, bounds: ArrayBounds): Schema.Schema<ReadonlyArray<A>, ReadonlyArray<I>, R> => {
  const { min = 0, max } = bounds
  const atMost = Schema.maxItems(max, { message: () => bounds.maxMessage ?? `holds at most ${max} items` })
  const atLeast = Schema.minItems(min, { message: () => bounds.minMessage ?? `must hold at least ${min} item${min === 1 ? "" : "s"}` })
  const limits = <T extends ReadonlyArray<unknown>, E, C>(array: Schema.Schema<T, E, C>) => min > 0 ? array.pipe(atLeast, atMost) : array.pipe(atMost)
  const described = bounds.description === undefined ? {} : { description: bounds.description }
  const documented = limits(Schema.Array(item)).annotations(described)
  const raw = bounds.totals === undefined ? limits(anArray) : limits(anArray).pipe(Schema.filter(withinTotals(bounds.totals)))
  const lengthFirst = Schema.compose(raw, Schema.Array(item), { strict: false })
  return lengthFirst.annotations({ ...described, [AST.SurrogateAnnotationId]: documented.ast }) as unknown as Schema.Schema<ReadonlyArray<A>, ReadonlyArray<I>, R>
}
