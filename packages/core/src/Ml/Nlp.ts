/**
 * The in-process English NLP pipeline (wink-nlp with its small English model, shipped inside
 * the npm package: nothing is downloaded at run time). Imported and built once, on first use:
 * the model is megabytes of heap that a deployment which never classifies or analyses sentiment
 * should not carry (its load time and size: docs/performance.md).
 */
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

/** Longest text the in-process analysers accept (characters). */
export const MAX_TEXT = 100_000

/** The longest run without spaces the pipeline reads whole (LongRuns.ts). */
const MAX_RUN = 40
const runs = runCutter(MAX_RUN)

/**
 * `text` with every run of more than MAX_RUN characters without spaces cut by a space every MAX_RUN
 * characters. No word is that long, and wink-nlp is quadratic in a token's length (docs/security.md).
 */
export const readable = (text: string) => text.replace(runs.long, (run) => runs.pieces(run).join(" "))
