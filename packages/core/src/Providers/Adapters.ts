/**
 * Chat adapters per wire-protocol family: each family is a `ChatWire` (data and pure functions),
 * run here over the Effect transport. A family without a wire here cannot serve chat yet.
 */
import { Effect } from "effect"
import * as Anthropic from "./Anthropic.ts"
import type { ChatAdapter, ChatWire } from "./Chat.ts"
import * as Gemini from "./Gemini.ts"
import { decodeEach } from "./internal/events.ts"
import { postJson, postSse } from "./internal/http.ts"
import * as OpenAiCompatible from "./OpenAiCompatible.ts"
import { UpstreamError } from "./UpstreamError.ts"

export const chatWires: Readonly<Partial<Record<string, ChatWire>>> = {
  openai: OpenAiCompatible.wire,
  anthropic: Anthropic.wire,
  gemini: Gemini.wire
}

const fromWire = (wire: ChatWire): ChatAdapter => ({
  complete: (target, request) => {
    const { body, headers, url } = wire.request(target, request, false)
    return Effect.flatMap(postJson(target.provider.id, url, headers, body), (answer) => {
      const result = wire.result(target.provider.id, answer)
      return result instanceof UpstreamError ? Effect.fail(result) : Effect.succeed(result)
    })
  },
  stream: (target, request) => {
    const { body, headers, url } = wire.request(target, request, true)
    return Effect.map(postSse(target.provider.id, url, headers, body), (events) => decodeEach(events, wire.events(target.provider.id)))
  }
})

export const chatAdapters: Readonly<Partial<Record<string, ChatAdapter>>> = Object.fromEntries(
  Object.entries(chatWires).map(([family, wire]) => [family, fromWire(wire!)])
)
