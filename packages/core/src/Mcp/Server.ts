/**
 * The MCP edge. Registers the gateway toolkit with @effect/ai's McpServer and serves it over
 * streamable HTTP (an HttpApp the HTTP application mounts at /mcp) or stdio.
 *
 * Per call, before a handler runs: the caller is resolved (tools other than gateway_health answer
 * the tool error "Authentication required" without credentials), the arguments are decoded (a
 * failure is a tool error with the decode message), metered tools are admitted against the daily
 * quota (a refusal is a tool error saying when the quota resets). Handlers get the caller
 * as CurrentAvatar. Typed gateway errors become tool errors; anything else is logged and
 * answered with a generic tool error.
 *
 * Who is calling: the caller comes from the McpCaller service. Over HTTP, the /mcp app resolves
 * the request's credentials once and provides McpCaller around @effect/rpc's HTTP protocol app:
 * the RPC server runs each request's handler with the context of the HTTP fiber that delivered
 * it, so the tool call sees the caller of its own HTTP request (no session state, no global).
 * Over stdio, one McpCaller (AIGW_API_KEY) serves the whole process; it is resolved again on
 * every call, so a revoked key or a changed plan takes effect at once.
 */
import * as McpSchema from "@effect/ai/McpSchema"
import * as McpServer from "@effect/ai/McpServer"
import * as Tool from "@effect/ai/Tool"
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as RpcServer from "@effect/rpc/RpcServer"
import { Cause, Context, Effect, Either, Fiber, JSONSchema, Layer, Option, Redacted, Schema, Sink, Stream } from "effect"
import * as AST from "effect/SchemaAST"
import { Auth, type Credentials, INVALID } from "../Accounts/Auth.ts"
import { GatewayConfig } from "../Config.ts"
import { type BadRequest, type GatewayError, isGatewayError, type PayloadTooLarge, Unauthorized } from "../Errors.ts"
import { bodyTookLong, credentialsOf, crossSiteFormProblem, refusalOfDefect, retryAfterOf, decodeText, presented, presentedKey, requestJsonLimits, tooLargeError } from "../Http/Edge.ts"
import { asRequest } from "../Http/Observability.ts"
import * as RequestId from "../RequestId.ts"
import { describeParseError, parseOptions } from "../Http/DecodeProblems.ts"
import { dayHeaders, readText } from "../Http/Route.ts"
import { parseJsonText } from "../JsonText.ts"
import * as Sentiment from "../Ml/Sentiment.ts"
import * as TaskClassifier from "../Ml/TaskClassifier.ts"
import { admitted, nextUtcMidnight, Quota } from "../Quota.ts"
import { quotaRefusals } from "../Metrics.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { layerHandlers, makeAdmissionChecks } from "./Handlers.ts"
import * as JsonRpc from "./JsonRpc.ts"
import { CurrentAvatar, GatewayToolkit, Metered, RequiresAuth } from "./Tools.ts"

export const SERVER_NAME = "aigw"
export const PROTOCOL_VERSION = "2025-06-18"
/** The versions `initialize` negotiates (@effect/ai's McpServer answers any of these with itself). */
export const SUPPORTED_PROTOCOL_VERSIONS: ReadonlyArray<string> = [PROTOCOL_VERSION, "2025-03-26", "2024-11-05", "2024-10-07"]

export const AUTH_REQUIRED =
  "Authentication required: connect to /mcp with Authorization: Bearer <JWT or API key> (or X-Api-Key: <API key>), or start the stdio server with AIGW_API_KEY. Only gateway_health works without credentials."

/** Who is calling: resolves the caller's credentials to an avatar (None: anonymous). */
export class McpCaller extends Context.Tag("aigw/Mcp/McpCaller")<McpCaller, {
  readonly resolve: Effect.Effect<Option.Option<AvatarRecord>, Unauthorized>
}>() {}

/** A caller from request credentials, resolved on every call. */
export const callerFrom = (auth: Auth["Type"], credentials: Credentials): McpCaller["Type"] => ({
  resolve: auth.resolve(credentials)
})

// -----------------------------------------------------------------------------
// Tool results
// -----------------------------------------------------------------------------

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** Success: the JSON as text (for clients that read text) and as structured content. */
export const successResult = (value: unknown) =>
  new McpSchema.CallToolResult({
    isError: false,
    content: [{ type: "text", text: JSON.stringify(value) }],
    structuredContent: isRecord(value) ? value : { result: value }
  })

