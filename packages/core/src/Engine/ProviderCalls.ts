/**
 * The engine of provider calls, as plain promises: the fallback loop over routing targets
 * (retryable upstream failures only, never once a stream started; `firstSuccessEffect` is its form for
 * the clients written as Effects, under the same rules and state), the one JSON exchange and the
 * one stream loop (idle timer, connection release), provider health, token estimates when the
 * upstream reports none, and the one place usage is recorded. Chat (plain and streamed),
 * embeddings and rerank run here; the Effect services (Completions, Embeddings) and the HTTP fast lane wrap
 * it, and an interruption or a client that goes away aborts the upstream call through the call's
 * Cancel (Providers/internal/cancel.ts). Nothing here creates fibers per call: a metered call pays for its work only.
 * The request id of the call (RequestId.ts) goes upstream as `x-request-id` and on its log lines;
 * the upstream metrics (attempts, errors, tokens, cost; Metrics.ts) are counted here.
 */
import { Context, Duration, Effect, Layer, Option, Runtime } from "effect"
import { costKnown, costOf } from "../Cost.ts"
import { type GatewayError, isGatewayError } from "../Errors.ts"
import type { ChatMessage, ChatRequest, ChatResult, ChatWire, ChunkExtra, FinishReason, StreamEvent, Target, TokenDetails, TokenUsage, WireRequest } from "../Providers/Chat.ts"
import { reportedCount } from "../Providers/Chat.ts"
import { idleError, postJsonNow, postSseNow, release, STREAM_IDLE_TIMEOUT, streamBroke } from "../Providers/internal/http.ts"
import { Cancel } from "../Providers/internal/cancel.ts"
import { stopWaitingRequests } from "../Providers/internal/nodeFetch.ts"
import { makeSseParser, type SseEvent } from "../Providers/internal/sse.ts"
import { ProviderHealth } from "../Providers/ProviderHealth.ts"
import { authorize, servedBy } from "../Providers/Registry.ts"
import { protocolError, readSafely, stoppedError, toGatewayError, unreadableAnswer, UpstreamError } from "../Providers/UpstreamError.ts"
import { utcDay } from "../Quota.ts"
import type { Attempted, Fallback, FallbackCandidate } from "../Routing.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { Metering } from "../Storage/Metering.ts"
import type { UsageEvent } from "../Storage/UsageStore.ts"
import { countMessages, countText, countTexts } from "../Tokens.ts"
import * as Metrics from "../Metrics.ts"
import { Exporters } from "../Observability/Exporters.ts"
import * as RequestId from "../RequestId.ts"
import { countAttempt, failureWarning, fallbackAfter, recordAttempt, recordHealth } from "./UpstreamOutcome.ts"

export interface UsageReport {
  readonly promptTokens: number
  readonly completionTokens: number
  readonly totalTokens: number
  /** True when counted by the gateway's tokenizer because the upstream reported none. */
  readonly estimated: boolean
  /** Prompt tokens written to / read from the upstream's prompt cache, when it reports them (Providers/Chat.ts TokenUsage). */
  readonly cacheCreationTokens?: number | undefined
  readonly cacheReadTokens?: number | undefined
  /** Of the cache writes, those kept for an hour (priced higher: Cost.ts). */
  readonly cacheCreation1hTokens?: number | undefined
  /** Of the completion's tokens, those of the model's reasoning, when the upstream reports them. */
  readonly reasoningTokens?: number | undefined
  /** The upstream's other counts, as reported (Providers/Chat.ts TokenDetails). */
  readonly tokenDetails?: TokenDetails | undefined
}

export interface CompletionResult {
  readonly provider: string
  readonly model: string
  readonly content: string
  readonly message: { readonly role: "assistant"; readonly content: string; readonly toolCalls: ChatResult["toolCalls"] }
  readonly toolCalls: ChatResult["toolCalls"]
  readonly finishReason: FinishReason
  readonly usage: UsageReport
  readonly costUSD: number
  /** False when the model has no known price (costUSD is then 0): a model named outside the catalogue. */
  readonly costKnown: boolean
  /** Fields of an OpenAI-format answer the result does not model (Providers/Chat.ts ChatResult.extra). */
  readonly extra?: ChatResult["extra"]
  /** The reasoning before the answer, with its signature (Providers/Chat.ts ReasoningPart). */
  readonly reasoning?: ChatResult["reasoning"]
  /** The stop sequence that ended the answer, when the upstream said which (Providers/Chat.ts ChatResult). */
  readonly stopSequence?: string | undefined
  readonly latencyMs: number
  /** Earlier candidates that failed with a retryable error before this one answered. */
  readonly fallbacks: ReadonlyArray<Fallback>
}

/** One chunk of `/v1/complete/stream` (the spec's fields plus documented extras). */
export interface StreamChunk {
  readonly content: string
  readonly done: boolean
  readonly toolCalls?: ReadonlyArray<{ readonly index: number; readonly id?: string; readonly name?: string; readonly arguments: string; readonly signature?: string }>
  readonly promptTokens?: number
  readonly completionTokens?: number
  readonly finishReason?: FinishReason
  readonly provider?: string
  readonly model?: string
  readonly costUSD?: number
  readonly estimated?: boolean
  /** False when the model has no known price (costUSD is then 0). */
  readonly costKnown?: boolean
  readonly error?: string
  /** With `error`: what ended the stream, as the gateway error a call failing so before the stream would have been (`StreamError`). */
  readonly errorCode?: StreamError["code"]
  /**
   * OpenAI-format fields the chunk does not model, of its delta and choice (`reasoning_content`,
   * `logprobs`) and of the chunk itself (`system_fingerprint`): the OpenAI surface passes them on.
   */
  readonly extra?: ChunkExtra
  /** A piece of reasoning (Providers/Chat.ts StreamEvent "Reasoning"): text, its signature, or a redacted block's data. */
  readonly reasoning?: { readonly index: number; readonly text?: string; readonly signature?: string; readonly redacted?: string }
  readonly cacheCreationTokens?: number
  readonly cacheReadTokens?: number
  readonly cacheCreation1hTokens?: number
  readonly reasoningTokens?: number
  readonly tokenDetails?: TokenDetails
  /** The stop sequence that ended the answer, when the upstream said which (final chunk). */
  readonly stopSequence?: string
}

