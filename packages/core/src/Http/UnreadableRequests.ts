/**
 * Requests node's HTTP parser refuses before any route sees them (headers past node's size limit, an
 * unknown method, a malformed request line, conflicting framing, a body cut off mid-send) and
 * `Expect` values other than 100-continue. Node answers these with a status and an empty body; here
 * they get the same status with the envelope of the request's path, like every other refusal.
 */
import type { Server } from "node:http"
import type { Duplex } from "node:stream"
import * as RequestId from "../RequestId.ts"
import { errorBody, envelopeOfPath } from "./Edge.ts"

/** The status and the reason of a parser's refusal, by node's error code. */
const refusalOf = (code: string | undefined): readonly [number, string] => {
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return [431, "its header section is larger than the server accepts (16 KB by default: node's --max-http-header-size)"]
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return [408, "it did not arrive in time"]
    case "HPE_INVALID_METHOD":
      return [400, "its method is not an HTTP method"]
    case "HPE_UNEXPECTED_CONTENT_LENGTH":
      return [400, "its Content-Length and Transfer-Encoding headers conflict (two lengths, or a length beside chunked)"]
    default:
      return [400, "it is not well-formed HTTP/1.1"]
  }
}

const REASONS: Readonly<Record<number, string>> = { 400: "Bad Request", 408: "Request Timeout", 417: "Expectation Failed", 431: "Request Header Fields Too Large" }

/** The path of a raw request's first line, when it has one ("/" otherwise): it picks the envelope. */
const pathOf = (raw: Buffer | undefined): string => {
  const sent = raw?.toString("latin1", 0, Math.min(raw.length, 4096)).split("\r\n", 1)[0]?.split(" ")[1]
  // The absolute form (`GET http://host/openai/v1/models HTTP/1.1`) names its path after the authority.
  const target = sent !== undefined && /^https?:\/\//i.test(sent) ? sent.replace(/^https?:\/\/[^/?#]*/i, "") || "/" : sent
  return target?.startsWith("/") ? target.split("?", 1)[0]! : "/"
}

/** A complete HTTP/1.1 answer with the envelope of `path`, closing the connection (the parser's state is lost). */
const answerText = (status: number, path: string, message: string): string => {
  const body = JSON.stringify(errorBody(envelopeOfPath(path), { _tag: status === 431 ? "PayloadTooLarge" : "BadRequest", message }))
  // A new id, as every answer carries one: the request's own could not be read.
  const ids = Object.entries(RequestId.answerHeaders(path, RequestId.fromHeader(undefined))).map(([name, value]) => `${name}: ${value}\r\n`).join("")
  return `HTTP/1.1 ${status} ${REASONS[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${ids}connection: close\r\n\r\n${body}`
}

/** Answers the parser's refusals and unmet expectations of `server` in envelopes (see the module comment). */
export const answerUnreadableRequests = <S extends Server>(server: S): S => {
  server.on("clientError", (error: Error & { code?: string; rawPacket?: Buffer }, socket: Duplex) => {
    // A reset, or a refusal after an answer began (node's own rule), gets nothing more.
    const answering = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage
    if (error.code === "ECONNRESET" || !socket.writable || answering?.headersSent) return void socket.destroy()
    const [status, reason] = refusalOf(error.code)
    // A request whose head was read and whose body did not come in time has no raw packet: the parser's request has its path.
    const receiving = (socket as Duplex & { parser?: { incoming?: { url?: string } | null } | null }).parser?.incoming?.url
    const path = error.rawPacket === undefined && receiving?.startsWith("/") ? receiving.split("?", 1)[0]! : pathOf(error.rawPacket)
    socket.end(answerText(status, path, `The request could not be read: ${reason}.`))
  })
  server.on("checkExpectation", (req, res) => {
    const path = (req.url ?? "/").split("?", 1)[0]!
    const body = JSON.stringify(errorBody(envelopeOfPath(path), {
      _tag: "BadRequest",
      message: `Expect: ${req.headers.expect} is not supported; only 100-continue is.`
    }))
    const id = RequestId.fromHeader(req.headers[RequestId.HEADER] as string | undefined)
    res.writeHead(417, { "content-type": "application/json", "content-length": Buffer.byteLength(body), connection: "close", ...RequestId.answerHeaders(path, id) }).end(body)
  })
  return server
}
