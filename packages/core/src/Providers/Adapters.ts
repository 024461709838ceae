/** Adapter per wire-protocol family. A family without an adapter here cannot serve chat yet. */
import type { ChatAdapter } from "./Chat.ts"
import * as Anthropic from "./Anthropic.ts"
import * as Gemini from "./Gemini.ts"
import * as OpenAiCompatible from "./OpenAiCompatible.ts"

export const chatAdapters: Readonly<Partial<Record<string, ChatAdapter>>> = {
  openai: OpenAiCompatible.adapter,
  anthropic: Anthropic.adapter,
  gemini: Gemini.adapter
}
