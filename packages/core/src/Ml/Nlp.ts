/**
 * The in-process English NLP pipeline (wink-nlp with its small English model, shipped inside
 * the npm package: nothing is downloaded at run time). Loaded once, on first use (~70 ms).
 */
import winkNLP from "wink-nlp"
import model from "wink-eng-lite-web-model"

type Wink = ReturnType<typeof winkNLP>

let instance: Wink | undefined

export const nlp = (): Wink => (instance ??= winkNLP(model))

/** Longest text the in-process analysers accept (characters). */
export const MAX_TEXT = 100_000
