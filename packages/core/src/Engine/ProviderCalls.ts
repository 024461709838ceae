/**
 * One chat call as plain promises: the fallback loop over routing targets (retryable upstream
 * failures only, never once a stream started), the exchange through the family's ChatWire,
 * provider health, the usage estimate when the upstream reports none, and usage recording.
 * Completions (Effect) runs plain completions through it; the HTTP fast lane runs plain and
 * streamed ones. Nothing here creates fibers per call: a metered call pays for its work only.
 * The request id of the call (RequestId.ts) goes upstream as `x-request-id` and on its log lines;
 * the upstream metrics (attempts, errors, tokens, cost; Metrics.ts) are counted here.
 */
import { Context, Duration, Effect, Layer, Runtime } from "effect"
import { costOf } from "../Cost.ts"
import type { GatewayError } from "../Errors.ts"
import { chatWires } from "../Providers/Adapters.ts"
import type { ChatMessage, ChatRequest, ChatResult, FinishReason, StreamEvent, Target } from "../Providers/Chat.ts"
import { release } from "../Providers/internal/events.ts"
import { idleError, postJsonNow, postSseNow, STREAM_IDLE_TIMEOUT, streamBroke } from "../Providers/internal/http.ts"
import { makeSseParser, type SseEvent } from "../Providers/internal/sse.ts"
import { ProviderHealth } from "../Providers/ProviderHealth.ts"
import { toGatewayError, UpstreamError } from "../Providers/UpstreamError.ts"
import { utcDay } from "../Quota.ts"
import type { Fallback } from "../Routing.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { Metering } from "../Storage/Metering.ts"
import { countMessages, countText } from "../Tokens.ts"
import * as Metrics from "../Metrics.ts"
import * as RequestId from "../RequestId.ts"

export interface UsageReport {
  readonly promptTokens: number
  readonly completionTokens: number
  readonly totalTokens: number
  /** True when counted by the gateway's tokenizer because the upstream reported none. */
  readonly estimated: boolean
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
  readonly latencyMs: number
  /** Earlier candidates that failed with a retryable error before this one answered. */
  readonly fallbacks: ReadonlyArray<Fallback>
}

/** One chunk of `/v1/complete/stream` (the spec's fields plus documented extras). */
export interface StreamChunk {
  readonly content: string
  readonly done: boolean
  readonly toolCalls?: ReadonlyArray<{ readonly index: number; readonly id?: string; readonly name?: string; readonly arguments: string }>
  readonly promptTokens?: number
  readonly completionTokens?: number
  readonly finishReason?: FinishReason
  readonly provider?: string
  readonly model?: string
  readonly costUSD?: number
  readonly estimated?: boolean
  readonly error?: string
}

/** Tokenizer counts for a call whose upstream reported no usage. */
export const estimate = (messages: ReadonlyArray<ChatMessage>, completion: string) =>
  Effect.map(Effect.all([countMessages(messages), countText(completion)]), ([promptTokens, completionTokens]): UsageReport => ({
    promptTokens,
    completionTokens,
    totalTokens: promptTokens + completionTokens,
    estimated: true
  }))

/**
 * What a stream has delivered so far: turns adapter events into chunks and keeps the text, finish
 * reason and upstream token counts for the final chunk and the usage record.
 */
export const makeStreamAccount = () => {
  let text = ""
  let finish: FinishReason = "stop"
  let prompt: number | undefined
  let completion: number | undefined
  return {
    /** The chunk for an event, if it makes one (finish reasons and usage only update the account). */
    onEvent: (e: StreamEvent): StreamChunk | undefined => {
      switch (e._tag) {
        case "Text":
          text += e.text
          return { content: e.text, done: false }
        case "ToolCallDelta":
          text += e.arguments
          return {
            content: "",
            done: false,
            toolCalls: [{ index: e.index, ...(e.id ? { id: e.id } : {}), ...(e.name ? { name: e.name } : {}), arguments: e.arguments }]
          }
        case "Finish":
          finish = e.reason
          return undefined
        case "Usage":
          if (e.usage.promptTokens !== undefined) prompt = e.usage.promptTokens
          if (e.usage.completionTokens !== undefined) completion = e.usage.completionTokens
          return undefined
      }
    },
    finishReason: () => finish,
    /** The usage as the upstream reported it, when it reported both counts. */
    reported: (): UsageReport | undefined =>
      prompt !== undefined && completion !== undefined
        ? { promptTokens: prompt, completionTokens: completion, totalTokens: prompt + completion, estimated: false }
        : undefined,
    /** The usage: the upstream's counts, with the tokenizer's for whatever it did not report. */
    report: (messages: ReadonlyArray<ChatMessage>): Effect.Effect<UsageReport> => {
      if (prompt !== undefined && completion !== undefined) {
        return Effect.succeed({ promptTokens: prompt, completionTokens: completion, totalTokens: prompt + completion, estimated: false })
      }
      const [p, c] = [prompt, completion]
      return Effect.map(estimate(messages, text), (e) => {
        const promptTokens = p ?? e.promptTokens
        const completionTokens = c ?? e.completionTokens
        return { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens, estimated: true }
      })
    }
  }
}

