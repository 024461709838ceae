/** openApiDocument: Effect's `$defs` hoisted into components.schemas, names unique, identical definitions shared. */
import { Effect, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { openApiDocument } from "../../src/Http/OpenApi.ts"
import { open } from "../../src/Http/Route.ts"

const route = (path: string, success: Schema.Schema.Any, body?: Schema.Schema<any, any, never>) =>
  open({ method: "POST", path, tag: "T", summary: path, success, ...(body ? { body } : {}), handle: () => Effect.succeed(null) })

const refsOf = (value: unknown): Array<string> =>
  Array.isArray(value)
    ? value.flatMap(refsOf)
    : value !== null && typeof value === "object"
    ? Object.entries(value).flatMap(([k, v]) => (k === "$ref" && typeof v === "string" ? [v] : refsOf(v)))
    : []

describe("openApiDocument", () => {
  const ThingA = Schema.Struct({ a: Schema.String }).annotations({ identifier: "Thing" })
  const ThingB = Schema.Struct({ b: Schema.Number }).annotations({ identifier: "Thing" })
  const doc = openApiDocument([
    route("/one", Schema.Struct({ thing: ThingA, n: Schema.Int }), Schema.Struct({ n: Schema.Int })),
    route("/two", Schema.Struct({ thing: ThingA })),
    route("/three", Schema.Struct({ thing: ThingB }))
  ], "1.0.0")
  const schemas = doc.components.schemas as Record<string, any>

  it("leaves no #/$defs reference and every reference resolves", () => {
    const refs = refsOf(doc.paths).concat(refsOf(schemas))
    expect(refs.length).toBeGreaterThan(0)
    for (const ref of refs) {
      expect(ref).toMatch(/^#\/components\/schemas\//)
      expect(schemas[ref.slice("#/components/schemas/".length)], ref).toBeDefined()
    }
  })

  it("shares identical definitions and renames different ones under a taken name", () => {
    expect(schemas.Thing).toMatchObject({ properties: { a: { type: "string" } } })
    expect(schemas.Thing_2).toMatchObject({ properties: { b: { type: "number" } } })
    expect(Object.keys(schemas).filter((k) => k.startsWith("Thing"))).toEqual(["Thing", "Thing_2"])
    // Int is met in a request body and a result: one definition.
    expect(Object.keys(schemas).filter((k) => k.startsWith("Int"))).toEqual(["Int"])
    const result = (p: string) => (doc.paths[p] as any).post.responses["200"].content["application/json"].schema.properties.result
    expect(result("/two").properties.thing).toEqual({ $ref: "#/components/schemas/Thing" })
    expect(result("/three").properties.thing).toEqual({ $ref: "#/components/schemas/Thing_2" })
  })

  it("drops Effect's marker $id and $schema keys", () => {
    const text = JSON.stringify(openApiDocument([route("/u", Schema.Struct({ x: Schema.Unknown }))], "1.0.0"))
    expect(text).not.toContain("/schemas/unknown")
    expect(text).not.toContain("$schema")
  })
})
