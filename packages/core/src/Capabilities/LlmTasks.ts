/**
 * Capabilities answered by a routed chat model with a task prompt: translation, zero-shot
 * classification, structured extraction and prompt optimisation. Each is a real upstream call
 * through Completions (routing, fallback, usage and cost recording); answers that must be
 * JSON are parsed and checked, and a model that does not comply is reported as an upstream
 * failure, never patched up.
 */
import { Context, Effect, Layer, Schema } from "effect"
import { BadRequest, Unprocessable, UpstreamFailed } from "../Errors.ts"
import { once } from "../Once.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { type CompletionInput, type CompletionResult, Completions } from "./Completions.ts"

export interface TaskTarget {
  readonly provider: string
  readonly model?: string | undefined
}

/** What every LLM task answer carries about the call that produced it. */
const callInfo = (r: CompletionResult) => ({ provider: r.provider, model: r.model, usage: r.usage, costUSD: r.costUSD })

/**
 * The text between the first code fence and the next, without a `json` tag, or undefined. Searched
 * with indexOf: the pattern it replaces backtracked over whitespace after an unclosed fence, quadratic
 * in its length, and a model's answer is anyone's to shape (docs/security.md).
 */
const fencedText = (content: string): string | undefined => {
  const open = content.indexOf("```")
  const close = open === -1 ? -1 : content.indexOf("```", open + 3)
  if (close === -1) return undefined
  const inside = content.slice(open + 3, close)
  return inside.startsWith("json") ? inside.slice(4) : inside
}

/** The first JSON object in a model's answer (models sometimes wrap it in a code fence). */
export const parseJsonAnswer = (content: string): unknown => {
  const text = (fencedText(content) ?? content).trim()
  const start = text.indexOf("{")
  const end = text.lastIndexOf("}")
  if (start === -1 || end <= start) throw new Error("no JSON object in the answer")
  return JSON.parse(text.slice(start, end + 1))
}

// Made on first use: it maps ICU's locale data, resident memory a process that never translates need not carry.
let languageNames: Intl.DisplayNames | undefined
/** English name of an ISO 639-1 code, or undefined when the code is not a language. */
export const languageName = (code: string): string | undefined => {
  if (!/^[a-z]{2}$/.test(code)) return undefined
  const name = (languageNames ??= new Intl.DisplayNames(["en"], { type: "language" })).of(code)
  return name && name !== code ? name : undefined
}

export const IsoLanguage = Schema.String.pipe(
  Schema.filter((c) => languageName(c) !== undefined, { message: () => "must be an ISO 639-1 language code such as en, de, ja" })
)

/** A caller's `pattern` that the linear-time engine does not support (back-references, look-arounds). */
class UnsupportedPattern extends Error {}

/**
 * ajv with RE2 (re2js, pure JS) as the engine for the caller's `pattern` and `patternProperties`:
 * its matching time is linear in the input, where a backtracking RegExp would let `^(a+)+$`
 * against a model's answer block the event loop for seconds (ReDoS). Both are imported on the
 * first extraction: memory the other routes do not need.
 */
const importAjv = async () => {
  const [AjvModule, { RE2JS }] = await Promise.all([import("ajv"), import("re2js")])
  const linearRegExp = Object.assign(
    (pattern: string, _flags: string) => {
      let re: ReturnType<typeof RE2JS.compile>
      try {
        re = RE2JS.compile(RE2JS.translateRegExp(pattern))
      } catch (e) {
        throw new UnsupportedPattern(`schema pattern ${JSON.stringify(pattern)} is not supported (${(e as Error).message}); patterns run on a linear-time engine (RE2 syntax: no back-references or look-arounds).`)
      }
      // ajv keys compiled patterns by toString().
      return { test: (s: string) => re.test(s), toString: () => `re2:${pattern}` }
    },
    { code: "re2js" }
  )
  // ajv is CommonJS: under NodeNext its class is the module's `default` export.
  const Ajv = AjvModule.default.default
  const options = { allErrors: true, strict: false, code: { regExp: linearRegExp } }
  // Checks callers' schemas against JSON Schema's meta-schema, which it compiles once; it keeps no caller's schema.
  const checker = new Ajv(options)
  return {
    /** Why `schema` is not a valid JSON Schema, or undefined. */
    problem: (schema: Record<string, unknown>): string | undefined => (checker.validateSchema(schema) ? undefined : `schema is invalid: ${checker.errorsText(checker.errors)}`),
    /**
     * A validator of a checked schema, from an ajv of its own: ajv keeps what it compiled (the validator's code,
     * the schema, its patterns, its nested `$id`s) past `removeSchema`, so one shared instance grew with every
     * extraction a caller sent a new schema to.
     */
    compile: (schema: Record<string, unknown>) => new Ajv({ ...options, validateSchema: false, addUsedSchema: false }).compile(schema)
  }
}