/** A tool error: the message as text, and `{ error: { kind, message, ... } }` as structured content. */
export const errorResult = (
  kind: string,
  message: string,
  extra: Record<string, unknown> = {}
) =>
  new McpSchema.CallToolResult({
    isError: true,
    content: [{ type: "text", text: message }],
    structuredContent: { error: { kind, message, ...extra } }
  })

/** A refusal as a tool error, with what HTTP answers in its headers: when to retry (Edge.retryAfterOf), and the upstream that failed. */
export const gatewayErrorResult = (error: GatewayError) => {
  // The MCP edge's quota refusals, as Route.ts's errorParts counts those of HTTP.
  if (error._tag === "QuotaExceeded") quotaRefusals.inc()
  const retryAfterSeconds = retryAfterOf(error)
  // When a limit lifts: the day's quota at UTC midnight itself, not at now plus the whole seconds to it.
  const resetsAt = error._tag === "QuotaExceeded"
    ? nextUtcMidnight(Date.now())
    : error._tag === "TooManyRequests"
    ? Date.now() + error.retryAfterSeconds * 1000
    : undefined
  return errorResult(error._tag, error.message, {
    ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}),
    ...(resetsAt !== undefined ? { resetsAt: new Date(resetsAt).toISOString() } : {}),
    ...(error._tag === "UpstreamFailed" || error._tag === "UpstreamTimeout" ? { provider: error.provider } : {})
  })
}

// -----------------------------------------------------------------------------
// Registration
// -----------------------------------------------------------------------------

/** JSON Schema of a tool's parameters, as clients see it in tools/list. */
export const inputSchemaOf = (tool: Tool.Any): JSONSchema.JsonSchema7 => {
  const ast = tool.parametersSchema.ast
  if (AST.getPropertySignatures(ast).length === 0) {
    return { type: "object", properties: {}, required: [], additionalProperties: false } as JSONSchema.JsonSchema7
  }
  const $defs: Record<string, JSONSchema.JsonSchema7> = {}
  const schema = JSONSchema.fromAST(ast, { definitions: $defs, topLevelReferenceStrategy: "skip" })
  if (Object.keys($defs).length > 0) (schema as any).$defs = $defs
  return dropRefinementTitles(schema) as JSONSchema.JsonSchema7
}

/** Effect names refinements in `title` ("between(0, 2)"); the descriptions say it better. */
const dropRefinementTitles = (node: unknown): unknown => {
  if (Array.isArray(node)) return node.map(dropRefinementTitles)
  if (!isRecord(node)) return node
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(node)) {
    if (k === "title" && typeof v === "string" && /^[A-Za-z]+\(.*\)$/.test(v)) continue
    out[k] = k === "properties" || k === "$defs"
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([p, s]) => [p, dropRefinementTitles(s)]))
      : dropRefinementTitles(v)
  }
  return out
}

const decodeOptions = { ...parseOptions, onExcessProperty: "error" } as const

/**
 * Registers every tool of the gateway toolkit with the McpServer. Like McpServer.registerToolkit,
 * plus authentication, quota, precise decode messages and gateway-error rendering.
 */
