/**
 * A tool's unmapped `function` fields (e.g. OpenAI's `strict`): the OpenAI wire sends them as they
 * came; every other wire family refuses the call naming the field instead of dropping it.
 */
import { describe, expect, it } from "vitest"
import { unsupported as anthropic } from "../../src/Providers/Anthropic.ts"
import { unsupported as bedrock } from "../../src/Providers/Bedrock.ts"
import type { ChatRequest } from "../../src/Providers/Chat.ts"
import { unsupported as gemini } from "../../src/Providers/Gemini.ts"
import { toWireRequest } from "../../src/Providers/OpenAiCompatible.ts"

const parameters = { type: "object", properties: { city: { type: "string" } } }
const request: ChatRequest = {
  model: "m",
  messages: [{ role: "user", content: "Weather in Oslo?" }],
  tools: [{ name: "get_weather", parameters, extra: { strict: true } }]
}

describe("a tool's unmapped function fields", () => {
  it("reach an OpenAI-format upstream unchanged", () => {
    expect(toWireRequest("openai", request, false).tools).toEqual([{ type: "function", function: { strict: true, name: "get_weather", parameters } }])
  })

  it("are refused by name by the other wire families", () => {
    for (const refuse of [anthropic, gemini, bedrock]) expect(refuse(request)).toMatch(/^tools\[\]\.function\.strict is not supported/)
    const plain = { ...request, tools: [{ name: "get_weather", parameters }] }
    for (const refuse of [anthropic, gemini, bedrock]) expect(refuse(plain)).toBeUndefined()
  })
})
