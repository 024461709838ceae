/** RESPONSE_STREAM output: the HTTP integration prelude, the body after it, and the `awslambda` runtime hooks when present. */
import { afterEach, describe, expect, it } from "vitest"
import { streamify, streamResponse, type ResponseStream } from "../../src/Lambda/Streaming.ts"
import { RecordingStream } from "./support/events.ts"

const runtimeGlobal = globalThis as { awslambda?: unknown }

describe("streamResponse", () => {
  afterEach(() => {
    delete runtimeGlobal.awslambda
  })

  it("writes the prelude (status, single headers, cookies), 8 NUL bytes, then the body", async () => {
    const headers = new Headers({ "content-type": "text/event-stream", connection: "keep-alive" })
    headers.append("set-cookie", "a=1")
    const stream = new RecordingStream()
    await streamResponse(stream, new Response("data: 1\n\n", { status: 201, headers }), new AbortController())
    expect(stream.contentType).toBe("application/vnd.awslambda.http-integration-response")
    expect(stream.parts()).toEqual({
      metadata: { statusCode: 201, headers: { "content-type": "text/event-stream" }, cookies: ["a=1"] },
      body: "data: 1\n\n"
    })
    expect(stream.endedAt).toBeGreaterThan(0)
  })

  it("an empty body still sends the prelude and ends the stream", async () => {
    const stream = new RecordingStream()
    await streamResponse(stream, new Response(null, { status: 204 }), new AbortController())
    expect(stream.parts()).toEqual({ metadata: { statusCode: 204, headers: {}, cookies: [] }, body: "" })
    expect(stream.endedAt).toBeGreaterThan(0)
  })

  it("a body that fails midway aborts the request instead of rejecting", async () => {
    const abort = new AbortController()
    const body = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode("data: 1\n\n"))
        controller.error(new Error("upstream reset"))
      }
    })
    await streamResponse(new RecordingStream(), new Response(body), abort)
    expect(abort.signal.aborted).toBe(true)
  })

  it("inside the Lambda runtime the prelude is written by awslambda.HttpResponseStream.from", async () => {
    const seen: Array<unknown> = []
    runtimeGlobal.awslambda = {
      HttpResponseStream: {
        from: (stream: ResponseStream, metadata: unknown) => {
          seen.push(metadata)
          return stream
        }
      }
    }
    const stream = new RecordingStream()
    await streamResponse(stream, new Response("ok", { status: 200 }), new AbortController())
    expect(seen).toEqual([{ statusCode: 200, headers: { "content-type": "text/plain;charset=UTF-8" }, cookies: [] }])
    expect(Buffer.concat(stream.writes.map((w) => w.bytes)).toString("utf8")).toBe("ok")
    expect(stream.contentType).toBeUndefined()
  })
})

describe("streamify", () => {
  afterEach(() => {
    delete runtimeGlobal.awslambda
  })

  const handler = async (_event: unknown, _stream: ResponseStream) => {}

  it("returns the handler as it is without the awslambda global", () => {
    expect(streamify(handler)).toBe(handler)
  })

  it("marks the handler with awslambda.streamifyResponse when the runtime provides it", () => {
    const marked = async () => {}
    runtimeGlobal.awslambda = { streamifyResponse: (h: unknown) => (h === handler ? marked : undefined) }
    expect(streamify(handler)).toBe(marked)
  })
})