export const registerToolkit = Effect.gen(function*() {
  const registry = yield* McpServer.McpServer
  const built = yield* GatewayToolkit
  const quota = yield* Quota
  const fixedCaller = yield* Effect.serviceOption(McpCaller)
  const admissionChecks = yield* makeAdmissionChecks

  for (const tool of Object.values(built.tools) as ReadonlyArray<Tool.Any>) {
    const name = tool.name
    const requiresAuth = Context.get(tool.annotations, RequiresAuth)
    const metered = Context.get(tool.annotations, Metered)
    const decodeParams = Schema.decodeUnknown(tool.parametersSchema as Schema.Schema<unknown, unknown, never>, decodeOptions)
    const takesNothing = AST.getPropertySignatures(tool.parametersSchema.ast).length === 0
    const admissionCheck = admissionChecks[name]
    /** The decoded arguments, or what is wrong with them. */
    const decoded = (args: unknown): Effect.Effect<Either.Either<unknown, string>> => {
      if (takesNothing && isRecord(args) && Object.keys(args).length > 0) {
        return Effect.succeed(Either.left(`this tool takes no arguments (got ${Object.keys(args).slice(0, 10).join(", ")})`))
      }
      return decodeParams(args).pipe(
        Effect.match({ onFailure: (e) => Either.left(describeParseError(e)), onSuccess: (params) => Either.right(params) })
      )
    }
    const mcpTool = new McpSchema.Tool({
      name,
      title: Option.getOrUndefined(Context.getOption(tool.annotations, Tool.Title)),
      description: tool.description,
      inputSchema: inputSchemaOf(tool),
      annotations: new McpSchema.ToolAnnotations({
        title: Option.getOrUndefined(Context.getOption(tool.annotations, Tool.Title)),
        readOnlyHint: Context.get(tool.annotations, Tool.Readonly),
        destructiveHint: Context.get(tool.annotations, Tool.Destructive),
        idempotentHint: Context.get(tool.annotations, Tool.Idempotent),
        openWorldHint: Context.get(tool.annotations, Tool.OpenWorld)
      })
    })

    const run = (args: unknown) =>
      Effect.gen(function*() {
        // As on HTTP: credentials first, then the arguments, then quota (a bad call costs nothing).
        let avatar: Option.Option<AvatarRecord> = Option.none()
        if (requiresAuth) {
          const caller = Option.orElse(yield* Effect.serviceOption(McpCaller), () => fixedCaller)
          avatar = Option.isSome(caller) ? yield* caller.value.resolve : Option.none()
          if (Option.isNone(avatar)) return yield* new Unauthorized({ message: AUTH_REQUIRED })
        }
        const params = yield* decoded(args)
        if (Either.isLeft(params)) return errorResult("BadRequest", `Invalid arguments for ${name}: ${params.left}`)
        if (metered && Option.isSome(avatar)) {
          if (admissionCheck) yield* admissionCheck(avatar.value, params.right)
          yield* admitted((gone) => quota.admit(avatar.value, 1, gone))
        }
        const handled = built.handle(name as never, args as never) as Effect.Effect<Tool.HandlerResult<any>, unknown, CurrentAvatar>
        const result = yield* (Option.isSome(avatar) ? Effect.provideService(handled, CurrentAvatar, avatar.value) : handled) as Effect.Effect<
          Tool.HandlerResult<any>,
          unknown
        >
        return successResult(result.encodedResult)
      }).pipe(
        Effect.catchIf(isGatewayError, (e) => Effect.succeed(gatewayErrorResult(e))),
        Effect.catchAllCause((cause) => {
          if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause)
          const refusal = refusalOfDefect(Cause.squash(cause))
          return Effect.logError(`MCP tool ${name} failed`, cause).pipe(
            Effect.as(refusal !== undefined ? gatewayErrorResult(refusal) : errorResult("Internal", "Internal server error."))
          )
        }),
        Effect.withSpan("Mcp.callTool", { attributes: { tool: name } })
      ) as Effect.Effect<McpSchema.CallToolResult>

    yield* registry.addTool({ tool: mcpTool, handle: (payload) => run(payload ?? {}) })
  }
})

// -----------------------------------------------------------------------------
// Layers
// -----------------------------------------------------------------------------

/** Server name and version (the gateway's API version) for MCP `initialize`. */
const serverInfo = Effect.map(GatewayConfig, (c) => ({ name: SERVER_NAME, version: c.version }))

/** The toolkit registered with the McpServer in context; handlers and in-process models included. */
export const layerTools = Layer.effectDiscard(registerToolkit).pipe(
  Layer.provide(layerHandlers),
  Layer.provide(Layer.mergeAll(Sentiment.layer, TaskClassifier.layer))
)

/** The streamable HTTP endpoint as an HttpApp; the HTTP application mounts it at /mcp. */
export class McpHttpApp extends Context.Tag("aigw/Mcp/McpHttpApp")<McpHttpApp, HttpApp.Default>() {}

