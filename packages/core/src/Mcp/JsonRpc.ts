/**
 * The JSON-RPC 2.0 front of /mcp: every message of a POST is checked here before the MCP server
 * sees it, and every answer has the shape JSON-RPC 2.0 defines. @effect/rpc's JSON-RPC
 * serialization answers parse errors, unknown methods, string ids and undecodable params with
 * "defects" (the code in `id`, internal details in `data`) and works through batches of any size;
 * here a batch is bounded, malformed messages get the standard codes, and only well-formed requests
 * for known methods with decodable params reach the server, renumbered (it takes numeric ids only).
 */
import { cutText } from "../Cut.ts"
import * as McpSchema from "@effect/ai/McpSchema"
import { type Either, type ParseResult, Schema } from "effect"
import { describeParseError, parseOptions } from "../Http/DecodeProblems.ts"

export const PARSE_ERROR = -32700
export const INVALID_REQUEST = -32600
export const METHOD_NOT_FOUND = -32601
export const INVALID_PARAMS = -32602
export const INTERNAL_ERROR = -32603

const STANDARD = new Set([PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR])

export type Id = string | number

export interface ErrorObject {
  readonly code: number
  readonly message: string
}

export interface Response {
  readonly jsonrpc: "2.0"
  readonly id: Id | null
  readonly result?: unknown
  readonly error?: ErrorObject
}

export const errorResponse = (id: Id | null, code: number, message: string): Response => ({ jsonrpc: "2.0", id, error: { code, message } })

/** One request of the body: answered here, or forwarded to the MCP server as request `internalId`. */
export type Slot =
  | { readonly _tag: "Answer"; readonly response: Response }
  | { readonly _tag: "Forward"; readonly id: Id; readonly internalId: number; readonly message: { readonly method: string; readonly [field: string]: unknown } }

export interface Plan {
  readonly batch: boolean
  /** One per request, in body order; notifications and responses have none. */
  readonly slots: ReadonlyArray<Slot>
}

export interface PlanOptions {
  readonly maxBatch: number
  /** The result for a `tools/call` of `name` refused before any work (no credentials), or undefined. */
  readonly refuseTool: (name: unknown) => unknown
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)
/**
 * MCP's request ids are strings or integers; an integer beyond 2^53 − 1 cannot be echoed as sent (JSON.parse
 * rounds it), so it is refused rather than answered under another id.
 */
const isId = (u: unknown): u is Id => typeof u === "string" || Number.isSafeInteger(u)

/** The id an error answer to `message` carries: its own when it is a valid one, else null. */
export const answerIdOf = (message: unknown): Id | null => (isRecord(message) && isId(message.id) ? message.id : null)

// The methods the MCP server serves, each with a validator of its params (built once).
const validators = new Map<string, (params: unknown) => Either.Either<unknown, ParseResult.ParseError>>(
  Array.from(McpSchema.ClientRequestRpcs.requests.values(), (rpc) => [
    rpc._tag,
    Schema.decodeUnknownEither(rpc.payloadSchema as Schema.Schema<unknown, unknown, never>, parseOptions)
  ])
)

/** MCP's error for a URI the server has no resource at. */
const RESOURCE_NOT_FOUND = -32002

/**
 * The server's error message, cut: it may quote the request (`Tool '…' not found` with a tool name of a
 * megabyte), which would come back whole.
 */
const shownMessage = (message: string) => cutText(message, 300)

const answer = (id: Id | null, code: number, message: string): Slot => ({ _tag: "Answer", response: errorResponse(id, code, message) })

/** What to do with one message; undefined for notifications and responses (nothing to answer). */
const slotOf = (message: unknown, internalId: number, options: PlanOptions): Slot | undefined => {
  if (!isRecord(message) || message.jsonrpc !== "2.0") {
    return answer(answerIdOf(message), INVALID_REQUEST, 'Invalid Request: expected a JSON-RPC 2.0 message ("jsonrpc": "2.0").')
  }
  const hasId = "id" in message
  if (!("method" in message)) {
    // A response to a server request: this stateless server sends none, so it is dropped.
    if (hasId && ("result" in message || "error" in message)) return undefined
    return answer(answerIdOf(message), INVALID_REQUEST, "Invalid Request: method is missing.")
  }
  if (typeof message.method !== "string") return answer(answerIdOf(message), INVALID_REQUEST, "Invalid Request: method must be a string.")
  // Notifications are no-ops on this stateless server (no session to initialise, no request of theirs to cancel).
  if (!hasId) return undefined
  const id = message.id
  if (!isId(id)) return answer(null, INVALID_REQUEST, "Invalid Request: id must be a string or an integer (at most 2^53 − 1 in size).")
  const validate = validators.get(message.method)
  if (validate === undefined) return answer(id, METHOD_NOT_FOUND, `Method not found: ${cutText(message.method, 100)}`)
  let params = message.params
  if (message.method === "tools/call") {
    // Credentials before anything else, as on the HTTP routes: no work for a call that will be refused.
    const refused = options.refuseTool(isRecord(params) ? params.name : undefined)
    if (refused !== undefined) return { _tag: "Answer", response: { jsonrpc: "2.0", id, result: refused } }
    // MCP makes `arguments` optional; the server's schema does not.
    if (isRecord(params) && params.arguments === undefined) params = { ...params, arguments: {} }
  }
  const decoded = validate(params)
  if (decoded._tag === "Left") return answer(id, INVALID_PARAMS, `Invalid params: ${describeParseError(decoded.left)}`)
  // The gateway offers tools, no resources: every URI is one it does not have (MCP's -32002), not an empty read.
  if (message.method === "resources/read") return answer(id, RESOURCE_NOT_FOUND, `Resource not found: ${shownMessage(String((params as { uri: unknown }).uri))}`)
  return { _tag: "Forward", id, internalId, message: { jsonrpc: "2.0", id: internalId, method: message.method, params } }
}

