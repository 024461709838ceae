/**
 * Token estimates (o200k tokenizer), used only when an upstream reports no usage, and a cheap
 * upper bound for context-window routing.
 */
import { countTokens } from "gpt-tokenizer"
import type { ChatMessage } from "./Providers/Chat.ts"

/** Per-message framing overhead of chat formats. */
const PER_MESSAGE = 4

export const countText = (text: string): number => (text === "" ? 0 : countTokens(text))

export const countMessages = (messages: ReadonlyArray<ChatMessage>): number =>
  messages.reduce(
    (n, m) => n + PER_MESSAGE + countText(m.content) + (m.toolCalls ?? []).reduce((k, c) => k + countText(c.name) + countText(c.arguments), 0),
    0
  )

/** A fast upper bound (no tokenizer): about one token per 3 characters. */
export const roughPromptTokens = (messages: ReadonlyArray<ChatMessage>): number =>
  messages.reduce((n, m) => n + PER_MESSAGE + Math.ceil(m.content.length / 3), 0)