/** A whole-request refusal: one JSON-RPC error with id null, and the HTTP status that fits it. */
const jsonRpcError = (status: number, code: number, message: string, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson(JsonRpc.errorResponse(null, code, message), { status, headers })

const utf8 = new TextDecoder()

/** What the JSON-RPC front answers one message or batch: the HTTP status that fits, and the JSON (none: nothing to answer). */
interface FrontAnswer {
  readonly status: number
  readonly body: unknown
}

/**
 * The JSON-RPC front both transports share (/mcp and stdio): one message or batch as text, from a
 * caller, through the checks of every HTTP body (JsonText.parseJsonText: nesting, NUL characters,
 * "__proto__"), the JSON-RPC plan (JsonRpc.ts: batch bound, message shape, ids, methods, params, an
 * anonymous `tools/call` refused before any work) and the MCP server (@effect/rpc's HTTP protocol,
 * run in process), to the answers JSON-RPC 2.0 defines.
 */
const makeFront = Effect.gen(function*() {
  const { httpApp, protocol } = yield* RpcServer.makeProtocolWithHttpApp.pipe(Effect.provide(RpcSerialization.layerJsonRpc()))
  const { limits } = yield* GatewayConfig
  const freeTools = new Set(
    (Object.values(GatewayToolkit.tools) as ReadonlyArray<Tool.Any>).filter((t) => !Context.get(t.annotations, RequiresAuth)).map((t) => t.name)
  )
  const authRequired = Schema.encodeSync(McpSchema.CallToolResult)(errorResult("Unauthorized", AUTH_REQUIRED))
  const refuseAnonymous = (name: unknown) => (typeof name === "string" && freeTools.has(name) ? undefined : authRequired)
  const refuseNothing = () => undefined

  /** Runs the forwarded requests through @effect/rpc's protocol app; its outputs as JSON values. */
  const runServer = (body: string, caller: McpCaller["Type"]) =>
    httpApp.pipe(
      Effect.provideService(
        HttpServerRequest.HttpServerRequest,
        HttpServerRequest.fromWeb(new Request("http://aigw.internal/mcp", { method: "POST", headers: { "content-type": "application/json" }, body }))
      ),
      Effect.provideService(McpCaller, caller),
      Effect.scoped,
      Effect.map((response): ReadonlyArray<unknown> => {
        const text = response.body._tag === "Uint8Array" ? utf8.decode(response.body.body) : ""
        return text.trim() === "" ? [] : [JSON.parse(text) as unknown].flat()
      })
    )

  const refusal = (status: number, code: number, message: string): FrontAnswer => ({ status, body: JsonRpc.errorResponse(null, code, message) })

  /**
   * The tool listing, built by the server once and answered from here after: it is the same for every
   * caller, and building it took 6-13 ms a time, so an anonymous batch of `tools/list` cost the event loop
   * 30 times that and answered 800 times its size in bytes.
   */
  let toolListing: unknown
  const isListing = (slot: JsonRpc.Slot): slot is Extract<JsonRpc.Slot, { _tag: "Forward" }> =>
    slot._tag === "Forward" && slot.message.method === "tools/list" && !(isRecord(slot.message.params) && slot.message.params.cursor !== undefined)
  /** The slots with each `tools/list` answered from the listing, or (before it is known) only the first forwarded; `fill` completes the answers. */
  const listedOnce = (planned: ReadonlyArray<JsonRpc.Slot>) => {
    const known = toolListing
    // The first listing is forwarded when the listing is not known yet; none when it is.
    const first = known === undefined ? planned.findIndex(isListing) : -1
    const listed = (id: JsonRpc.Id, result: unknown): JsonRpc.Slot => ({ _tag: "Answer", response: { jsonrpc: "2.0", id, result } })
    const slots = planned.map((slot, i) => (!isListing(slot) || i === first ? slot : listed(slot.id, known)))
    return {
      slots,
      listings: {
        fill: (answers: Array<JsonRpc.Response>): Array<JsonRpc.Response> => {
          if (first < 0) return answers
          const answered = answers[first]!
          if (answered.result !== undefined) toolListing = answered.result
          return answers.map((a, i) => (i !== first && isListing(planned[i]!) ? { ...answered, id: a.id } : a))
        }
      }
    }
  }

  /** A message that cannot be read as sent (too large, or bytes not in its charset): an invalid request, on either transport. */
  const unreadable = (error: PayloadTooLarge | BadRequest): FrontAnswer =>
    refusal(error._tag === "PayloadTooLarge" ? 413 : 400, JsonRpc.INVALID_REQUEST, `Invalid Request: ${error.message}`)

  /** The answer to `text` from `caller` (`anonymous`: no credentials, only the free tools work). */
  const answer = (text: string, caller: McpCaller["Type"], anonymous: boolean): Effect.Effect<FrontAnswer> =>
    Effect.gen(function*() {
      const parsed = parseJsonText(text, requestJsonLimits(limits))
      if (!("value" in parsed)) {
        return parsed.malformed
          ? refusal(400, JsonRpc.PARSE_ERROR, "Parse error")
          : { status: 400, body: JsonRpc.errorResponse(idOfText(text), JsonRpc.INVALID_REQUEST, `Invalid Request: ${parsed.problem}`) }
      }
      const plan = JsonRpc.plan(parsed.value, { maxBatch: limits.mcpMaxBatch, refuseTool: anonymous ? refuseAnonymous : refuseNothing })
      if (!("slots" in plan)) return refusal(400, plan.code, plan.message)
      const { slots, listings } = listedOnce(plan.slots)
      const forwarded = JsonRpc.forwardedBody(slots)
      const outputs = forwarded === undefined ? [] : yield* runServer(forwarded, caller)
      const internal: Array<unknown> = []
      const answers = listings.fill(JsonRpc.answers(slots, outputs, (output) => internal.push(output)))
      if (internal.length > 0) yield* Effect.logError("MCP request failed", internal)
      // Only notifications or responses: nothing to answer.
      if (answers.length === 0) return { status: 202, body: undefined }
      if (plan.batch) return { status: 200, body: answers }
      const single = answers[0]!
      return { status: single.error?.code === JsonRpc.INVALID_REQUEST ? 400 : 200, body: single }
    }).pipe(
      // A defect of the server itself: logged, answered as JSON-RPC without details.
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.failCause(cause)
          : Effect.logError("MCP request failed", cause).pipe(Effect.as(refusal(500, JsonRpc.INTERNAL_ERROR, "Internal error")))
      )
    )

  return { answer, protocol, unreadable }
})

