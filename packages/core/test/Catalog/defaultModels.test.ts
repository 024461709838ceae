import { describe, expect, it } from "vitest"
import { defaultModelData } from "../../src/Catalog/defaultModels.data.ts"
import { modelData } from "../../src/Catalog/models.data.ts"
import { providerData } from "../../src/Catalog/providers.data.ts"

const kinds = ["chat", "embeddings"] as const

describe("default model data", () => {
  it("names only catalogued providers that offer the kind and have no catalogued model of it", () => {
    const problems: Array<string> = []
    for (const [id, entry] of Object.entries(defaultModelData)) {
      const provider = providerData.find((p) => p.id === id)
      if (provider === undefined) {
        problems.push(`${id}: not a catalogued provider`)
        continue
      }
      if (entry.chat === undefined && entry.embeddings === undefined) problems.push(`${id}: names no model`)
      for (const kind of kinds) {
        const model = entry[kind]
        if (model === undefined) continue
        if (model.trim() === "" || model !== model.trim()) problems.push(`${id}: blank or padded ${kind} id`)
        if (!(provider.offers as ReadonlyArray<string>).includes(kind)) problems.push(`${id}: does not offer ${kind}`)
        if (modelData.some((m) => m.provider === id && m.kind === kind)) {
          problems.push(`${id}: has a catalogued ${kind} model, so needs no default`)
        }
      }
      if (!/^https:\/\/\S+$/.test(entry.source)) problems.push(`${id}: source is not an https URL`)
    }
    expect(problems).toEqual([])
  })

  it("covers the providers it is meant to cover", () => {
    for (const id of ["openrouter", "ollama", "bedrock", "vertex", "cloudflare", "databricks", "jina"]) {
      expect(defaultModelData[id]).toBeDefined()
    }
    for (const id of ["azure-openai", "vllm", "lmstudio", "llamacpp"]) {
      expect(defaultModelData[id]).toBeUndefined()
    }
  })
})
