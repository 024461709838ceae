import { describe, expect, it } from "vitest"
import { data, validate } from "../../src/Catalog/Catalog.ts"
import { modelData } from "../../src/Catalog/models.data.ts"
import { providerData } from "../../src/Catalog/providers.data.ts"

describe("catalogue data", () => {
  it("validates: 103 providers, at least 23 models over several providers", () => {
    expect(data.providers.length).toBe(103)
    expect(data.models.length).toBeGreaterThanOrEqual(23)
    expect(new Set(data.models.map((m) => m.provider)).size).toBeGreaterThanOrEqual(8)
    for (const id of ["openai", "anthropic", "google", "mistral", "groq", "together-ai"]) {
      expect(data.providers.some((p) => p.id === id)).toBe(true)
    }
  })
  it("rejects a bad entry with its problem named", () => {
    const broken = [...providerData, { ...providerData[0], id: "Bad Id" }]
    expect(() => validate(broken, modelData)).toThrow(/id/)
    expect(() => validate([...providerData, providerData[0]], modelData)).toThrow(/duplicate provider id openai/)
    expect(() => validate(providerData, [...modelData, { ...modelData[0], id: "x", provider: "nope" }])).toThrow(/unknown provider nope/)
    expect(() => validate(providerData, [{ ...modelData[0], inputPer1kUSD: -1 }])).toThrow()
  })
  it("every chat model's price is positive; embedding and rerank models have no output price", () => {
    for (const m of data.models) {
      expect(m.inputPer1kUSD).toBeGreaterThan(0)
      if (m.kind === "embeddings" || m.kind === "rerank") expect(m.outputPer1kUSD).toBe(0)
      else expect(m.outputPer1kUSD).toBeGreaterThan(0)
    }
  })
})