/**
 * The MCP server over the front's protocol, the toolkit, and `transport` (which reads the front's
 * `answer`): the layer each transport is.
 */
const layerOver = <A, E, R>(transport: (front: Effect.Effect.Success<typeof makeFront>) => Layer.Layer<A, E, R>) =>
  Layer.unwrapScoped(
    Effect.gen(function*() {
      const front = yield* makeFront
      const server = McpServer.layer(yield* serverInfo).pipe(Layer.provide(Layer.succeed(RpcServer.Protocol, front.protocol)))
      return Layer.mergeAll(transport(front), layerTools, layerForgetClients(front.protocol)).pipe(Layer.provide(server))
    })
  )

/**
 * MCP over streamable HTTP (protocol 2025-06-18, stateless): POST carries JSON-RPC and is
 * answered with JSON; GET (no server-initiated stream) and DELETE (no sessions) answer 405.
 * Credentials are read per request, first: none means an anonymous caller; invalid ones are
 * refused with 401 before the body is read, as the MCP authorization rules require. The body
 * goes through the routes' bounded reader, then the JSON-RPC front (`makeFront`): an anonymous
 * `tools/call` of a tool that needs credentials is answered there, so without credentials only the
 * free tools (gateway_health) and the protocol's listings do any work.
 */
export const layerHttp = layerOver((front) =>
  Layer.effect(
    McpHttpApp,
    Effect.gen(function*() {
      const auth = yield* Auth
      const config = yield* GatewayConfig
      const quota = yield* Quota
      /**
       * An authenticated caller's answer carries its day's rate-limit headers (the spec's "every response"),
       * as they stand when it leaves: one answer may hold several calls (a batch), each admitted on its own.
       */
      const withDay = (caller: Option.Option<AvatarRecord>, response: HttpServerResponse.HttpServerResponse) =>
        Option.isNone(caller)
          ? Effect.succeed(response)
          : Effect.map(Effect.provideService(dayHeaders(caller.value), Quota, quota), (day) => HttpServerResponse.setHeaders(response, day))
      return Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        if (request.method !== "POST") {
          return jsonRpcError(405, -32000, `Method ${request.method} is not allowed: this MCP endpoint takes JSON-RPC over POST (no server-initiated stream, no sessions).`, {
            allow: "POST"
          })
        }
        // Streamable HTTP: a client names the protocol version it negotiated; one the server does not speak is a 400.
        const version = request.headers["mcp-protocol-version"]
        if (version !== undefined && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) {
          return jsonRpcError(400, JsonRpc.INVALID_REQUEST, `Invalid Request: MCP-Protocol-Version ${version.slice(0, 40)} is not supported; this server speaks ${SUPPORTED_PROTOCOL_VERSIONS.join(", ")}.`)
        }
        const credentials = credentialsOf(request.headers)
        const invalid = () => jsonRpcError(401, -32001, INVALID, { "www-authenticate": 'Bearer realm="aigw", error="invalid_token"' })
        let caller = yield* Effect.either(auth.resolve(credentials))
        if (caller._tag === "Left") return invalid()
        const checkedAt = performance.now()
        const crossSite = crossSiteFormProblem(request.headers)
        if (crossSite !== undefined) return yield* withDay(caller.right, jsonRpcError(400, JsonRpc.INVALID_REQUEST, `Invalid Request: ${crossSite.message}`))
        const text = yield* Effect.either(Effect.provideService(readText, GatewayConfig, config))
        // As every route: a key revoked while a slow body came in is refused, not admitted for each tool call.
        if (text._tag === "Right" && Option.isSome(caller.right) && bodyTookLong(checkedAt)) {
          caller = yield* Effect.either(auth.resolve(credentials))
          if (caller._tag === "Left") return invalid()
        }
        const answered = text._tag === "Left"
          ? front.unreadable(text.left)
          : yield* front.answer(text.right, { resolve: Effect.succeed(caller.right) }, Option.isNone(caller.right))
        return yield* withDay(
          caller.right,
          answered.body === undefined
            ? HttpServerResponse.empty({ status: answered.status })
            : HttpServerResponse.unsafeJson(answered.body, { status: answered.status })
        )
      }) as HttpApp.Default
    })
  )
)