/** The last chunk of a stream: totals, or the error that ended it. */
export const finalChunk = (target: Target, finish: FinishReason, r: UsageReport, error?: string): StreamChunk => ({
  content: "",
  done: true,
  promptTokens: r.promptTokens,
  completionTokens: r.completionTokens,
  finishReason: error === undefined ? finish : "error",
  provider: target.provider.id,
  model: target.model.id,
  costUSD: costOf(target.model, r.promptTokens, r.completionTokens),
  estimated: r.estimated,
  ...(error !== undefined ? { error } : {})
})

/** An opened stream: the target that accepted it, and `run`, which delivers its chunks. */
export interface ChatStream {
  readonly target: Target
  /**
   * Calls `emit` with the chunks of each upstream read, then once with the final chunk (totals,
   * or the error that ended the stream), and resolves. Usage is recorded once, also when the
   * caller aborts (then nothing more is emitted).
   */
  readonly run: (emit: (chunks: ReadonlyArray<StreamChunk>) => void) => Promise<void>
}

export interface ChatCall {
  readonly avatar: AvatarRecord
  /** The messages as sent (for usage estimates). */
  readonly messages: ReadonlyArray<ChatMessage>
  /** Candidates in order (Routing), at least one. */
  readonly targets: ReadonlyArray<Target>
  readonly request: (target: Target) => ChatRequest
  /** Aborting it cancels the upstream call (a client that went away). */
  readonly controller: AbortController
  /** The id of the request that makes the call (RequestId.ts): sent upstream as `x-request-id`. */
  readonly requestId?: string | undefined
}