/**
 * What ended a stream early: its message, and the gateway error a call failing so before its stream
 * began would have been. The surfaces label their error event with it (OpenAI's `code`, Anthropic's
 * `type`): an upstream's failure, an upstream that went quiet, or a stop of the gateway's own.
 */
export interface StreamError {
  readonly message: string
  readonly code: "UpstreamFailed" | "UpstreamTimeout" | "Busy"
}

/** An upstream failure as the error that ends a stream. */
const streamErrorOf = (e: UpstreamError): StreamError => ({ message: e.message, code: toGatewayError(e)._tag })

/** Every prompt token of a call, those read from or written to the upstream's prompt cache included (as OpenAI's `prompt_tokens` counts them). */
export const allPromptTokens = (u: { readonly promptTokens?: number | undefined; readonly cacheCreationTokens?: number | undefined; readonly cacheReadTokens?: number | undefined }) =>
  (u.promptTokens ?? 0) + (u.cacheCreationTokens ?? 0) + (u.cacheReadTokens ?? 0)

/** Tokenizer counts for a call whose upstream reported no usage. */
export const estimate = (messages: ReadonlyArray<ChatMessage>, completion: string) =>
  Effect.map(Effect.all([countMessages(messages), countText(completion)]), ([promptTokens, completionTokens]): UsageReport => ({
    promptTokens,
    completionTokens,
    totalTokens: promptTokens + completionTokens,
    estimated: true
  }))

/**
 * An answer whose finish reason says the upstream failed to finish it (Mistral's `error`, Cohere's
 * `ERROR`, Gemini's `MALFORMED_FUNCTION_CALL`, …): a failed call, not a short success.
 */
const upstreamFailedAnswer = (provider: string, usage?: Partial<TokenUsage>) => {
  const { kind, message, retryable } = protocolError(provider, "the answer ended in an error (its finish reason says so)")
  return new UpstreamError({ provider, kind, message, retryable, usage })
}

/**
 * A chat answer as the engine takes it, on every path (a call, a batch's item): read by its wire, an
 * answer the wire cannot read a protocol error, one that failed by its finish reason a failure
 * keeping the counts it reported.
 */
export const chatAnswerOf = (wire: ChatWire, provider: string, body: unknown): ChatResult | UpstreamError => {
  const answer = readSafely(provider, () => wire.result(provider, body))
  return !(answer instanceof UpstreamError) && answer.finishReason === "error" ? upstreamFailedAnswer(provider, answer.usage) : answer
}

/** How long closing the engine waits for the calls and usage records under way (all cut by then at a graceful stop). */
const RECORDS_AT_CLOSE = Duration.seconds(5)


/**
 * A usage report of the counts given, with the upstream's believable cache and reasoning counts;
 * the total is every token of the call, those read from or written to the prompt cache included.
 */
const usageReport = (promptTokens: number, completionTokens: number, estimated: boolean, u: Partial<TokenUsage> | undefined): UsageReport => {
  const creation = reportedCount(u?.cacheCreationTokens)
  const read = reportedCount(u?.cacheReadTokens)
  const reasoning = reportedCount(u?.reasoningTokens)
  const hour = reportedCount(u?.cacheCreation1hTokens)
  return {
    promptTokens,
    completionTokens,
    totalTokens: allPromptTokens({ promptTokens, cacheCreationTokens: creation, cacheReadTokens: read }) + completionTokens,
    estimated,
    ...(creation !== undefined ? { cacheCreationTokens: creation } : {}),
    ...(read !== undefined ? { cacheReadTokens: read } : {}),
    ...(creation !== undefined && hour !== undefined && hour <= creation ? { cacheCreation1hTokens: hour } : {}),
    ...(reasoning !== undefined && reasoning <= completionTokens ? { reasoningTokens: reasoning } : {}),
    ...(u?.tokenDetails !== undefined ? { tokenDetails: u.tokenDetails } : {})
  }
}

/** The usage of a failed answer: the counts it reported believably, none for the rest (no tokenizer for a failure). */
export const failedUsage = (u: Partial<TokenUsage>): UsageReport => usageReport(reportedCount(u.promptTokens) ?? 0, reportedCount(u.completionTokens) ?? 0, false, u)

/** The usage as the upstream reported it, when it reported both counts believably (no tokenizer needed). */
export const reportedUsage = (u: Partial<TokenUsage> | undefined): UsageReport | undefined => {
  const promptTokens = reportedCount(u?.promptTokens)
  const completionTokens = reportedCount(u?.completionTokens)
  return promptTokens === undefined || completionTokens === undefined ? undefined : usageReport(promptTokens, completionTokens, false, u)
}

/**
 * The usage of a chat call whose upstream did not report both counts believably (`reportedUsage`
 * gave none): the counts it did report believably, the tokenizer's for the rest.
 */
export const estimatedUsage = (u: Partial<TokenUsage> | undefined, messages: ReadonlyArray<ChatMessage>, completion: string): Effect.Effect<UsageReport> =>
  Effect.map(estimate(messages, completion), (e) => {
    const promptTokens = reportedCount(u?.promptTokens) ?? e.promptTokens
    const completionTokens = reportedCount(u?.completionTokens) ?? e.completionTokens
    return usageReport(promptTokens, completionTokens, true, u)
  })

