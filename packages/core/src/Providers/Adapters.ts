/**
 * Chat wires per wire-protocol family: each family is a `ChatWire` (data and pure functions) that
 * the engine (Engine/ProviderCalls.ts) runs over the one transport. A family without a wire here
 * cannot serve chat yet.
 */
import type { ConfiguredProvider } from "../Catalog/Catalog.ts"
import * as Anthropic from "./Anthropic.ts"
import type { ChatWire } from "./Chat.ts"
import * as Gemini from "./Gemini.ts"
import * as OpenAiCompatible from "./OpenAiCompatible.ts"

const chatWires: Readonly<Partial<Record<string, ChatWire>>> = {
  openai: OpenAiCompatible.wire,
  anthropic: Anthropic.wire,
  gemini: Gemini.wire
}

/** The chat wire of a provider's family, if aigw speaks it. */
export const chatWireOf = (p: Pick<ConfiguredProvider, "adapter">): ChatWire | undefined => chatWires[p.adapter]
