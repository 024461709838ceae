/**
 * The Effect path's streamed chat answer (CompletionRoutes.ts `streamAnswer`) as a web `Response`,
 * the form the Lambda host sends: the text in order, the upstream's scope closed at the end, and
 * closed at once (the upstream call aborted) when the reader cancels mid-stream. Node's server,
 * which writes the same body, is covered end to end by hosts/node-http/test/fastlane.e2e.test.ts.
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, type Scope } from "effect"
import { describe, expect, it } from "vitest"
import type { ChatStream, StreamChunk, StreamError } from "../../src/Engine/ProviderCalls.ts"
import { streamAnswer } from "../../src/Http/CompletionRoutes.ts"
import { RequestDeadline } from "../../src/Http/RequestDeadline.ts"

const chunk = (content: string, done = false): StreamChunk => ({ content, done })

/** A chat stream the test drives: `send` emits, `finish` resolves the run; `closed` counts scope closes, `started` runs, `stops` the stops asked. */
const driven = () => {
  const state = { closed: 0, started: 0, stops: [] as Array<StreamError> }
  let emit!: (chunks: ReadonlyArray<StreamChunk>, upstreamDone: boolean) => void
  let finish!: () => void
  const stream: ChatStream = {
    target: undefined as never,
    reportedInput: () => ({}),
    run: (e) => {
      state.started++
      emit = e
      return new Promise<void>((resolve) => (finish = resolve))
    },
    stop: (error) => void state.stops.push(error)
  }
  const open = Effect.as(Effect.addFinalizer(() => Effect.sync(() => void state.closed++)), stream)
  return { state, open, send: (...chunks: Array<StreamChunk>) => emit(chunks, false), finish: () => finish() }
}

const frames = (c: StreamChunk) => `data: ${c.content}\n\n`

const webResponse = (open: Effect.Effect<ChatStream, never, Scope.Scope>, deadline?: typeof RequestDeadline.Service) =>
  Effect.runPromise(
    Effect.map(streamAnswer(open, () => ({ frames, opening: "data: open\n\n", trailer: "data: [DONE]\n\n" })), (r) => HttpServerResponse.toWeb(r)).pipe(
      deadline === undefined ? (e) => e : Effect.provideService(RequestDeadline, deadline)
    )
  )

const settle = () => new Promise((resolve) => setTimeout(resolve, 10))

describe("streamAnswer as a web Response (the Lambda host's form)", () => {
  it("sends the opening before the upstream's first chunk, then each emission, the trailer and the end; the scope closes once, at the end", async () => {
    const d = driven()
    const response = await webResponse(d.open)
    expect(response.headers.get("content-type")).toBe("text/event-stream")
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    const first = await reader.read()
    expect(decoder.decode(first.value)).toBe("data: open\n\n")
    expect(d.state.started).toBe(1)
    d.send(chunk("a"), chunk("b"))
    expect(decoder.decode((await reader.read()).value)).toBe("data: a\n\ndata: b\n\n")
    d.send(chunk("", true))
    d.finish()
    let rest = ""
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += decoder.decode(r.value)
    expect(rest).toBe("data: \n\ndata: [DONE]\n\n")
    await settle()
    expect(d.state.closed).toBe(1)
  })

  it("a reader that cancels mid-stream closes the scope at once (the upstream call is aborted), and later emissions go nowhere", async () => {
    const d = driven()
    const response = await webResponse(d.open)
    const reader = response.body!.getReader()
    await reader.read()
    d.send(chunk("a"))
    await reader.read()
    expect(d.state.closed).toBe(0)
    await reader.cancel()
    await settle()
    expect(d.state.closed).toBe(1)
    d.send(chunk("late"))
    d.finish()
    await settle()
    expect(d.state.closed).toBe(1)
  })

  it("a run that fails ends the body with an error, and the scope closes", async () => {
    const state = { closed: 0 }
    const failing: ChatStream = { target: undefined as never, reportedInput: () => ({}), run: () => Promise.reject(new Error("engine broke")), stop: () => undefined }
    const open = Effect.as(Effect.addFinalizer(() => Effect.sync(() => void state.closed++)), failing)
    const response = await webResponse(open)
    await expect(response.text()).rejects.toThrow()
    await settle()
    expect(state.closed).toBe(1)
  })

  it("a stream still running at the request's deadline is stopped with the deadline's message; one that ended before is not", async () => {
    const message = "out of time"
    const late = driven()
    const response = await webResponse(late.open, { at: Date.now() + 300, message })
    const reader = response.body!.getReader()
    await reader.read()
    late.send(chunk("a"))
    await reader.read()
    expect(late.state.stops).toEqual([])
    await new Promise((resolve) => setTimeout(resolve, 400))
    expect(late.state.stops).toEqual([{ message, code: "UpstreamTimeout" }])
    // The engine's stop emits the final chunk and ends the run; the stream then ends as any other.
    late.send(chunk("", true))
    late.finish()
    for (let r = await reader.read(); !r.done; r = await reader.read());
    await settle()
    expect(late.state.closed).toBe(1)

    const early = driven()
    const answered = await webResponse(early.open, { at: Date.now() + 300, message })
    const text = answered.text()
    await settle()
    early.send(chunk("", true))
    early.finish()
    await text
    await new Promise((resolve) => setTimeout(resolve, 400))
    expect(early.state.stops).toEqual([])

    const past = driven()
    await webResponse(past.open, { at: Date.now() - 1, message })
    await settle()
    expect(past.state.stops).toEqual([{ message, code: "UpstreamTimeout" }])
  })
})