/** An answer's text as the tokenizer counts its completion: the content and the tool calls' arguments. */
export const answeredText = (value: Pick<ChatResult, "content" | "toolCalls">) => value.content + value.toolCalls.map((c) => c.arguments).join("")

/** The usage of a call no upstream answered. */
export const NO_USAGE: UsageReport = { promptTokens: 0, completionTokens: 0, totalTokens: 0, estimated: false }

/** A routed call's usage record, its cost from the target's model prices (cached prompt tokens counted and priced). */
export const usageRecordOf = (avatarId: string, target: Target, capability: string, report: UsageReport, latencyMs: number, ok: boolean): UsageRecord => ({
  avatarId,
  provider: target.provider.id,
  model: target.model.id,
  capability,
  promptTokens: allPromptTokens(report),
  completionTokens: report.completionTokens,
  costUSD: costOf(target.model, report.promptTokens, report.completionTokens, report),
  latencyMs,
  estimated: report.estimated,
  ok
})

/**
 * What a stream has delivered so far: turns adapter events into chunks and keeps the text, finish
 * reason and upstream token counts for the final chunk and the usage record.
 */
export const makeStreamAccount = () => {
  let text = ""
  let finish: FinishReason = "stop"
  let stopSequence: string | undefined
  let finished = false
  let usage: Partial<TokenUsage> = {}
  // The tool call being streamed, and whether any argument text came for it: Anthropic and Bedrock
  // stream none for a call without arguments, where a JSON answer has `{}`.
  let tool: number | undefined
  let toolHasArguments = false
  // Whether any of the answer (text, a tool call, reasoning) came: a stream that fails before is charged as a call no upstream answered.
  let answered = false
  const noArguments = (): Array<{ readonly index: number; readonly arguments: string }> =>
    tool !== undefined && !toolHasArguments ? [{ index: tool, arguments: "{}" }] : []
  // The chunk-level fields of the last upstream event that made no chunk (its finish or usage event): the final chunk's.
  let trailing: ChunkExtra["body"]
  /** The chunk for an event, if it makes one (finish reasons and usage only update the account). */
  const onEvent = (e: Exclude<StreamEvent, { readonly _tag: "Extra" }>): StreamChunk | undefined => {
    switch (e._tag) {
      case "Text":
        text += e.text
        if (e.text !== "") answered = true
        return { content: e.text, done: false }
      case "ToolCallDelta": {
        answered = true
        text += e.arguments
        const call = { index: e.index, ...(e.id ? { id: e.id } : {}), ...(e.name ? { name: e.name } : {}), arguments: e.arguments, ...(e.signature ? { signature: e.signature } : {}) }
        if (e.index === tool) {
          if (e.arguments !== "") toolHasArguments = true
          return { content: "", done: false, toolCalls: [call] }
        }
        // The next call: the one before gets its `{}` first if it streamed no arguments.
        const before = noArguments()
        tool = e.index
        toolHasArguments = e.arguments !== ""
        return { content: "", done: false, toolCalls: before.length > 0 ? [...before, call] : [call] }
      }
      case "Finish":
        finish = e.reason
        stopSequence = e.stopSequence
        finished = true
        return undefined
      case "Usage":
        // Counts come in pieces on some wires (Anthropic: input at the start, output at the end); the last of each counts.
        for (const [k, v] of Object.entries(e.usage)) if (v !== undefined) usage = { ...usage, [k]: v }
        return undefined
      case "Reasoning": {
        answered = true
        const { _tag, ...reasoning } = e
        return { content: "", done: false, reasoning }
      }
    }
  }
  /**
   * Adds the chunks of one upstream event's events to `out`. Its unmodelled fields (Extra) ride on
   * its first chunk, as the upstream sent them together; without one, delta or choice fields make a
   * chunk of their own and the chunk's own fields wait for the final chunk.
   */
  const onEvents = (events: ReadonlyArray<StreamEvent>, out: Array<StreamChunk>): void => {
    const start = out.length
    for (const e of events) {
      if (e._tag !== "Extra") {
        const chunk = onEvent(e)
        if (chunk) out.push(chunk)
        continue
      }
      const { extra } = e
      const first = out[start]
      if (first) out[start] = { ...first, extra: first.extra ? { ...first.extra, ...extra } : extra }
      else if (extra.delta || extra.choice) out.push({ content: "", done: false, extra })
      else trailing = extra.body
    }
  }
  return {
    /**
     * The chunks of the upstream events of one read, decoded by the wire's `decode`, and `stop` when
     * one of them ends the stream: null for its end marker, the message of an error it carried.
     */
    onRead: (events: ReadonlyArray<SseEvent>, decode: ReturnType<ChatWire["events"]>): { chunks: Array<StreamChunk>; stop?: UpstreamError | null } => {
      const chunks: Array<StreamChunk> = []
      for (const event of events) {
        const decoded = decode(event)
        if (decoded === null) return { chunks, stop: null }
        if (decoded instanceof UpstreamError) return { chunks, stop: decoded }
        onEvents(decoded, chunks)
      }
      return { chunks }
    },
    /** The arguments `{}` of the last tool call if it streamed none, as a JSON answer gives them: a chunk before the final one. */
    emptyArguments: (): StreamChunk | undefined => {
      const empty = noArguments()
      return empty.length > 0 ? { content: "", done: false, toolCalls: empty } : undefined
    },
    /** The chunk-level fields for the final chunk, if the last events that made no chunk had any. */
    trailing: (): ChunkExtra | undefined => (trailing ? { body: trailing } : undefined),
    finishReason: () => finish,
    /** The stop sequence that ended the answer, when the upstream said which. */
    stopSequence: () => stopSequence,
    /** Whether the upstream gave a finish reason: a stream that ends without one (or its end marker) was cut short. */
    finished: () => finished,
    /** The usage as the upstream reported it, when it reported both counts (`reportedUsage`). */
    reported: (): UsageReport | undefined => reportedUsage(usage),
    /** The input counts the upstream has reported so far, the believable ones (`ChatStream.reportedInput`). */
    reportedInput: (): InputCounts => {
      const promptTokens = reportedCount(usage.promptTokens)
      const cacheCreationTokens = reportedCount(usage.cacheCreationTokens)
      const cacheReadTokens = reportedCount(usage.cacheReadTokens)
      return {
        ...(promptTokens !== undefined ? { promptTokens } : {}),
        ...(cacheCreationTokens !== undefined ? { cacheCreationTokens } : {}),
        ...(cacheReadTokens !== undefined ? { cacheReadTokens } : {})
      }
    },
    /** When `reported` gave none: the upstream's counts, with the tokenizer's for whatever it did not report (`estimatedUsage`). */
    estimated: (messages: ReadonlyArray<ChatMessage>): Effect.Effect<UsageReport> => estimatedUsage(usage, messages, text),
    /**
     * The usage of a stream that failed before any of its answer came: only what the upstream reported
     * (`failedUsage`), nothing estimated, as a call whose answer was unusable is recorded (docs/quota.md).
     */
    unanswered: (): UsageReport | undefined => (answered ? undefined : failedUsage(usage))
  }
}

