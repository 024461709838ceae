/**
 * The one SSE parser: bytes -> events ({ event, data }), per the WHATWG EventSource rules
 * (UTF-8, one leading byte order mark ignored; LF, CR or CRLF line ends; multi-line data joined
 * with \n; comments ignored; an event the stream ends in the middle of, before its blank line, is
 * not dispatched: it may be cut anywhere, even inside its JSON or after a finish reason's line).
 */
import { StringDecoder } from "node:string_decoder"

export interface SseEvent {
  readonly event: string
  readonly data: string
}

/** An incremental parser: `push` bytes and get the events completed so far; `end` those the last bytes complete. */
export const makeSseParser = () => {
  // node's StringDecoder rather than TextDecoder: a streaming TextDecoder decodes through ICU, several
  // times slower on every upstream read. Invalid bytes become U+FFFD with either; the byte order
  // mark, which TextDecoder drops, is dropped in `push`.
  const decoder = new StringDecoder("utf8")
  let first = true
  let event = ""
  let data: Array<string> = []
  const take = (line: string, out: Array<SseEvent>) => {
    if (line === "") {
      if (data.length > 0) out.push({ event: event || "message", data: data.length === 1 ? data[0]! : data.join("\n") })
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
  // Only new text is scanned: the line still being received waits in `partial`, so a long line
  // (up to the reply limit) costs linear time rather than a rescan of it per chunk. Line ends are
  // found with indexOf (no match object per line).
  let partial = ""
  // The last text ended in CR: an LF first in the next one is the rest of that line end.
  let skipLf = false
  const feed = (text: string, out: Array<SseEvent>) => {
    if (text === "") return
    let start = skipLf && text.charCodeAt(0) === 10 ? 1 : 0
    skipLf = false
    // The next CR and LF at or after `start`, each searched again only once passed: linear in the text.
    let cr = text.indexOf("\r", start)
    let lf = text.indexOf("\n", start)
    for (;;) {
      if (cr !== -1 && cr < start) cr = text.indexOf("\r", start)
      if (lf !== -1 && lf < start) lf = text.indexOf("\n", start)
      const end = cr === -1 ? lf : lf === -1 ? cr : Math.min(cr, lf)
      if (end === -1) break
      take(partial === "" ? text.slice(start, end) : partial + text.slice(start, end), out)
      partial = ""
      start = end + 1
      if (end === cr) {
        if (start === text.length) skipLf = true
        else if (text.charCodeAt(start) === 10) start++
      }
    }
    partial += text.slice(start)
  }
  return {
    push: (chunk: Uint8Array): Array<SseEvent> => {
      const out: Array<SseEvent> = []
      let text = decoder.write(chunk)
      if (first && text !== "") {
        first = false
        if (text.charCodeAt(0) === 0xfeff) text = text.slice(1)
      }
      feed(text, out)
      return out
    },
    end: (): Array<SseEvent> => {
      const out: Array<SseEvent> = []
      feed(decoder.end(), out)
      partial = ""
      event = ""
      data = []
      return out
    }
  }
}