/**
 * @effect/ai's McpServer remembers every client that sent `initialize` (for list-changed
 * notifications). Over stateless HTTP each POST is a new client, so forget the ones whose
 * request has ended, once a minute.
 */
const layerForgetClients = (protocol: RpcServer.Protocol["Type"]) =>
  Layer.scopedDiscard(
    Effect.gen(function*() {
      const server = yield* McpServer.McpServer
      const sweep = Effect.flatMap(protocol.clientIds, (live) =>
        Effect.sync(() => {
          for (const id of server.initializedClients) if (!live.has(id)) server.initializedClients.delete(id)
        }))
      yield* sweep.pipe(Effect.delay("60 seconds"), Effect.forever, Effect.forkScoped)
    })
  )

/** The id of a refused message's text, as JSON-RPC answers it (null for a text that is not one message with a valid id). */
const idOfText = (text: string): JsonRpc.Id | null => {
  try {
    return JsonRpc.answerIdOf(JSON.parse(text))
  } catch {
    return null
  }
}

const NEWLINE = 0x0a

/**
 * Splits a byte stream into lines of at most `limit` bytes: each complete line (without its "\n" or
 * "\r\n"), or TOO_LONG for one longer than that, whose bytes are dropped as they come rather than
 * kept; the last line need not end with a newline.
 */
export const lineSplitter = (limit: number) => {
  let held: Array<Uint8Array> = []
  let size = 0
  let tooLong = false
  const take = (): Uint8Array | typeof TOO_LONG => {
    const line = tooLong ? TOO_LONG : held.length === 1 ? held[0]! : Buffer.concat(held)
    held = []
    size = 0
    tooLong = false
    if (line === TOO_LONG) return line
    return line.length > 0 && line[line.length - 1] === 0x0d ? line.subarray(0, line.length - 1) : line
  }
  const hold = (bytes: Uint8Array) => {
    if (tooLong || bytes.length === 0) return
    size += bytes.length
    if (size > limit + 1) {
      tooLong = true
      held = []
    } else held.push(bytes)
  }
  return {
    push: (chunk: Uint8Array): Array<Uint8Array | typeof TOO_LONG> => {
      const lines: Array<Uint8Array | typeof TOO_LONG> = []
      let start = 0
      for (let at = chunk.indexOf(NEWLINE); at !== -1; at = chunk.indexOf(NEWLINE, start)) {
        hold(chunk.subarray(start, at))
        lines.push(take())
        start = at + 1
      }
      hold(chunk.subarray(start))
      return lines
    },
    end: (): Array<Uint8Array | typeof TOO_LONG> => (size > 0 || tooLong ? [take()] : [])
  }
}
export const TOO_LONG: unique symbol = Symbol("too long")