/** The last chunk of a stream: totals, or the error that ended it (with the upstream's trailing chunk-level fields). */
export const finalChunk = (target: Target, finish: FinishReason, r: UsageReport, error?: StreamError, extra?: ChunkExtra, stopSequence?: string): StreamChunk => ({
  content: "",
  done: true,
  promptTokens: r.promptTokens,
  completionTokens: r.completionTokens,
  finishReason: error === undefined ? finish : "error",
  provider: target.provider.id,
  model: target.model.id,
  costUSD: costOf(target.model, r.promptTokens, r.completionTokens, r),
  costKnown: costKnown(target.model),
  estimated: r.estimated,
  ...(r.cacheCreationTokens !== undefined ? { cacheCreationTokens: r.cacheCreationTokens } : {}),
  ...(r.cacheReadTokens !== undefined ? { cacheReadTokens: r.cacheReadTokens } : {}),
  ...(r.cacheCreation1hTokens !== undefined ? { cacheCreation1hTokens: r.cacheCreation1hTokens } : {}),
  ...(r.reasoningTokens !== undefined ? { reasoningTokens: r.reasoningTokens } : {}),
  ...(r.tokenDetails !== undefined ? { tokenDetails: r.tokenDetails } : {}),
  ...(error !== undefined ? { error: error.message, errorCode: error.code } : {}),
  ...(extra !== undefined ? { extra } : {}),
  ...(stopSequence !== undefined && error === undefined ? { stopSequence } : {})
})

/**
 * What a stream's reader answers `emit` when it cannot take more yet (a client that does not read):
 * the call by which it says when it can. The upstream is not read meanwhile (its TCP window closes),
 * so an answer waits at the upstream, not in the gateway's memory.
 */
export type WhenReady = (resume: () => void) => void

/** A prompt's token counts as an upstream reports them: uncached input, and what was written to and read from its cache. */
export interface InputCounts {
  readonly promptTokens?: number
  readonly cacheCreationTokens?: number
  readonly cacheReadTokens?: number
}

/** An opened stream: the target that accepted it, and `run`, which delivers its chunks. */
export interface ChatStream {
  readonly target: Target
  /**
   * The input counts the upstream has reported so far: Anthropic's come in its first event, so they are
   * known when the first chunk is emitted; most wires report them only with the last.
   */
  readonly reportedInput: () => InputCounts
  /**
   * Calls `emit` with the chunks of each upstream read, then once with the final chunk (totals,
   * or the error that ended the stream), and resolves. Usage is recorded once, also when the
   * caller aborts (then nothing more is emitted). `upstreamDone` is true from the chunks of the
   * read that completed the upstream's answer on: only the final chunk follows, once usage is
   * recorded (a writer may hold them and send them with it).
   */
  readonly run: (emit: (chunks: ReadonlyArray<StreamChunk>, upstreamDone: boolean) => WhenReady | void) => Promise<void>
  /**
   * Ends the stream now, for a reason of the gateway's own (a host's deadline): the upstream call
   * is aborted, usage so far is recorded as a failed call, and the final chunk carries `error`.
   * The provider's health is not touched. A stream that has ended is left as it is; one not yet
   * run ends this way as soon as it runs.
   */
  readonly stop: (error: StreamError) => void
}

/** What every routed call carries: who pays, the candidates in order, and how to cancel it. */
export interface Call {
  readonly avatar: AvatarRecord
  /** Candidates in order (Routing), at least one. */
  readonly targets: ReadonlyArray<Target>
  /** Aborting it cancels the upstream call (a client that went away, an interrupted fiber). */
  readonly cancel: Cancel
  /** The id of the request that makes the call (RequestId.ts): sent upstream as `x-request-id`. */
  readonly requestId?: string | undefined
}

export interface ChatCall extends Call {
  /** The messages as sent (for usage estimates). */
  readonly messages: ReadonlyArray<ChatMessage>
  readonly request: (target: Target) => ChatRequest
}

export interface EmbedCall extends Call {
  readonly texts: ReadonlyArray<string>
}

