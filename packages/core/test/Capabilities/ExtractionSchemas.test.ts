/** Callers' JSON Schemas for /v1/extract: each compiled apart, so none outlives its call or meets another caller's. */
import { expect, it } from "vitest"
import { BadRequest, Unprocessable } from "../../src/Errors.ts"
import { compileSchema, loadSchemaCompiler } from "../../src/Capabilities/LlmTasks.ts"
import { liveHeapBytes } from "../support/heap.ts"

const compiled = async (schema: Record<string, unknown>) => compileSchema(await loadSchemaCompiler(), schema)

it("lets two callers use the same $id, root or nested, one after the other", async () => {
  const schema = (n: number) => ({
    $id: "https://example.com/person",
    type: "object",
    properties: { name: { $id: "https://example.com/name", type: "string", minLength: n } },
    required: ["name"]
  })
  const first = await compiled(schema(1))
  const second = await compiled(schema(3))
  if (typeof first !== "function" || typeof second !== "function") throw new Error(`refused: ${JSON.stringify([first, second])}`)
  // Each validates by its own schema, not the one that used the $id first.
  expect(first({ name: "Al" })).toBe(true)
  expect(second({ name: "Al" })).toBe(false)
})

it("refuses an invalid schema and a backtracking pattern as before", async () => {
  const invalid = await compiled({ type: "object", properties: { a: { type: "nonsense" } } })
  expect(invalid).toBeInstanceOf(BadRequest)
  expect((invalid as BadRequest).message).toMatch(/^schema is not a valid JSON Schema: schema is invalid: data\/properties\/a\/type must be equal to one of the allowed values/)
  const unknownMeta = await compiled({ $schema: "https://example.com/no-such-meta", type: "object" })
  expect((unknownMeta as BadRequest).message).toMatch(/^schema is not a valid JSON Schema: no schema with key or ref "https:\/\/example.com\/no-such-meta"/)
  const pattern = await compiled({ type: "object", properties: { a: { type: "string", pattern: "^(a)\\1$" } } })
  expect(pattern).toBeInstanceOf(Unprocessable)
  // The meta-schema can still be referred to.
  const meta = await compiled({ type: "object", properties: { s: { $ref: "http://json-schema.org/draft-07/schema#" } } })
  expect(typeof meta).toBe("function")
})

it("keeps nothing of a compiled schema: 3,000 callers' schemas leave the heap as it was", async () => {
  const schemaOf = (i: number) => ({
    type: "object",
    properties: { [`name${i}`]: { type: "string", pattern: `^a${i}`, $id: `https://example.com/n${i}` }, age: { type: "integer", minimum: i } },
    required: [`name${i}`]
  })
  const compileMany = async (from: number, n: number) => {
    for (let i = from; i < from + n; i++) {
      const validate = await compiled(schemaOf(i))
      if (typeof validate !== "function" || !validate({ [`name${i}`]: `a${i}`, age: i })) throw new Error(`schema ${i} refused or wrong`)
    }
  }
  await compileMany(0, 500) // warm: ajv imported, its code compiled
  const before = liveHeapBytes()
  await compileMany(500, 3_000)
  const grownMb = (liveHeapBytes() - before) / 1048576
  // One shared ajv kept about 8 KB per schema (24 MB here).
  expect(grownMb).toBeLessThan(4)
}, 60_000)
