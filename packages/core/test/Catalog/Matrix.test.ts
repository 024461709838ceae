/**
 * docs/providers.md carries the provider × endpoint-type matrix generated from the registry.
 * Regenerate it with `AIGW_UPDATE_DOCS=1 npx vitest run packages/core/test/Catalog/Matrix.test.ts`.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { providerMatrix } from "../../src/Catalog/Matrix.ts"

const doc = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../../docs/providers.md")
const START = "<!-- provider-matrix:start (generated: see packages/core/test/Catalog/Matrix.test.ts) -->"
const END = "<!-- provider-matrix:end -->"

describe("provider matrix", () => {
  it("docs/providers.md holds the matrix the registry generates", () => {
    const text = fs.readFileSync(doc, "utf8")
    const start = text.indexOf(START)
    const end = text.indexOf(END)
    expect(start, "docs/providers.md lacks the matrix markers").toBeGreaterThanOrEqual(0)
    const generated = `${START}\n${providerMatrix()}\n${END}`
    if (process.env.AIGW_UPDATE_DOCS === "1") fs.writeFileSync(doc, text.slice(0, start) + generated + text.slice(end + END.length))
    else expect(text.slice(start, end + END.length)).toBe(generated)
  })
})