export interface EmbeddingsResult {
  readonly provider: string
  readonly model: string
  readonly embeddings: ReadonlyArray<ReadonlyArray<number>>
  readonly dimensions: number
  readonly usage: { readonly promptTokens: number; readonly totalTokens: number; readonly estimated: boolean }
  readonly costUSD: number
  readonly costKnown: boolean
  readonly latencyMs: number
  readonly fallbacks: ReadonlyArray<Fallback>
}

export interface RerankCall extends Call {
  readonly query: string
  readonly documents: ReadonlyArray<string>
  /** How many of the best documents to return. */
  readonly topN: number
}

export interface RerankResult {
  readonly provider: string
  readonly model: string
  /** Best first: the document's index in the request, the document, its relevance score. */
  readonly results: ReadonlyArray<{ readonly index: number; readonly document: string; readonly score: number }>
  readonly usage: {
    readonly totalTokens: number
    /** True when counted by the gateway's tokenizer because the upstream reported none. */
    readonly estimated: boolean
    /** Search units billed, for vendors that bill per search (Cohere). */
    readonly searchUnits?: number
  }
  readonly costUSD: number
  readonly costKnown: boolean
  readonly latencyMs: number
  readonly fallbacks: ReadonlyArray<Fallback>
}

/** A JSON request/answer exchange with one target: the upstream request and how its 2xx answer is read. */
export interface Exchange<A> {
  readonly request: WireRequest
  readonly result: (provider: string, body: any) => A | UpstreamError
}

/** A usage record without the time fields (added when it is recorded). */
export type UsageRecord = Omit<UsageEvent, "day" | "at">

const clientGone = new DOMException("The call was cancelled", "AbortError")

/**
 * Runs a promise of the engine as an Effect: its failures that are gateway errors fail the
 * effect, others are defects, and interrupting the effect aborts the call.
 */
export const lift = <A>(
  run: (cancel: Cancel) => Promise<A>,
  cancel: Cancel = new Cancel()
): Effect.Effect<A, GatewayError> =>
  Effect.async<A, GatewayError>((resume) => {
    run(cancel).then(
      (a) => resume(Effect.succeed(a)),
      (e) => resume(isGatewayError(e) ? Effect.fail(e) : Effect.die(e))
    )
    return Effect.sync(() => cancel.abort(clientGone))
  })

