/**
 * Runs of text without white space longer than a tokenizer can take whole. Byte-pair merging (the
 * token counter) and wink-nlp's tokenizer and stemmer are quadratic in a token's length, and no word
 * is long: both cut such runs into pieces before reading them (Tokens.ts, Ml/Nlp.ts).
 */

/** A pattern of the runs of more than `max` characters without white space. */
export const longRuns = (max: number) => new RegExp(`\\S{${max + 1},}`, "gu")

/** `run` in pieces of `max` characters (whole code points: a character outside the BMP is not split). */
export const piecesOf = (run: string, max: number): Array<string> => run.match(new RegExp(`\\S{1,${max}}`, "gu")) ?? []
