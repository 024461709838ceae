/**
 * In-process sentiment analysis with wink-nlp's English model: a lexicon of scored words,
 * emojis and emoticons with negation handling ("not good" is negative), scored per sentence
 * and for the whole text on a scale from -1 (negative) to +1 (positive).
 */
import { Context, Effect, Layer, Schema } from "effect"
import { nlp, readable, type Wink } from "./Nlp.ts"

export const SentimentLabel = Schema.Literal("positive", "neutral", "negative")
export type SentimentLabel = typeof SentimentLabel.Type

export const SentimentResult = Schema.Struct({
  /** -1 (most negative) to +1 (most positive). */
  score: Schema.Number,
  label: SentimentLabel,
  /** The first `MAX_SENTENCES` sentences, each scored. */
  sentences: Schema.Array(Schema.Struct({ text: Schema.String, score: Schema.Number, label: SentimentLabel })),
  /** How many sentences the text has: more than `sentences` lists when over `MAX_SENTENCES`. */
  sentenceCount: Schema.Number,
  engine: Schema.String
})
export type SentimentResult = typeof SentimentResult.Type

/**
 * Longest text sentiment analyses (characters). Its time grows with the text and more with its
 * sentences (a text of punctuation is a sentence every few characters); this keeps one analysis
 * short enough to hold the event loop only briefly (docs/mcp.md).
 */
export const MAX_SENTIMENT_TEXT = 20_000

/** Sentences an answer lists: a text of many short sentences would otherwise answer megabytes. */
export const MAX_SENTENCES = 100

/** Scores within ±NEUTRAL_BAND are neutral. */
export const NEUTRAL_BAND = 0.05

export const labelOf = (score: number): SentimentLabel =>
  score > NEUTRAL_BAND ? "positive" : score < -NEUTRAL_BAND ? "negative" : "neutral"

const round = (n: number) => Math.round(n * 1000) / 1000

export const ENGINE = "wink-nlp 2.4 (wink-eng-lite-web-model 1.8)"

const makeService = Effect.sync(() => {
  // The English model is loaded on the first analysis, not at start (Nlp.ts).
  const analyze = (wink: Wink, text: string): SentimentResult => {
    const its = wink.its
    const doc = wink.readDoc(readable(text))
    const score = round(doc.out(its.sentiment) as unknown as number)
    const texts = doc.sentences().out() as Array<string>
    const scores = doc.sentences().out(its.sentiment) as unknown as Array<number>
    const sentences = texts.slice(0, MAX_SENTENCES).map((text, i) => {
      const value = round(scores[i] ?? 0)
      return { text, score: value, label: labelOf(value) }
    })
    return { score, label: labelOf(score), sentences, sentenceCount: texts.length, engine: ENGINE }
  }
  return { analyze: (text: string) => Effect.map(nlp, (wink) => analyze(wink, text)) }
})

export class Sentiment extends Context.Tag("aigw/Ml/Sentiment")<Sentiment, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Sentiment, makeService)
