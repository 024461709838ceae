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
import { Cause, Context, Effect, Either, Fiber, JSONSchema, Layer, Mailbox, Option, Redacted, Schema, Sink, Stream } from "effect"
import * as AST from "effect/SchemaAST"
import { Auth, type Credentials, INVALID } from "../Accounts/Auth.ts"
import { GatewayConfig } from "../Config.ts"
import { type GatewayError, isGatewayError, Unauthorized } from "../Errors.ts"
import { credentialsOf } from "../Http/Edge.ts"
import { describeParseError, readText } from "../Http/Route.ts"
import { parseJsonText } from "../JsonText.ts"
import * as Sentiment from "../Ml/Sentiment.ts"
import * as TaskClassifier from "../Ml/TaskClassifier.ts"
import { admitted, Quota } from "../Quota.ts"
import { quotaRefusals } from "../Metrics.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { layerHandlers, makeAdmissionChecks } from "./Handlers.ts"
import * as JsonRpc from "./JsonRpc.ts"
import { CurrentAvatar, GatewayToolkit, Metered, RequiresAuth } from "./Tools.ts"

export const SERVER_NAME = "aigw"
export const PROTOCOL_VERSION = "2025-06-18"

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

export const gatewayErrorResult = (error: GatewayError) => {
  // The MCP edge's quota refusals, as Route.ts's errorParts counts those of HTTP.
  if (error._tag === "QuotaExceeded") quotaRefusals.inc()
  switch (error._tag) {
    case "QuotaExceeded":
    case "TooManyRequests":
      return errorResult(error._tag, error.message, {
        retryAfterSeconds: error.retryAfterSeconds,
        resetsAt: new Date(Date.now() + error.retryAfterSeconds * 1000).toISOString()
      })
    case "UpstreamFailed":
    case "UpstreamTimeout":
      return errorResult(error._tag, error.message, { provider: error.provider })
    default:
      return errorResult(error._tag, error.message)
  }
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

const decodeOptions = { errors: "all", onExcessProperty: "error" } as const

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
          yield* admitted(() => quota.admit(avatar.value))
        }
        const handled = built.handle(name as never, args as never) as Effect.Effect<Tool.HandlerResult<any>, unknown, CurrentAvatar>
        const result = yield* (Option.isSome(avatar) ? Effect.provideService(handled, CurrentAvatar, avatar.value) : handled) as Effect.Effect<
          Tool.HandlerResult<any>,
          unknown
        >
        return successResult(result.encodedResult)
      }).pipe(
        Effect.catchIf(isGatewayError, (e) => Effect.succeed(gatewayErrorResult(e))),
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.failCause(cause)
            : Effect.logError(`MCP tool ${name} failed`, cause).pipe(
              Effect.as(errorResult("Internal", "Internal server error."))
            )
        ),
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

/**
 * MCP over streamable HTTP (protocol 2025-06-18, stateless): POST carries JSON-RPC and is
 * answered with JSON; GET (no server-initiated stream) and DELETE (no sessions) answer 405.
 * Credentials are read per request, first: none means an anonymous caller; invalid ones are
 * refused with 401 before the body is read, as the MCP authorization rules require. The body
 * goes through the routes' bounded reader and JSON checks, then the JSON-RPC front (JsonRpc.ts):
 * an anonymous `tools/call` of a tool that needs credentials is answered there, so without
 * credentials only the free tools (gateway_health) and the protocol's listings do any work.
 */