type SchemaCompiler = Awaited<ReturnType<typeof importAjv>>
/** The schema compiler, with ajv imported once (a failed import is retried by the next caller). */
const schemaCompiler = once(importAjv)
/** The schema compiler, importing ajv on the first call. */
export const loadSchemaCompiler = schemaCompiler.get
/** The schema compiler if ajv was imported already: the fast lane plans synchronously and leaves the first extraction to the route. */
export const schemaCompilerIfLoaded = schemaCompiler.current

/** The most values (objects, arrays and what they hold) a caller's JSON Schema may have: ajv compiles it to code on every call. */
export const MAX_SCHEMA_NODES = 2_000

/** Whether `value` holds more than `limit` values, counted until the limit is passed. */
const holdsMoreThan = (value: unknown, limit: number): boolean => {
  let count = 0
  const stack: Array<unknown> = [value]
  while (stack.length > 0) {
    const v = stack.pop()
    count++
    if (typeof v !== "object" || v === null) continue
    const inside = Array.isArray(v) ? v : Object.values(v)
    if (count + stack.length + inside.length > limit) return true
    for (const item of inside) stack.push(item)
  }
  return false
}

/**
 * The caller's JSON Schema compiled: a validator, a 400 when it is invalid or larger than MAX_SCHEMA_NODES
 * values (compiling grows faster than the schema: docs/security.md), a 422 for a pattern the engine refuses.
 */
export const compileSchema = (compiler: SchemaCompiler, schema: Record<string, unknown>) => {
  // The task asks the model for one JSON object: a schema of another type could never be answered (a 502 for a
  // right answer, counted), so it is refused before the call.
  const type = schema.type
  if (type !== undefined && type !== "object" && !(Array.isArray(type) && type.includes("object"))) {
    return new BadRequest({ message: `schema must describe a JSON object (type "object"): the extraction answers one object; put a list in one of its properties`, param: "schema.type" })
  }
  if (holdsMoreThan(schema, MAX_SCHEMA_NODES)) {
    return new BadRequest({ message: `schema holds more than ${MAX_SCHEMA_NODES} values (keywords, properties and the values they hold); send a smaller JSON Schema` })
  }
  try {
    const problem = compiler.problem(schema)
    if (problem !== undefined) return new BadRequest({ message: `schema is not a valid JSON Schema: ${problem}` })
    return compiler.compile(schema)
  } catch (e) {
    return e instanceof UnsupportedPattern
      ? new Unprocessable({ message: e.message })
      : new BadRequest({ message: `schema is not a valid JSON Schema: ${(e as Error).message}` })
  }
}
export type SchemaValidator = Exclude<ReturnType<typeof compileSchema>, BadRequest | Unprocessable>

export type Task = TaskTarget & { readonly system: string; readonly user: string; readonly maxTokens?: number | undefined }

export const taskInput = (task: Task): CompletionInput => ({
  messages: [{ role: "system", content: task.system }, { role: "user", content: task.user }],
  provider: task.provider,
  model: task.model ?? "auto",
  temperature: 0,
  maxTokens: task.maxTokens
})

export type TranslateInput = TaskTarget & { readonly text: string; readonly targetLanguage: string; readonly sourceLanguage?: string | undefined }
export type ClassifyInput = TaskTarget & { readonly text: string; readonly labels: ReadonlyArray<string> }
export type ExtractInput = TaskTarget & { readonly text: string; readonly schema: Record<string, unknown> }
export type OptimiseInput = TaskTarget & { readonly prompt: string }

