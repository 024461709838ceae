/**
 * The one SSE parser: bytes -> events ({ event, data }), per the WHATWG EventSource rules
 * (LF, CR or CRLF line ends; multi-line data joined with \n; comments ignored).
 */
import { Stream } from "effect"

export interface SseEvent {
  readonly event: string
  readonly data: string
}

/** An incremental parser: `push` bytes and get the events completed so far; `end` flushes the rest. */
export const makeSseParser = () => {
  const decoder = new TextDecoder()
  let buffer = ""
  let event = ""
  let data: Array<string> = []
  const take = (line: string, out: Array<SseEvent>) => {
    if (line === "") {
      if (data.length > 0) out.push({ event: event || "message", data: data.join("\n") })
      event = ""
      data = []
      return
    }
    if (line.startsWith(":")) return
    const colon = line.indexOf(":")
    const field = colon === -1 ? line : line.slice(0, colon)
    let value = colon === -1 ? "" : line.slice(colon + 1)
    if (value.startsWith(" ")) value = value.slice(1)
    if (field === "data") data.push(value)
    else if (field === "event") event = value
  }
  // Lines are cut from `buffer` by index and the rest kept once per push: re-slicing the
  // remainder after every line made a chunk of many events quadratic.
  const lineEnd = /\r\n|\r|\n/g
  const drain = (final: boolean) => {
    const out: Array<SseEvent> = []
    let start = 0
    for (;;) {
      lineEnd.lastIndex = start
      const match = lineEnd.exec(buffer)
      // A lone trailing CR may be the first half of CRLF: wait for more bytes.
      if (!match || (match[0] === "\r" && match.index === buffer.length - 1 && !final)) break
      take(buffer.slice(start, match.index), out)
      start = match.index + match[0].length
    }
    buffer = start === 0 ? buffer : buffer.slice(start)
    if (final) {
      if (buffer !== "") take(buffer, out)
      buffer = ""
      take("", out)
    }
    return out
  }
  return {
    push: (chunk: Uint8Array): Array<SseEvent> => {
      buffer += decoder.decode(chunk, { stream: true })
      return drain(false)
    },
    end: (): Array<SseEvent> => drain(true)
  }
}

export const parseSse = <E>(bytes: Stream.Stream<Uint8Array, E>): Stream.Stream<SseEvent, E> =>
  Stream.suspend(() => {
    const parser = makeSseParser()
    return bytes.pipe(
      Stream.mapConcat(parser.push),
      Stream.concat(Stream.suspend(() => Stream.fromIterable(parser.end())))
    )
  })