export const layerHttp = Layer.unwrapScoped(
  Effect.gen(function*() {
    const { httpApp, protocol } = yield* RpcServer.makeProtocolWithHttpApp.pipe(Effect.provide(RpcSerialization.layerJsonRpc()))
    const auth = yield* Auth
    const config = yield* GatewayConfig
    const { limits } = config
    const server = McpServer.layer(yield* serverInfo).pipe(Layer.provide(Layer.succeed(RpcServer.Protocol, protocol)))
    const freeTools = new Set(
      (Object.values(GatewayToolkit.tools) as ReadonlyArray<Tool.Any>).filter((t) => !Context.get(t.annotations, RequiresAuth)).map((t) => t.name)
    )
    const authRequired = Schema.encodeSync(McpSchema.CallToolResult)(errorResult("Unauthorized", AUTH_REQUIRED))
    const refuseAnonymous = (name: unknown) => (typeof name === "string" && freeTools.has(name) ? undefined : authRequired)
    const refuseNothing = () => undefined

    /** Runs the forwarded requests through @effect/rpc's protocol app; its outputs as JSON values. */
    const runServer = (body: string, caller: Option.Option<AvatarRecord>) =>
      httpApp.pipe(
        Effect.provideService(
          HttpServerRequest.HttpServerRequest,
          HttpServerRequest.fromWeb(new Request("http://aigw.internal/mcp", { method: "POST", headers: { "content-type": "application/json" }, body }))
        ),
        Effect.provideService(McpCaller, { resolve: Effect.succeed(caller) }),
        Effect.scoped,
        Effect.map((response): ReadonlyArray<unknown> => {
          const text = response.body._tag === "Uint8Array" ? utf8.decode(response.body.body) : ""
          return text.trim() === "" ? [] : [JSON.parse(text) as unknown].flat()
        })
      )

    const app = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      if (request.method !== "POST") {
        return jsonRpcError(405, -32000, `Method ${request.method} is not allowed: this MCP endpoint takes JSON-RPC over POST (no server-initiated stream, no sessions).`, {
          allow: "POST"
        })
      }
      const caller = yield* Effect.either(auth.resolve(credentialsOf(request.headers)))
      if (caller._tag === "Left") {
        return jsonRpcError(401, -32001, INVALID, { "www-authenticate": 'Bearer error="invalid_token"' })
      }
      const text = yield* Effect.either(Effect.provideService(readText, GatewayConfig, config))
      if (text._tag === "Left") {
        // Too large: 413; a body that cannot be read as sent (its encoding or charset): an invalid request.
        return text.left._tag === "PayloadTooLarge"
          ? jsonRpcError(413, -32000, text.left.message)
          : jsonRpcError(400, JsonRpc.INVALID_REQUEST, `Invalid Request: ${text.left.message}`)
      }
      const parsed = parseJsonText(text.right, limits.maxJsonDepth)
      if (!("value" in parsed)) {
        return parsed.malformed
          ? jsonRpcError(400, JsonRpc.PARSE_ERROR, "Parse error")
          : jsonRpcError(400, JsonRpc.INVALID_REQUEST, `Invalid Request: ${parsed.problem}`)
      }
      const plan = JsonRpc.plan(parsed.value, {
        maxBatch: limits.mcpMaxBatch,
        refuseTool: Option.isNone(caller.right) ? refuseAnonymous : refuseNothing
      })
      if (!("slots" in plan)) return jsonRpcError(400, plan.code, plan.message)
      const forwarded = JsonRpc.forwardedBody(plan.slots)
      const outputs = forwarded === undefined ? [] : yield* runServer(forwarded, caller.right)
      const internal: Array<unknown> = []
      const answers = JsonRpc.answers(plan.slots, outputs, (output) => internal.push(output))
      if (internal.length > 0) yield* Effect.logError("MCP request failed", internal)
      // Only notifications or responses: nothing to answer.
      if (answers.length === 0) return HttpServerResponse.empty({ status: 202 })
      if (plan.batch) return HttpServerResponse.unsafeJson(answers)
      const single = answers[0]!
      return HttpServerResponse.unsafeJson(single, { status: single.error?.code === JsonRpc.INVALID_REQUEST ? 400 : 200 })
    }).pipe(
      // A defect of the server itself: logged, answered as JSON-RPC without details.
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.failCause(cause)
          : Effect.logError("MCP request failed", cause).pipe(Effect.as(jsonRpcError(500, JsonRpc.INTERNAL_ERROR, "Internal error")))
      )
    )

    return Layer.mergeAll(Layer.succeed(McpHttpApp, app), layerTools, layerForgetClients(protocol)).pipe(Layer.provide(server))
  })
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

/** A refused line's id, as JSON-RPC answers it (null for a line that is not one message with a valid id). */
const idOfLine = (line: string): JsonRpc.Id | null => {
  try {
    return JsonRpc.answerIdOf(JSON.parse(line))
  } catch {
    return null
  }
}

/**
 * The refusal of one stdio line (a JSON-RPC message or batch) that fails the checks every HTTP body
 * passes (JsonText.parseJsonText: nesting, NUL characters, "__proto__" as a field name), or undefined
 * (also for a line that is not JSON: the transport answers that one). The transport parses each line
 * again: stdio carries one client's messages, so the second parse costs nothing that matters.
 */
export const stdioLineRefusal = (line: string, maxDepth: number): string | undefined => {
  const parsed = parseJsonText(line, maxDepth)
  if ("value" in parsed || parsed.malformed) return undefined
  return JSON.stringify(JsonRpc.errorResponse(idOfLine(line), JsonRpc.INVALID_REQUEST, `Invalid Request: ${parsed.problem}`))
}

const encoder = new TextEncoder()

/**
 * MCP over stdio for desktop hosts: one caller (the avatar of `apiKey`) for the whole process.
 * Fails at start when the key is invalid; without a key only gateway_health works.
 * Lines that fail the checks of every HTTP body are answered here (-32600) and never reach the
 * transport; its answers and those refusals leave through one writer, drained before the process ends.
 */
export const layerStdio = <EIn, RIn, EOut, ROut>(options: {
  readonly stdin: Stream.Stream<Uint8Array, EIn, RIn>
  readonly stdout: Sink.Sink<unknown, Uint8Array | string, unknown, EOut, ROut>
  readonly apiKey: Option.Option<Redacted.Redacted>
}) =>
  Layer.unwrapScoped(
    Effect.gen(function*() {
      const auth = yield* Auth
      const { maxJsonDepth } = (yield* GatewayConfig).limits
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
      const out = yield* Mailbox.make<Uint8Array | string>()
      const writer = yield* Mailbox.toStream(out).pipe(Stream.run(options.stdout), Effect.forkScoped)
      // Runs before the scope interrupts the writer: what was answered is written out first.
      yield* Effect.addFinalizer(() => Effect.ignore(Effect.timeout(Effect.zipRight(out.end, Fiber.join(writer)), "5 seconds")))
      const stdin = options.stdin.pipe(
        Stream.decodeText(),
        Stream.splitLines,
        Stream.filterEffect((line) => {
          const refusal = stdioLineRefusal(line, maxJsonDepth)
          return refusal === undefined ? Effect.succeed(true) : Effect.as(out.offer(`${refusal}\n`), false)
        }),
        Stream.map((line) => encoder.encode(`${line}\n`))
      )
      return layerTools.pipe(
        Layer.provide(Layer.succeed(McpCaller, caller)),
        Layer.provideMerge(McpServer.layerStdio({ ...(yield* serverInfo), stdin, stdout: Sink.forEach((chunk: Uint8Array | string) => out.offer(chunk)) }))
      )
    })
  )