// Each task's prompt, built once for the check before admission and for the call.
export const tasks = {
  translate: (input: TranslateInput): Task => {
    const target = languageName(input.targetLanguage)!
    const source = input.sourceLanguage ? languageName(input.sourceLanguage) : undefined
    return {
      ...input,
      system: `You are a translation engine. Translate the user's text ${source ? `from ${source} ` : ""}into ${target}. Keep meaning, tone and formatting; do not add explanations. Answer only with JSON: {"sourceLanguage": "<ISO 639-1 code of the original${source ? ` (${input.sourceLanguage})` : ", detected"}>", "translation": "<the translated text>"}.`,
      user: input.text
    }
  },
  classify: (input: ClassifyInput): Task => ({
    ...input,
    system: `You are a zero-shot text classifier. Labels: ${JSON.stringify(input.labels)}. Choose the single best label for the user's text and give each label a probability (they sum to 1). Answer only with JSON: {"label": "<one of the labels, verbatim>", "scores": {"<label>": <probability>, ...}}.`,
    user: input.text
  }),
  extract: (input: ExtractInput): Task => ({
    ...input,
    system: `You extract structured data from the user's text. Answer only with one JSON object that conforms to this JSON Schema; use null for values the text does not state; do not invent facts.\nJSON Schema: ${JSON.stringify(input.schema)}`,
    user: input.text
  }),
  optimisePrompt: (input: OptimiseInput): Task => ({
    ...input,
    system: "You are a prompt engineer. Rewrite the user's prompt so that a large language model answers it better: state the goal, the context, the constraints and the expected output format; keep the user's intent and language; do not answer the prompt. Answer only with JSON: {\"optimisedPrompt\": \"<the rewritten prompt>\", \"changes\": [\"<short note on each change>\"]}.",
    user: input.prompt
  })
}

/** The JSON object a task asked the model for, or the failure naming the model that did not comply. */
const answerJson = (call: CompletionResult): Record<string, unknown> | UpstreamFailed => {
  try {
    return parseJsonAnswer(call.content) as Record<string, unknown>
  } catch {
    return new UpstreamFailed({ provider: call.provider, message: `${call.provider}/${call.model} did not answer with the JSON the task asked for.` })
  }
}

const failed = (call: CompletionResult, what: string) => new UpstreamFailed({ provider: call.provider, message: `${call.provider}/${call.model} ${what}` })

/**
 * Each task's result from the model's answer, or the model's failure to comply: the one reading
 * of an answer, for the service here and the node host's fast lane (Http/TaskRoutes.ts).
 */