const makeService = Effect.gen(function*() {
  // Calls and usage records under way. The service's scope waits for them when it closes (a graceful
  // stop: the connections cut at its deadline abort their calls, which then record their usage) before
  // the database they write to is released.
  // A count, not a set of the calls: a long-lived collection holding each call's promise would keep
  // every call's state from the young generation's collections (docs/performance.md, twenty-third session).
  let underWay = 0
  let whenNoneUnderWay: (() => void) | undefined
  const settled = () => {
    if (--underWay === 0) whenNoneUnderWay?.()
  }
  const unfinished = <A>(p: Promise<A>): Promise<A> => {
    underWay++
    p.then(settled, settled)
    return p
  }
  yield* Effect.addFinalizer(() =>
    Effect.promise(() => underWay === 0 ? Promise.resolve() : new Promise<void>((resolve) => void (whenNoneUnderWay = resolve))).pipe(
      Effect.timeout(RECORDS_AT_CLOSE),
      Effect.ignore
    )
  )
  const health = yield* ProviderHealth
  const metering = yield* Metering
  // Optional: the usage exporters (Observability/Exporters.ts), when the app composes them.
  const exporters = Option.getOrUndefined(yield* Effect.serviceOption(Exporters))
  const run = Runtime.runPromise(yield* Effect.runtime<never>())
  const warn = (target: Target, error: UpstreamError, requestId: string | undefined) => {
    const line = failureWarning(target.provider.id, target.model.id, error)
    return run(requestId === undefined ? line : Effect.annotateLogs(line, "requestId", requestId))
  }

  /** Records one call's usage (and counts its tokens and cost in the metrics, and queues it for the exporters). */
  const recordUsage = (usage: UsageRecord, requestId?: string) => {
    const at = Date.now()
    Metrics.tokens.inc([usage.provider, "prompt"], usage.promptTokens)
    Metrics.tokens.inc([usage.provider, "completion"], usage.completionTokens)
    Metrics.costUsd.inc([usage.provider], usage.costUSD)
    exporters?.observe(usage, at, requestId)
    return unfinished(metering.record({ ...usage, day: utcDay(at), at }))
  }

  /** Records a routed call's usage (`usageRecordOf`). */
  const record = (avatar: AvatarRecord, target: Target, capability: string, report: UsageReport, latencyMs: number, ok: boolean, requestId?: string) =>
    recordUsage(usageRecordOf(avatar.id, target, capability, report, latencyMs, ok), requestId)

  // A graceful stop's end of the calls under way (`stopCalls`). The stops of the streams running now are in
  // a set, each leaving it when its stream ends. Unlike the calls' promises (see `underWay`), a running
  // stream's state is already reachable from its upstream socket's listener, so holding its stop here keeps
  // nothing longer (docs/performance.md, twenty-seventh session). Calls still waiting for their upstream's
  // answer are reached through the upstream agents instead (nodeFetch `stopWaitingRequests`): a set of them
  // cost a third of the stream rate (twenty-eighth session).
  const running = new Set<(error: StreamError) => void>()
  // Set by `stopCalls`: a stream run afterwards ends at once, a request's attempt made afterwards fails at once.
  let stopping: { readonly stream: StreamError; readonly call: string } | undefined

  /**
   * For a server about to close its connections (Http/ShutdownDeadline.ts), so that its clients get an
   * answer rather than a cut, whatever their upstreams are doing: every stream running now ends as
   * `ChatStream.stop(streamError)` does, and every upstream request made for a client's request and still
   * waiting for its answer (a JSON call, a stream not yet started, an image) fails with `callError`, a 503
   * in its route's envelope. Streams run and the engine's attempts for a request made afterwards end so at
   * once. A stopping server does not resume: this engine's calls stay stopped.
   */
  const stopCalls = (streamError: StreamError, callError: string) => {
    stopping ??= { stream: streamError, call: callError }
    for (const stop of running) stop(streamError)
    stopWaitingRequests(callError)
  }

  /**
   * The failure of a client's attempt begun after a graceful stop's notice (it fails at once), else
   * undefined. Background work's attempts (no request id: jobs, webhooks) go on.
   */
  const refusedAtStop = (providerId: string, requestId: string | undefined) =>
    stopping !== undefined && requestId !== undefined ? stoppedError(providerId, stopping.call) : undefined

  /**
   * Tries the targets in order with `attempt`; the next only after a retryable failure. Rejects
   * with the gateway error of the last failure (or the abort, untouched). A call that no target
   * answered is recorded as failed (no tokens) under the last target tried: the quota counted it,
   * and its usage record says what became of it, as a failed stream's does.
   */
  const firstSuccess = <A>(call: Call, capability: string, attempt: (target: Target) => Promise<A>, countedOnAnswer = true) =>
    unfinished(firstSuccessOf(call, capability, attempt, countedOnAnswer))

  /** `countedOnAnswer: false` for an attempt whose answer is a stream: its health and metrics are recorded at the stream's end. */
  const firstSuccessOf = async <A>(call: Call, capability: string, attempt: (target: Target) => Promise<A>, countedOnAnswer: boolean) => {
    const fallbacks: Array<Fallback> = []
    const started = performance.now()
    for (let i = 0; ; i++) {
      const target = call.targets[i]!
      try {
        const refused = refusedAtStop(target.provider.id, call.requestId)
        if (refused !== undefined) throw refused
        const value = await attempt(target)
        recordAttempt(health, target.provider.id, undefined, countedOnAnswer)
        return { target, value, fallbacks }
      } catch (e) {
        const upstream = e instanceof UpstreamError && !call.cancel.aborted
        if (call.cancel.aborted) countAttempt(target.provider.id, "cancelled")
        if (upstream) {
          recordAttempt(health, target.provider.id, e)
          void warn(target, e, call.requestId)
          const fallback = fallbackAfter(target.provider.id, target.model.id, e, i, call.targets.length)
          if (fallback !== undefined) {
            fallbacks.push(fallback)
            continue
          }
        }
        // An answer that failed by its finish reason is recorded with the counts it reported (as a failed stream's).
        const used = upstream && e.usage !== undefined ? failedUsage(e.usage) : NO_USAGE
        await record(call.avatar, target, capability, used, Math.round(performance.now() - started), false, call.requestId)
        throw upstream ? toGatewayError(e) satisfies GatewayError : e
      }
    }
  }

  /**
   * `firstSuccess` for clients written as Effects (media, vendors' own APIs, video jobs): tries the
   * candidates in order, the next only after a retryable UpstreamError; any other failure, or the last
   * candidate's, ends the run with that error (callers map UpstreamError to the gateway error). The
   * same rules as `firstSuccess`: a request's attempt after a graceful stop's notice fails at once,
   * each attempt counts in provider health and the upstream metrics, an abandoned one as `cancelled`,
   * each failure is logged, and earlier failures come back as `fallbacks`. The caller records usage.
   */
  const firstSuccessEffect = <C extends FallbackCandidate, A, E>(
    candidates: ReadonlyArray<C>,
    attempt: (candidate: C) => Effect.Effect<A, E | UpstreamError>
  ): Effect.Effect<Attempted<C, A>, E | UpstreamError> =>
    Effect.flatMap(RequestId.current, (requestId) => {
      const from = (i: number, fallbacks: ReadonlyArray<Fallback>): Effect.Effect<Attempted<C, A>, E | UpstreamError> => {
        const candidate = candidates[i]!
        const refused = refusedAtStop(candidate.provider.id, requestId)
        return (refused === undefined ? attempt(candidate) : Effect.fail(refused)).pipe(
          Effect.onInterrupt(() => Effect.sync(() => countAttempt(candidate.provider.id, "cancelled"))),
          Effect.tap(() => recordAttempt(health, candidate.provider.id)),
          Effect.map((value) => ({ candidate, value, fallbacks })),
          Effect.catchIf((e): e is UpstreamError => e instanceof UpstreamError, (e) => {
            recordAttempt(health, candidate.provider.id, e)
            const fallback = fallbackAfter(candidate.provider.id, candidate.model, e, i, candidates.length)
            return Effect.zipRight(
              failureWarning(candidate.provider.id, candidate.model, e),
              fallback === undefined ? Effect.fail(e) : from(i + 1, [...fallbacks, fallback])
            )
          })
        )
      }
      return from(0, [])
    })

  /** A JSON exchange with the first target that answers (see `firstSuccess`). */
  const exchange = <A>(call: Call, capability: string, exchangeOf: (target: Target) => Exchange<A>) =>
    firstSuccess(call, capability, async (t) => {
      const { request, result } = exchangeOf(t)
      const { body, headers, url } = await authorized(t, request, call)
      const json = await postJsonNow(t.provider.id, url, RequestId.withHeader(headers, call.requestId), body, call.cancel)
      const answer = readSafely(t.provider.id, () => result(t.provider.id, json))
      if (answer instanceof UpstreamError) throw answer
      return answer
    })

  /** `exchange`, timed from the first attempt to the answer. */
  const timedExchange = async <A>(call: Call, capability: string, exchangeOf: (target: Target) => Exchange<A>) => {
    const started = performance.now()
    const done = await exchange(call, capability, exchangeOf)
    return { ...done, latencyMs: Math.round(performance.now() - started) }
  }

  /** The tokenizer's count of texts, for upstreams that report none. */
  const countOf = (texts: ReadonlyArray<string>) => run(countTexts(texts))

  // Routing only picks targets whose provider serves the call (Providers/Registry.ts).
  const wireOf = (target: Target) => servedBy(target.provider).chat!

  const authorized = (target: Target, request: WireRequest, call: Call) => authorize(target.provider, request, call.cancel)

  const complete = async (call: ChatCall): Promise<CompletionResult> => {
    const started = performance.now()
    const { fallbacks, target, value } = await exchange(call, "chat", (t) => {
      const wire = wireOf(t)
      return {
        request: wire.request(t, call.request(t), false),
        result: (provider, body) => chatAnswerOf(wire, provider, body)
      }
    })
    const latencyMs = Math.round(performance.now() - started)
    // The tokenizer (an Effect) only when the upstream did not report usage.
    const report = reportedUsage(value.usage) ??
      (await run(estimatedUsage(value.usage, call.messages, answeredText(value))))
    await record(call.avatar, target, "chat", report, latencyMs, true, call.requestId)
    return {
      provider: target.provider.id,
      model: target.model.id,
      content: value.content,
      message: { role: "assistant", content: value.content, toolCalls: value.toolCalls },
      toolCalls: value.toolCalls,
      finishReason: value.finishReason,
      usage: report,
      costUSD: costOf(target.model, report.promptTokens, report.completionTokens, report),
      costKnown: costKnown(target.model),
      ...(value.extra ? { extra: value.extra } : {}),
      ...(value.reasoning ? { reasoning: value.reasoning } : {}),
      ...(value.stopSequence !== undefined ? { stopSequence: value.stopSequence } : {}),
      latencyMs,
      fallbacks
    }
  }

  const embed = async (call: EmbedCall): Promise<EmbeddingsResult> => {
    const { fallbacks, latencyMs, target, value } = await timedExchange(call, "embeddings", (t) => {
      const wire = servedBy(t.provider).embeddings!
      return { request: wire.request(t, call.texts), result: (provider, body) => wire.result(provider, body, call.texts.length) }
    })
    const reported = reportedCount(value.promptTokens)
    const estimated = reported === undefined
    const promptTokens = reported ?? (await countOf(call.texts))
    const report: UsageReport = { promptTokens, completionTokens: 0, totalTokens: promptTokens, estimated }
    await record(call.avatar, target, "embeddings", report, latencyMs, true, call.requestId)
    return {
      provider: target.provider.id,
      model: target.model.id,
      embeddings: value.vectors,
      dimensions: value.vectors[0]?.length ?? 0,
      usage: { promptTokens, totalTokens: promptTokens, estimated },
      costUSD: costOf(target.model, promptTokens, 0),
      costKnown: costKnown(target.model),
      latencyMs,
      fallbacks
    }
  }

  /** The most search units a rerank of `documents` can bill: a unit per 100 chunks, a chunk per character at most. */
  const plausibleSearchUnits = (documents: ReadonlyArray<string>) => {
    let characters = 0
    for (const d of documents) characters += d.length
    return Math.max(1, Math.ceil(characters / 100))
  }

  /**
   * Reranks through the first target that answers. Its cost is the model's price per 1K of what
   * the vendor bills by (Providers/Rerank.ts `billing`): tokens, or searches (Cohere).
   */
  const rerank = async (call: RerankCall): Promise<RerankResult> => {
    const { fallbacks, latencyMs, target, value } = await timedExchange(call, "rerank", (t) => {
      const wire = servedBy(t.provider).rerank!
      return { request: wire.request(t, call.query, call.documents, call.topN), result: (provider, body) => wire.result(provider, body, call.documents.length) }
    })
    const perSearch = servedBy(target.provider).rerank!.billing === "searches"
    // Cohere: one search unit is a query with up to 100 documents (a long one split into chunks, each
    // of at least a character): more units than a hundredth of the documents' characters cannot be
    // and are taken as not reported (1e9 units on 20 documents recorded $2,000,000).
    const [tokens, reportedUnits] = [reportedCount(value.tokens), reportedCount(value.searchUnits)]
    const units = reportedUnits !== undefined && reportedUnits <= plausibleSearchUnits(call.documents) ? reportedUnits : undefined
    const searchUnits = perSearch ? units ?? Math.ceil(call.documents.length / 100) : undefined
    const totalTokens = tokens ?? (await countOf([call.query, ...call.documents]))
    const estimated = tokens === undefined || (perSearch && units === undefined)
    const costUSD = costOf(target.model, searchUnits ?? totalTokens, 0)
    await recordUsage({
      avatarId: call.avatar.id,
      provider: target.provider.id,
      model: target.model.id,
      capability: "rerank",
      promptTokens: totalTokens,
      completionTokens: 0,
      costUSD,
      latencyMs,
      estimated,
      ok: true
    }, call.requestId)
    return {
      provider: target.provider.id,
      model: target.model.id,
      results: value.ranked.slice(0, call.topN).map((r) => ({ index: r.index, document: call.documents[r.index]!, score: r.score })),
      usage: { totalTokens, estimated, ...(searchUnits !== undefined ? { searchUnits } : {}) },
      costUSD,
      costKnown: costKnown(target.model),
      latencyMs,
      fallbacks
    }
  }

  const idleMs = Duration.toMillis(STREAM_IDLE_TIMEOUT)

  const openStream = async (call: ChatCall): Promise<ChatStream> => {
    const started = performance.now()
    const { target, value: body } = await firstSuccess(call, "chat", async (t) => {
      const { body, headers, url } = await authorized(t, wireOf(t).request(t, call.request(t), true), call)
      return postSseNow(t.provider.id, url, RequestId.withHeader(headers, call.requestId), body, call.cancel)
    }, false)
    const provider = target.provider.id
    // A stop asked before the run began waits here for it; once running, `stopRun` ends it.
    let stopped: StreamError | undefined
    let stopRun: ((error: StreamError) => void) | undefined
    const account = makeStreamAccount()
    return {
      target,
      reportedInput: account.reportedInput,
      stop: (error) => (stopRun === undefined ? (stopped ??= error) : stopRun(error)),
      run: (emit) =>
        unfinished(new Promise<void>((resolve, reject) => {
          const wire = wireOf(target)
          const parser = wire.framing?.() ?? makeSseParser()
          const decode = wire.events(provider)
          let ended = false
          let timer: ReturnType<typeof setTimeout> | undefined
          let stopListening: (() => void) | undefined
          // Ends the stream once: counts the attempt, records usage, then emits the final chunk unless
          // the caller aborted. `failure` is the upstream's, or a stop of the gateway's own (which says
          // nothing of the provider's health).
          const end = (failure?: UpstreamError | { readonly stop: StreamError }) => {
            if (ended) return
            ended = true
            running.delete(stopRun!)
            const stop = failure instanceof UpstreamError ? undefined : failure?.stop
            const upstreamFailure = failure instanceof UpstreamError
              ? failure
              : failure === undefined && account.finishReason() === "error" ? upstreamFailedAnswer(provider) : undefined
            const error = upstreamFailure !== undefined ? streamErrorOf(upstreamFailure) : stop
            clearTimeout(timer)
            body.off("data", onData)
            stopListening?.()
            const aborted = call.cancel.aborted
            if (error === undefined && !aborted) release(body)
            else body.destroy()
            // The stream's one health record (its opening recorded none); a stop or a client that left says nothing of the provider.
            if (upstreamFailure !== undefined || (stop === undefined && !aborted)) recordHealth(health, provider, upstreamFailure)
            countAttempt(provider, upstreamFailure?.kind ?? (stop !== undefined ? "stopped" : aborted ? "cancelled" : undefined))
            // The tokenizer (an Effect) only when the upstream did not report usage.
            // A stream that ends before any of its answer came (the upstream failed, the client left, the gateway stopped) is a call nobody answered.
            const reported = account.reported() ?? (error !== undefined || aborted ? account.unanswered() : undefined)
            unfinished((reported ? Promise.resolve(reported) : run(account.estimated(call.messages)))
              .then((r) =>
                record(call.avatar, target, "chat", r, Math.round(performance.now() - started), error === undefined && !aborted, call.requestId).then(() => {
                  if (aborted) return
                  const final = finalChunk(target, account.finishReason(), r, error, account.trailing(), account.stopSequence())
                  const padded = account.emptyArguments()
                  emit(padded ? [padded, final] : [final], true)
                })
              ))
              .then(resolve, reject)
          }
          const take = (events: ReadonlyArray<SseEvent>, upstreamDone = false) => {
            const { chunks, stop } = account.onRead(events, decode)
            if (chunks.length > 0) {
              const whenReady = emit(chunks, upstreamDone || stop !== undefined)
              if (whenReady !== undefined && !upstreamDone && stop === undefined) holdUpstream(whenReady)
            }
            if (stop !== undefined) end(stop ?? undefined)
          }
          // The reader is full: the upstream is not read, nor timed for idleness, until it can take more.
          const holdUpstream = (whenReady: WhenReady) => {
            body.pause()
            clearTimeout(timer)
            timer = undefined
            whenReady(() => {
              if (ended) return
              arm()
              body.resume()
            })
          }
          // The idle timer restarts on every read (refresh: no new timer), keep-alive comments
          // included: upstreams send them while the answer waits for capacity (DeepSeek, OpenRouter).
          const arm = () => {
            if (timer === undefined) timer = setTimeout(() => end(idleError(provider)()), idleMs)
            else timer.refresh()
          }
          // A body with no event in it (an error page, a JSON answer to a stream request) is no empty answer.
          let anyEvent = false
          // Reading runs in the body's event handlers: what throws there ends this stream, not the process.
          const onData = (bytes: Uint8Array) => {
            if (ended) return
            arm()
            try {
              const events = parser.push(bytes)
              if (events.length === 0) return
              anyEvent = true
              take(events)
            } catch (e) {
              end(unreadableAnswer(provider, e))
            }
          }
          const onEnd = () => {
            const last = parser.end()
            if (!anyEvent && last.length === 0) return end(protocolError(provider, "the stream ended without any event"))
            take(last, true)
            if (ended) return
            // Neither the wire's end marker nor a finish reason: the upstream stopped mid-answer.
            end(account.finished() ? undefined : protocolError(provider, "the stream ended before the answer did (no finish reason, no end marker)"))
          }
          body.on("data", onData)
          body.once("end", () => {
            if (ended) return
            try {
              onEnd()
            } catch (e) {
              end(unreadableAnswer(provider, e))
            }
          })
          body.once("error", (e) => end(streamBroke(provider)(e)))
          stopRun = (error) => end({ stop: error })
          // A body that failed before anyone listened keeps its error (nodeFetch's `bounded`).
          if (body.errored) end(streamBroke(provider)(body.errored))
          else if (call.cancel.aborted) end()
          else if (stopped !== undefined || stopping !== undefined) end({ stop: stopped ?? stopping!.stream })
          else {
            stopListening = call.cancel.onAbort(() => end())
            running.add(stopRun)
            arm()
          }
        }))
    }
  }

  return { complete, embed, rerank, openStream, stopCalls, exchange, firstSuccess, firstSuccessEffect, record, recordUsage }
})

export class ProviderCalls extends Context.Tag("aigw/ProviderCalls")<ProviderCalls, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.scoped(ProviderCalls, makeService)