/** The plan for a parsed body, or the one error that answers the whole body (HTTP 400). */
export const plan = (body: unknown, options: PlanOptions): Plan | ErrorObject => {
  const batch = Array.isArray(body)
  const messages: ReadonlyArray<unknown> = batch ? body : [body]
  if (batch && messages.length === 0) return { code: INVALID_REQUEST, message: "Invalid Request: empty batch." }
  if (messages.length > options.maxBatch) {
    return {
      code: INVALID_REQUEST,
      message: `Invalid Request: a batch may hold at most ${options.maxBatch} messages (AIGW_MCP_MAX_BATCH); this one has ${messages.length}.`
    }
  }
  const slots: Array<Slot> = []
  for (const message of messages) {
    // Internal ids start at 1: the server reads id 0 as "no id".
    const slot = slotOf(message, slots.length + 1, options)
    if (slot !== undefined) slots.push(slot)
  }
  return { batch, slots }
}

/** The body for the MCP server: the forwarded requests, or undefined when there are none. */
export const forwardedBody = (slots: ReadonlyArray<Slot>): string | undefined => {
  const messages = slots.flatMap((s) => (s._tag === "Forward" ? [s.message] : []))
  return messages.length === 0 ? undefined : JSON.stringify(messages)
}

/**
 * The server's `initialize` result with its capabilities as they are: the tool list never changes while
 * the gateway runs (and over stateless HTTP there is no stream to announce a change on), so it does not
 * promise list-changed notifications as @effect/ai's McpServer does for any server with tools.
 */
const initialized = (result: unknown): unknown =>
  isRecord(result) && isRecord(result.capabilities) && isRecord(result.capabilities.tools)
    ? { ...result, capabilities: { ...result.capabilities, tools: { ...result.capabilities.tools, listChanged: false } } }
    : result

/**
 * The answers in request order: for forwarded requests, the server's output (by internal id) with
 * the original id. Errors keep only a standard code and its message; anything else (a defect, with
 * its details in `data`) is reported to `onInternal` and answered -32603 without details, as is a
 * request the server did not answer.
 */
export const answers = (slots: ReadonlyArray<Slot>, outputs: ReadonlyArray<unknown>, onInternal: (output: unknown) => void): Array<Response> => {
  const forwarded = new Set(slots.flatMap((s) => (s._tag === "Forward" ? [s.internalId] : [])))
  const byInternalId = new Map<number, Record<string, unknown>>()
  for (const output of outputs) {
    // The server's defects carry no request id (its serialization puts -32603 there).
    if (isRecord(output) && typeof output.id === "number" && forwarded.has(output.id)) byInternalId.set(output.id, output)
    else onInternal(output)
  }
  return slots.map((slot) => {
    if (slot._tag === "Answer") return slot.response
    const output = byInternalId.get(slot.internalId)
    if (output === undefined) return errorResponse(slot.id, INTERNAL_ERROR, "Internal error")
    const error = output.error
    if (error === undefined || error === null) {
      return { jsonrpc: "2.0", id: slot.id, result: slot.message.method === "initialize" ? initialized(output.result) : output.result }
    }
    if (isRecord(error) && typeof error.code === "number" && STANDARD.has(error.code) && typeof error.message === "string") {
      // A method of the protocol the server does not serve (logging/setLevel, resources/subscribe: capabilities
      // it does not announce) is a method not found, not an internal error.
      if (error.code === INTERNAL_ERROR && error.message === "Not implemented") return errorResponse(slot.id, METHOD_NOT_FOUND, `Method not found: ${cutText(slot.message.method, 100)}`)
      return errorResponse(slot.id, error.code, shownMessage(error.message))
    }
    onInternal(error)
    return errorResponse(slot.id, INTERNAL_ERROR, "Internal error")
  })
}
