/**
 * Token estimates (o200k tokenizer), used only when an upstream reports no usage, and a cheap
 * upper bound for context-window routing. The tokenizer's tables (~3 MB) load on first use,
 * not at start, so cold starts (Lambda) do not pay for them.
 */
import { Effect } from "effect"
import type { ChatMessage } from "./Providers/Chat.ts"

/** Per-message framing overhead of chat formats. */
const PER_MESSAGE = 4

const tokenizer = Effect.cached(Effect.promise(() => import("gpt-tokenizer")))
const loaded = Effect.runSync(tokenizer)

/** A counter for text, loading the tokenizer once. */
const counter = Effect.map(loaded, (t) => (text: string) => (text === "" ? 0 : t.countTokens(text)))

export const countText = (text: string): Effect.Effect<number> => Effect.map(counter, (count) => count(text))

export const countMessages = (messages: ReadonlyArray<ChatMessage>): Effect.Effect<number> =>
  Effect.map(counter, (count) =>
    messages.reduce(
      (n, m) => n + PER_MESSAGE + count(m.content) + (m.toolCalls ?? []).reduce((k, c) => k + count(c.name) + count(c.arguments), 0),
      0
    ))

/** A fast upper bound (no tokenizer): about one token per 3 characters. */
export const roughPromptTokens = (messages: ReadonlyArray<ChatMessage>): number =>
  messages.reduce((n, m) => n + PER_MESSAGE + Math.ceil(m.content.length / 3), 0)
