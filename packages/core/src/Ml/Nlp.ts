/**
 * The in-process English NLP pipeline (wink-nlp with its small English model, shipped inside
 * the npm package: nothing is downloaded at run time). Imported and built once, on first use:
 * the model is megabytes of heap that a deployment which never classifies or analyses sentiment
 * should not carry (its load time and size: docs/performance.md).
 */
import { nextTurn } from "../Turns.ts"
import { Effect } from "effect"
import type winkNLP from "wink-nlp"
import { runCutter } from "../LongRuns.ts"
import { once } from "../Once.ts"

export type Wink = ReturnType<typeof winkNLP>

const pipeline = once(async (): Promise<Wink> => {
  const [wink, model] = await Promise.all([import("wink-nlp"), import("wink-eng-lite-web-model")])
  return wink.default(model.default)
})

/** The pipeline, loaded on the first call; a failed load is retried by the next call. */
export const nlp: Effect.Effect<Wink> = Effect.promise(pipeline.get)

/** Longest text the in-process analysers accept (characters); sentiment takes less (Sentiment.ts). */
export const MAX_TEXT = 100_000

/** One analysis at a time: analyses waiting for the same turn would all run in it. */
const analysing = Effect.unsafeMakeSemaphore(1)

/**
 * `analysis` in a turn of the event loop of its own, one analysis per turn, with the network read in
 * between: a batch of analyses would otherwise run back to back in one turn, and every other request,
 * health probe and stream chunk would wait for the last of them.
 */
export const inOwnTurn = <A, E, R>(analysis: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  analysing.withPermits(1)(Effect.zipRight(nextTurn, analysis))

/** The longest run without spaces the pipeline reads whole (LongRuns.ts). */
const MAX_RUN = 40
const runs = runCutter(MAX_RUN)

/**
 * `text` with every run of more than MAX_RUN characters without spaces cut by a space every MAX_RUN
 * characters. No word is that long, and wink-nlp is quadratic in a token's length (docs/security.md).
 */
export const readable = (text: string) => text.replace(runs.long, (run) => runs.pieces(run).join(" "))