/**
 * MCP over stdio for desktop hosts: one caller (the avatar of `apiKey`) for the whole process,
 * resolved again on every call. Fails at start when the key is invalid; without a key only
 * gateway_health works. Each line is one JSON-RPC message or batch, answered on one line by the
 * front /mcp uses (`makeFront`: the same checks, codes and ids); lines are served concurrently and
 * answered as they finish. A line over `AIGW_MAX_BODY_BYTES` or not UTF-8 is refused by id null
 * (-32600, -32700) without being kept. When stdin ends, the answers still due are written and the
 * layer's `done` completes (hosts/mcp then exits).
 */
export class McpStdio extends Context.Tag("aigw/Mcp/McpStdio")<McpStdio, {
  /** Completes once stdin has ended and every answer was written. */
  readonly done: Effect.Effect<void>
}>() {}

/** How many stdio lines are served at once. */
const STDIO_CONCURRENCY = 16

export const layerStdio = <EIn, RIn, EOut, ROut>(options: {
  readonly stdin: Stream.Stream<Uint8Array, EIn, RIn>
  readonly stdout: Sink.Sink<unknown, Uint8Array | string, unknown, EOut, ROut>
  readonly apiKey: Option.Option<Redacted.Redacted>
}) =>
  layerOver((front) =>
    Layer.scoped(
      McpStdio,
      Effect.gen(function*() {
        const auth = yield* Auth
        const { maxBodyBytes } = yield* GatewayConfig
        const credentials: Credentials = Option.match(options.apiKey, {
          onNone: () => ({}),
          onSome: (key) => ({ apiKey: Redacted.value(key) })
        })
        const caller = callerFrom(auth, credentials)
        const avatar = yield* caller.resolve.pipe(
          Effect.mapError(() =>
            new Unauthorized({ message: `AIGW_API_KEY is refused (${INVALID}): the key is unknown or revoked, or its avatar is inactive.` })
          )
        )
        yield* Option.match(avatar, {
          onNone: () => Effect.logWarning("AIGW_API_KEY is not set: only gateway_health will work"),
          onSome: (a) => Effect.logInfo(`MCP stdio server acting as avatar ${a.username} (${a.id})`)
        })
        const anonymous = Option.isNone(options.apiKey)
        const apiKey = presentedKey(presented(credentials))
        const answerLine = (line: Uint8Array | typeof TOO_LONG): Effect.Effect<Option.Option<string>> => {
          const text = line === TOO_LONG ? tooLargeError(maxBodyBytes) : decodeText(line)
          if (typeof text !== "string") return Effect.succeed(Option.some(JSON.stringify(front.unreadable(text).body)))
          if (text.trim() === "") return Effect.succeed(Option.none())
          // Each line is a request as an HTTP body is: its own id (logs, upstream `x-request-id`), and the key it
          // acts with, which a tool making many model calls checks before each (Accounts/StillActing.ts).
          const answered = Effect.map(front.answer(text, caller, anonymous), (a) => a.body === undefined ? Option.none() : Option.some(JSON.stringify(a.body)))
          return asRequest({ id: RequestId.generate(), route: "mcp-stdio", apiKey })(answered)
        }
        const splitter = lineSplitter(maxBodyBytes)
        const serving = options.stdin.pipe(
          Stream.mapConcat((chunk) => splitter.push(chunk)),
          Stream.concat(Stream.suspend(() => Stream.fromIterable(splitter.end()))),
          Stream.mapEffect(answerLine, { concurrency: STDIO_CONCURRENCY, unordered: true }),
          Stream.filterMap((answer) => Option.map(answer, (text) => `${text}\n`)),
          Stream.run(options.stdout),
          Effect.catchAllCause((cause) => Effect.logError("MCP stdio transport failed", cause))
        )
        const fiber = yield* Effect.forkScoped(serving)
        return { done: Effect.asVoid(Fiber.await(fiber)) }
      })
    )
  )