const makeService = Effect.gen(function*() {
  const health = yield* ProviderHealth
  const metering = yield* Metering
  const run = Runtime.runPromise(yield* Effect.runtime<never>())
  const warn = (target: Target, error: UpstreamError, requestId: string | undefined) => {
    const line = Effect.logWarning(`upstream ${target.provider.id}/${target.model.id} failed: ${error.message}`)
    return run(requestId === undefined ? line : Effect.annotateLogs(line, "requestId", requestId))
  }

  /** Records a chat call's usage (its cost from the target's model prices). */
  const record = (avatar: AvatarRecord, target: Target, report: UsageReport, latencyMs: number, ok: boolean) => {
    const at = Date.now()
    const provider = target.provider.id
    const costUSD = costOf(target.model, report.promptTokens, report.completionTokens)
    Metrics.tokens.inc([provider, "prompt"], report.promptTokens)
    Metrics.tokens.inc([provider, "completion"], report.completionTokens)
    Metrics.costUsd.inc([provider], costUSD)
    return metering.record({
      avatarId: avatar.id,
      day: utcDay(at),
      at,
      provider: target.provider.id,
      model: target.model.id,
      capability: "chat",
      promptTokens: report.promptTokens,
      completionTokens: report.completionTokens,
      costUSD,
      latencyMs,
      estimated: report.estimated,
      ok
    })
  }

  /**
   * Tries the targets in order with `attempt`; the next only after a retryable failure. Rejects
   * with the gateway error of the last failure (or the abort, untouched).
   */
  const firstSuccess = async <A>(call: ChatCall, attempt: (target: Target) => Promise<A>) => {
    const fallbacks: Array<Fallback> = []
    for (let i = 0; ; i++) {
      const target = call.targets[i]!
      try {
        const value = await attempt(target)
        health.recordNow(target.provider.id, true)
        Metrics.upstreamCalls.inc([target.provider.id, "ok"])
        return { target, value, fallbacks }
      } catch (e) {
        if (!(e instanceof UpstreamError) || call.controller.signal.aborted) throw e
        health.recordNow(target.provider.id, !e.retryable)
        Metrics.upstreamCalls.inc([target.provider.id, "error"])
        Metrics.upstreamErrors.inc([target.provider.id, e.kind])
        void warn(target, e, call.requestId)
        if (!e.retryable || i === call.targets.length - 1) throw toGatewayError(e) satisfies GatewayError
        fallbacks.push({ provider: target.provider.id, model: target.model.id, error: e.message })
      }
    }
  }

  const wireOf = (target: Target) => chatWires[target.provider.adapter]!

  const complete = async (call: ChatCall): Promise<CompletionResult> => {
    const started = performance.now()
    const { fallbacks, target, value } = await firstSuccess(call, async (t) => {
      const wire = wireOf(t)
      const { body, headers, url } = wire.request(t, call.request(t), false)
      const sent = RequestId.withHeader(headers, call.requestId)
      const result = wire.result(t.provider.id, await postJsonNow(t.provider.id, url, sent, body, call.controller))
      if (result instanceof UpstreamError) throw result
      return result
    })
    const latencyMs = Math.round(performance.now() - started)
    const report: UsageReport = value.usage
      ? { ...value.usage, totalTokens: value.usage.promptTokens + value.usage.completionTokens, estimated: false }
      : await run(estimate(call.messages, value.content + value.toolCalls.map((c) => c.arguments).join("")))
    await record(call.avatar, target, report, latencyMs, true)
    return {
      provider: target.provider.id,
      model: target.model.id,
      content: value.content,
      message: { role: "assistant", content: value.content, toolCalls: value.toolCalls },
      toolCalls: value.toolCalls,
      finishReason: value.finishReason,
      usage: report,
      costUSD: costOf(target.model, report.promptTokens, report.completionTokens),
      latencyMs,
      fallbacks
    }
  }

  const idleMs = Duration.toMillis(STREAM_IDLE_TIMEOUT)

  const openStream = async (call: ChatCall): Promise<ChatStream> => {
    const started = performance.now()
    const { target, value: body } = await firstSuccess(call, (t) => {
      const { body, headers, url } = wireOf(t).request(t, call.request(t), true)
      return postSseNow(t.provider.id, url, RequestId.withHeader(headers, call.requestId), body, call.controller)
    })
    const provider = target.provider.id
    return {
      target,
      run: (emit) =>
        new Promise<void>((resolve, reject) => {
          const parser = makeSseParser()
          const decode = wireOf(target).events(provider)
          const account = makeStreamAccount()
          let ended = false
          let timer: ReturnType<typeof setTimeout> | undefined
          // Ends the stream once: records usage, then emits the final chunk unless the caller aborted.
          const end = (error?: string) => {
            if (ended) return
            ended = true
            clearTimeout(timer)
            body.off("data", onData)
            call.controller.signal.removeEventListener("abort", onAbort)
            const aborted = call.controller.signal.aborted
            if (error === undefined && !aborted) release(body)
            else body.destroy()
            if (error !== undefined) health.recordNow(provider, false)
            // The tokenizer (an Effect) only when the upstream did not report usage.
            const reported = account.reported()
            ;(reported ? Promise.resolve(reported) : run(account.report(call.messages)))
              .then((r) =>
                record(call.avatar, target, r, Math.round(performance.now() - started), error === undefined && !aborted).then(() => {
                  if (!aborted) emit([finalChunk(target, account.finishReason(), r, error)])
                })
              )
              .then(resolve, reject)
          }
          const take = (events: ReadonlyArray<SseEvent>) => {
            const out: Array<StreamChunk> = []
            let stop: string | null | undefined
            for (const event of events) {
              const decoded = decode(event)
              if (decoded === null || decoded instanceof UpstreamError) {
                stop = decoded === null ? null : decoded.message
                break
              }
              for (const e of decoded) {
                const chunk = account.onEvent(e)
                if (chunk) out.push(chunk)
              }
            }
            if (out.length > 0) emit(out)
            if (stop !== undefined) end(stop ?? undefined)
          }
          // The idle timer restarts on every read that completed an event (refresh: no new timer).
          const arm = () => {
            if (timer === undefined) timer = setTimeout(() => end(idleError(provider)().message), idleMs)
            else timer.refresh()
          }
          const onData = (bytes: Uint8Array) => {
            if (ended) return
            const events = parser.push(bytes)
            if (events.length === 0) return
            arm()
            take(events)
          }
          const onAbort = () => end()
          body.on("data", onData)
          body.once("end", () => {
            if (ended) return
            take(parser.end())
            end()
          })
          body.once("error", (e) => end(streamBroke(provider)(e).message))
          call.controller.signal.addEventListener("abort", onAbort, { once: true })
          arm()
        })
    }
  }

  return { complete, openStream, record }
})

export class ChatCalls extends Context.Tag("aigw/ChatCalls")<ChatCalls, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(ChatCalls, makeService)
