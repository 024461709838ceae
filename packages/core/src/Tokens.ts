/**
 * Token estimates (o200k tokenizer), used when an upstream reports no usage and by the count_tokens
 * endpoint, and a cheap upper bound for context-window routing. The tokenizer's tables (~3 MB) load
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

const tokenizer = Effect.cached(Effect.promise(async () => {
  const t = await import("gpt-tokenizer")
  t.setMergeCacheSize(MERGE_CACHE_ENTRIES)
  return t
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

const counter = Effect.map(loaded, (t) => countAll(exactCount(t.countTokens)))

/** The tokens of a call's texts, estimated beyond COUNTED_CHARS characters. */
export const countTexts = (texts: ReadonlyArray<string>): Effect.Effect<number> => Effect.map(counter, (count) => count(texts))

export const countText = (text: string): Effect.Effect<number> => countTexts([text])

/** The tokens of a conversation (and of `more` texts sent with it), each message with its framing. */
export const countMessages = (messages: ReadonlyArray<ChatMessage>, more: ReadonlyArray<string> = []): Effect.Effect<number> =>
  Effect.map(
    countTexts([...messages.flatMap((m) => [m.content, ...(m.toolCalls ?? []).flatMap((c) => [c.name, c.arguments])]), ...more]),
    (n) => n + PER_MESSAGE * messages.length
  )

/** A fast upper bound (no tokenizer): about one token per 3 characters. */
export const roughPromptTokens = (messages: ReadonlyArray<ChatMessage>): number =>
  messages.reduce((n, m) => n + PER_MESSAGE + Math.ceil(m.content.length / 3), 0)
