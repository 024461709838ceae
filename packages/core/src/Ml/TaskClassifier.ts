/**
 * In-process task classification: a multinomial naive Bayes text classifier
 * (wink-naive-bayes-text-classifier) trained on first use on the labelled requests of
 * taskExamples.data.ts, with wink-nlp for tokenisation, stop words and stemming. Training takes
 * a few milliseconds (plus loading the English model once); no model is downloaded.
 */
import { Context, Effect, Layer, Schema } from "effect"
import classifier from "wink-naive-bayes-text-classifier"
import type { ItemToken } from "wink-nlp"
import { nlp, readable, type Wink } from "./Nlp.ts"
import { taskDescriptions, taskExamples, type TaskType, TaskTypes } from "./taskExamples.data.ts"

export const TaskTypeSchema = Schema.Literal(...TaskTypes)

export const TaskClassification = Schema.Struct({
  taskType: TaskTypeSchema,
  /** Probability of `taskType` (0-1); 0 when no word of the text was seen in training. */
  confidence: Schema.Number,
  description: Schema.String,
  /** Every task type with its probability, best first. */
  scores: Schema.Array(Schema.Struct({ taskType: TaskTypeSchema, probability: Schema.Number })),
  /** False when the text had no known word and the answer is the default (`general`). */
  recognised: Schema.Boolean,
  engine: Schema.String
})
export type TaskClassification = typeof TaskClassification.Type

export const ENGINE = "naive Bayes (wink-naive-bayes-text-classifier 2.2) on wink-nlp 2.4 features"

const round = (n: number) => Math.round(n * 10000) / 10000

/** Features: stems of words that are not stop words, plus markers for numbers and symbols. */
const features = (wink: Wink) => (text: string): Array<string> => {
  const its = wink.its
  const out: Array<string> = []
  wink.readDoc(text).tokens().each((t: ItemToken) => {
    const type = t.out(its.type)
    if (type === "word") {
      if (!t.out(its.stopWordFlag)) out.push(t.out(its.stem as unknown as typeof its.normal))
    } else if (type === "number") {
      out.push("#number")
    } else if (type === "symbol" || (type === "punctuation" && /[{}()[\];=<>]/.test(t.out()))) {
      out.push("#symbol")
    }
  })
  return out
}

/** Characters of a long text that are classified: its beginning and its end (where a long prompt's question usually is). */
const HEAD_CHARS = 10_000
const TAIL_CHARS = 2_000

/**
 * The part of a text that is classified. The features of a text cost time linear in its length but
 * large (docs/security.md), and a task's kind shows in its first and last words.
 */
const classified = (text: string) =>
  text.length <= HEAD_CHARS + TAIL_CHARS ? text : `${text.slice(0, HEAD_CHARS)}\n${text.slice(-TAIL_CHARS)}`

/** Trains a classifier on the given examples (the default set unless told otherwise). */
export const train = (examples: Record<TaskType, ReadonlyArray<string>> = taskExamples) =>
  Effect.map(nlp, (wink) => trainWith(wink, examples))

const trainWith = (wink: Wink, examples: Record<TaskType, ReadonlyArray<string>>) => {
  const nbc = classifier()
  nbc.defineConfig({ considerOnlyPresence: true, smoothingFactor: 0.5 })
  nbc.definePrepTasks([features(wink)])
  for (const label of TaskTypes) for (const text of examples[label]) nbc.learn(text, label)
  nbc.consolidate()
  return (text: string): TaskClassification => {
    const odds = nbc.computeOdds(readable(classified(text)))
    if (odds.length === 1 && odds[0]![0] === "unknown") {
      const even = round(1 / TaskTypes.length)
      return {
        taskType: "general",
        confidence: 0,
        description: taskDescriptions.general,
        scores: TaskTypes.map((taskType) => ({ taskType, probability: even })),
        recognised: false,
        engine: ENGINE
      }
    }
    // log2 one-vs-rest odds -> probabilities, normalised over the labels.
    const raw = odds.map(([label, o]) => [label as TaskType, 1 / (1 + Math.pow(2, -o))] as const)
    const total = raw.reduce((s, [, p]) => s + p, 0)
    const scores = raw.map(([taskType, p]) => ({ taskType, probability: round(p / total) }))
    const best = scores[0]!
    return {
      taskType: best.taskType,
      confidence: best.probability,
      description: taskDescriptions[best.taskType],
      scores,
      recognised: true,
      engine: ENGINE
    }
  }
}

const makeService = Effect.gen(function*() {
  // Trained on first use, not at start: the English model is memory that a deployment which
  // never classifies should not carry (docs/performance.md).
  const classifier = yield* Effect.cached(train())
  return { classify: (text: string) => Effect.map(classifier, (classify) => classify(text)) }
})

export class TaskClassifier extends Context.Tag("aigw/Ml/TaskClassifier")<TaskClassifier, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(TaskClassifier, makeService)