export const answers = {
  translate: (input: TranslateInput, call: CompletionResult) => {
    const json = answerJson(call)
    if (json instanceof UpstreamFailed) return json
    if (typeof json.translation !== "string") return failed(call, "answered without a translation.")
    const detected = typeof json.sourceLanguage === "string" && languageName(json.sourceLanguage.toLowerCase()) ? json.sourceLanguage.toLowerCase() : null
    return { translation: json.translation, sourceLanguage: input.sourceLanguage ?? detected, targetLanguage: input.targetLanguage, ...callInfo(call) }
  },
  classify: (input: ClassifyInput, call: CompletionResult) => {
    const json = answerJson(call)
    if (json instanceof UpstreamFailed) return json
    const byLower = new Map(input.labels.map((l) => [l.toLowerCase(), l]))
    const label = typeof json.label === "string" ? byLower.get(json.label.trim().toLowerCase()) : undefined
    if (label === undefined) return failed(call, "answered a label that is not one of the given labels.")
    const raw = (typeof json.scores === "object" && json.scores !== null ? json.scores : {}) as Record<string, unknown>
    // The first score of each label whatever its case, read once: a search of every score per label was
    // quadratic in an upstream's answer.
    const scoreOf = new Map<string, unknown>()
    for (const [k, v] of Object.entries(raw)) if (!scoreOf.has(k.toLowerCase())) scoreOf.set(k.toLowerCase(), v)
    const scores = input.labels.map((l) => {
      const v = scoreOf.get(l.toLowerCase())
      return { label: l, score: typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : 0 }
    })
    const total = scores.reduce((n, s) => n + s.score, 0)
    const normalised = total > 0
      ? scores.map((s) => ({ label: s.label, score: Math.round((s.score / total) * 1e4) / 1e4 }))
      : scores.map((s) => ({ label: s.label, score: s.label === label ? 1 : 0 }))
    // Best first; the model's label first among equals. The answer's label is the best-scored one: a model whose
    // label and scores disagree is answered by its scores, so `label` is always `scores[0]`.
    const ranked = normalised.sort((a, b) => b.score - a.score || (a.label === label ? -1 : b.label === label ? 1 : 0))
    return { label: ranked[0]!.label, scores: ranked, ...callInfo(call) }
  },
  extract: (validate: SchemaValidator) => (_input: ExtractInput, call: CompletionResult) => {
    const json = answerJson(call)
    if (json instanceof UpstreamFailed) return json
    const valid = validate(json) as boolean
    return {
      data: json,
      valid,
      errors: valid ? [] : (validate.errors ?? []).map((e: { instancePath: string; message?: string }) => `${e.instancePath || "/"} ${e.message ?? "is invalid"}`),
      ...callInfo(call)
    }
  },
  optimisePrompt: (input: OptimiseInput, call: CompletionResult) => {
    const json = answerJson(call)
    if (json instanceof UpstreamFailed) return json
    if (typeof json.optimisedPrompt !== "string" || json.optimisedPrompt.trim() === "") return failed(call, "answered without an optimised prompt.")
    const changes = Array.isArray(json.changes) ? json.changes.filter((c): c is string => typeof c === "string") : []
    return { originalPrompt: input.prompt, optimisedPrompt: json.optimisedPrompt, changes, ...callInfo(call) }
  }
}

const makeService = Effect.gen(function*() {
  const completions = yield* Completions

  /** The caller's schema compiled (after importing ajv on the first extraction). */
  const validatorOf = (schema: Record<string, unknown>) =>
    Effect.flatMap(Effect.promise(loadSchemaCompiler), (loaded) => {
      const compiled = compileSchema(loaded, schema)
      return compiled instanceof BadRequest || compiled instanceof Unprocessable ? Effect.fail(compiled) : Effect.succeed(compiled)
    })

  /** A task's call and the reading of its answer. */
  const run = <I, A>(name: string, task: (input: I) => Task, answer: (input: I, call: CompletionResult) => A | UpstreamFailed) =>
    (avatar: AvatarRecord, input: I) =>
      Effect.flatMap(completions.complete(avatar, taskInput(task(input))), (call) => {
        const result = answer(input, call)
        return result instanceof UpstreamFailed ? Effect.fail(result) : Effect.succeed(result)
      }).pipe(Effect.withSpan(name))

  /**
   * The refusals of each task that depend only on the request and configuration (routing; the
   * extraction schema): answered before admission.
   */
  const check = {
    translate: (avatar: AvatarRecord, input: TranslateInput) => completions.check(avatar, taskInput(tasks.translate(input))),
    classify: (avatar: AvatarRecord, input: ClassifyInput) => completions.check(avatar, taskInput(tasks.classify(input))),
    extract: (avatar: AvatarRecord, input: ExtractInput) =>
      Effect.zipRight(validatorOf(input.schema), completions.check(avatar, taskInput(tasks.extract(input)))),
    optimisePrompt: (avatar: AvatarRecord, input: OptimiseInput) => completions.check(avatar, taskInput(tasks.optimisePrompt(input)))
  }

  return {
    check,
    translate: run("LlmTasks.translate", tasks.translate, answers.translate),
    classify: run("LlmTasks.classify", tasks.classify, answers.classify),
    extract: (avatar: AvatarRecord, input: ExtractInput) =>
      Effect.flatMap(validatorOf(input.schema), (validate) => run("LlmTasks.extract", tasks.extract, answers.extract(validate))(avatar, input)),
    optimisePrompt: run("LlmTasks.optimisePrompt", tasks.optimisePrompt, answers.optimisePrompt)
  }
})

export class LlmTasks extends Context.Tag("aigw/LlmTasks")<LlmTasks, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(LlmTasks, makeService)
