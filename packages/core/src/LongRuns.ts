/**
 * Runs of text without white space longer than a tokenizer can take whole. Byte-pair merging (the
 * token counter) and wink-nlp's tokenizer and stemmer are quadratic in a token's length, and no word
 * is long: both cut such runs into pieces before reading them (Tokens.ts, Ml/Nlp.ts).
 */

/** The runs of more than `max` characters without white space, and a run in pieces of at most `max`. */
export interface RunCutter {
  /** A pattern of the runs longer than `max` (global: for matchAll and replace). */
  readonly long: RegExp
  /** `run` in pieces of `max` characters (whole code points: a character outside the BMP is not split). */
  readonly pieces: (run: string) => Array<string>
}

/** The cutter of runs longer than `max`, its patterns built once. */
export const runCutter = (max: number): RunCutter => {
  const piece = new RegExp(`\\S{1,${max}}`, "gu")
  return { long: new RegExp(`\\S{${max + 1},}`, "gu"), pieces: (run) => run.match(piece) ?? [] }
}
