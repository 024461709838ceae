/**
 * Token estimates (o200k tokenizer), used when an upstream reports no usage and by the count_tokens
 * endpoint, and for context-window routing (with a cheap bound for prompts that fit every window). The tokenizer's tables (~3 MB) load
 * on first use, not at start, so cold starts (Lambda) do not pay for them.
 *
 * The tokenizer runs on the event loop, and on hostile text it is slow: byte-pair merging is quadratic
 * in the length of a run without spaces, and text of random words defeats its cache. So a run longer
 * than MAX_RUN is counted in pieces of that length, and a call's texts beyond COUNTED_CHARS are
 * estimated from evenly spaced samples of them (docs/quota.md, "Token estimates").
 */
import { Effect } from "effect"
import { runCutter } from "./LongRuns.ts"
import type { ChatMessage } from "./Providers/Chat.ts"

/** Per-message framing overhead of chat formats. */
const PER_MESSAGE = 4

/** The longest run of non-space characters given to the tokenizer whole. */
const MAX_RUN = 64

/** Characters of one call counted exactly; a call with more is estimated from samples of this many. */
export const COUNTED_CHARS = 100_000

/** The length of one sample of a long call's text. */
const SAMPLE_CHARS = 2_000

/** Entries of the tokenizer's merge cache: its eviction slows down as a large cache churns. */
const MERGE_CACHE_ENTRIES = 2_000

/** The tokenizer's count of a call's texts, once its tables have loaded (for `messageTokensNow`). */
let loadedCount: ((texts: ReadonlyArray<string>) => number) | undefined

const tokenizer = Effect.cached(Effect.promise(async () => {
  const t = await import("gpt-tokenizer")
  t.setMergeCacheSize(MERGE_CACHE_ENTRIES)
  loadedCount = countAll(exactCount(t.countTokens))
  return loadedCount
}))
const loaded = Effect.runSync(tokenizer)

/**
 * Loads the tokenizer now if it is not loaded yet: a graceful stop does so at its start, so that the
 * streams it ends later (whose usage is estimated when the upstream reported none) write their final
 * event at once, not after a cold load of the tables.
 */
export const warmUp = (): void => void Effect.runPromise(loaded).catch(() => undefined)

const runs = runCutter(MAX_RUN)

/** The tokenizer's count of a text, its runs without spaces cut into pieces of MAX_RUN characters. */
export const exactCount = (countTokens: (text: string) => number) => (text: string): number => {
  if (text === "") return 0
  let total = 0
  let from = 0
  for (const run of text.matchAll(runs.long)) {
    if (run.index > from) total += countTokens(text.slice(from, run.index))
    for (const piece of runs.pieces(run[0])) total += countTokens(piece)
    from = run.index + run[0].length
  }
  return from < text.length ? total + countTokens(text.slice(from)) : total
}

/** Where a sample near `at` begins: at the next space (within MAX_RUN), where the tokenizer starts a word. */
const wordStart = (text: string, at: number) => {
  const limit = Math.min(text.length, at + MAX_RUN)
  for (let i = at; i < limit; i++) if (text.charCodeAt(i) <= 32) return i
  return at
}

/**
 * The tokens of a call's texts: exact up to COUNTED_CHARS, else the token rate of evenly spaced samples
 * (COUNTED_CHARS characters in all) times the texts' length.
 */
export const countAll = (count: (text: string) => number) => (texts: ReadonlyArray<string>): number => {
  const length = texts.reduce((n, t) => n + t.length, 0)
  if (length <= COUNTED_CHARS) return texts.reduce((n, t) => n + count(t), 0)
  const text = texts.join("\n")
  const samples = Math.floor(COUNTED_CHARS / SAMPLE_CHARS)
  const stride = text.length / samples
  let tokens = 0
  let chars = 0
  for (let s = 0; s < samples; s++) {
    const start = wordStart(text, Math.floor(s * stride))
    const sample = text.slice(start, wordStart(text, start + SAMPLE_CHARS))
    tokens += count(sample)
    chars += sample.length
  }
  return chars === 0 ? 0 : Math.round((tokens / chars) * length)
}

/** The tokens of a call's texts, estimated beyond COUNTED_CHARS characters. */
export const countTexts = (texts: ReadonlyArray<string>): Effect.Effect<number> => Effect.map(loaded, (count) => count(texts))

export const countText = (text: string): Effect.Effect<number> => countTexts([text])

/** Visits what of a conversation is counted: each message's text and its tool calls' names and arguments. */
const eachText = (messages: ReadonlyArray<ChatMessage>, visit: (text: string) => void) => {
  for (const m of messages) {
    visit(m.content)
    for (const c of m.toolCalls ?? []) {
      visit(c.name)
      visit(c.arguments)
    }
  }
}

/** The texts the tokenizer counts for a conversation, and `more` texts sent with it. */
const textsOf = (messages: ReadonlyArray<ChatMessage>, more: ReadonlyArray<string>) => {
  const texts: Array<string> = []
  eachText(messages, (text) => texts.push(text))
  texts.push(...more)
  return texts
}

/** A conversation's tokens by `count`: its texts (and `more` sent with it), each message with its framing. */
const messageTokens = (count: (texts: ReadonlyArray<string>) => number, messages: ReadonlyArray<ChatMessage>, more: ReadonlyArray<string>) =>
  count(textsOf(messages, more)) + PER_MESSAGE * messages.length

/** The tokens of a conversation (and of `more` texts sent with it), each message with its framing. */
export const countMessages = (messages: ReadonlyArray<ChatMessage>, more: ReadonlyArray<string> = []): Effect.Effect<number> =>
  Effect.map(loaded, (count) => messageTokens(count, messages, more))

/** `countMessages` at once when the tokenizer has loaded; undefined before (`countMessages` loads it). */
export const messageTokensNow = (messages: ReadonlyArray<ChatMessage>): number | undefined =>
  loadedCount === undefined ? undefined : messageTokens(loadedCount, messages, [])

/**
 * A bound on a conversation's tokens without the tokenizer: the characters `countMessages` counts, and
 * each message's framing. A token is at least a character for nearly all text (an emoji or a rare symbol
 * may be several), where prose runs 4 to 5 characters a token: a bound that tells a prompt fits a
 * context window, never that it does not (Routing's `promptTokensNow`).
 */
export const promptCharacters = (messages: ReadonlyArray<ChatMessage>): number => {
  let characters = PER_MESSAGE * messages.length
  eachText(messages, (text) => (characters += text.length))
  return characters
}
