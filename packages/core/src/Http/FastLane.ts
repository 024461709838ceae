/**
 * The fast lane of the node host: the metered chat calls — `POST /openai/v1/chat/completions`,
 * `/v1/complete`, `/v1/complete/stream` and `/v1/complete/tool-result` — with an API key, served on
 * node:http directly instead of through the Effect HTTP stack. They are the gateway's hottest
 * requests, and the per-request cost of the HttpServer / HttpRouter / route wrapper pipeline
 * (fibers, scopes, context copies: ~0.5 ms of CPU) was several times the work of the call itself
 * (docs/performance.md).
 *
 * Same contract as the routes (OpenAiRoutes.ts, CompletionRoutes.ts), built from the same parts:
 * the body schemas and conversions, Auth's API-key checks (Metering), quota admission with the same
 * headers and refusal, Completions' routing plan, ChatCalls for the upstream, fallback and usage,
 * the answer and chunk shapes and the error envelopes of Route.ts. Requests it does not claim (other
 * paths, JWTs, no credentials) go to the Effect app unchanged; requests it reads but that need
 * Effect-only steps (avatar context, FAHRN, the braid, an Admin acting for another avatar) are
 * handed to the Effect app with their body, on their own path: the Host header never builds the
 * URL (it once routed hand-offs to other endpoints), and an invalid one is answered 400.
 */
import type { IncomingMessage, Server, ServerResponse } from "node:http"
import { Effect, Runtime, type Scope } from "effect"
import { INVALID } from "../Accounts/Auth.ts"
import { KEY_PREFIX } from "../Accounts/ApiKeys.ts"
import { sha256 } from "../Accounts/Secrets.ts"
import { type ChatCall, ProviderCalls, type StreamChunk } from "../Engine/ProviderCalls.ts"
import { type CompletionInput, Completions, type PlannedCall } from "../Capabilities/Completions.ts"
import { GatewayConfig } from "../Config.ts"
import { BadRequest, type GatewayError, isGatewayError, Unauthorized } from "../Errors.ts"
import { headersOf, Quota, quotaExceeded, quotaState, utcDay } from "../Quota.ts"
import { Metering } from "../Storage/Metering.ts"
import { successOf } from "../Envelope.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { makeApp } from "./App.ts"
import * as Metrics from "../Metrics.ts"
import * as RequestId from "../RequestId.ts"
import { accessLogLine, options as observabilityOptions } from "./Observability.ts"
import { CompleteBody, inputOf, ToolResultBody } from "./CompletionRoutes.ts"
import { ChatCompletionBody, chatInputOf, completionId, toChatCompletion, toChunks } from "./OpenAiRoutes.ts"
import { declaresTooLarge, decoderNow, type Envelope, errorBody, errorParts, parseJsonBody, tooLargeError } from "./Route.ts"
import * as HttpApp from "@effect/platform/HttpApp"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"


export interface FastLane {
  /** Serves the request and returns true, or returns false without touching it. */
  readonly handle: (req: IncomingMessage, res: ServerResponse) => boolean
}

const utf8 = new TextDecoder()
const clientGone = new DOMException("The client closed the connection", "AbortError")

/** The API key of a request, if it authenticates with one (Auth.resolve's precedence). */
const apiKeyOf = (req: IncomingMessage): string | undefined => {
  const header = req.headers["x-api-key"]
  const apiKey = (Array.isArray(header) ? header.join(", ") : header)?.trim()
  if (apiKey) return apiKey
  const match = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization?.trim() ?? "")
  return match && match[1]!.startsWith(KEY_PREFIX) ? match[1] : undefined
}

/**
 * A syntactically valid Host header (RFC 3986 host and optional port), or none (HTTP/1.0). RFC 9112
 * §3.2: a request with an invalid Host is answered 400.
 */
const validHost = (host: string | undefined) =>
  host === undefined || /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+,;=%-]+)(?::\d{0,5})?$/.test(host)

/** The base hand-offs are parsed against: the request's own path, never its Host header, names the route. */
const HANDOFF_BASE = "http://aigw.internal"

const TOO_LARGE = Symbol("too large")
/** A request the lane handed to the Effect app (which counted and logged it). */
const DELEGATED = Symbol("delegated")
const GONE = Symbol("client gone")

/** The body as text within `limit` bytes; TOO_LARGE when it is larger, GONE when the client left first. */
const readBody = (req: IncomingMessage, limit: number): Promise<string | typeof TOO_LARGE | typeof GONE> =>
  new Promise((resolve) => {
    const chunks: Array<Buffer> = []
    let size = 0
    req.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) {
        req.removeAllListeners("data")
        req.resume()
        return resolve(TOO_LARGE)
      }
      chunks.push(chunk)
    })
    req.once("end", () => resolve(utf8.decode(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks))))
    // An aborted upload: nothing to answer (resolve is a no-op after "end").
    req.once("error", () => resolve(GONE))
    req.once("close", () => resolve(GONE))
  })

const sendJson = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string>) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  res.end(text)
}

const sendError = (res: ServerResponse, envelope: Envelope, error: GatewayError, headers: Record<string, string> = {}) => {
  const parts = errorParts(envelope, error, headers)
  sendJson(res, parts.status, parts.body, parts.headers)
}

const sse = { "content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no" }
const frame = (chunk: unknown) => `data: ${JSON.stringify(chunk)}\n\n`

/** What the Effect app needs besides the request (for handing requests to it). */
type AppServices = Exclude<
  Effect.Effect.Context<Effect.Effect.Success<typeof makeApp>>,
  HttpServerRequest.HttpServerRequest | Scope.Scope
>

/** The admitted call a lane route serves. */
interface Admitted<B> {
  readonly envelope: Envelope
  readonly avatar: AvatarRecord
  readonly body: B
  readonly res: ServerResponse
  /** The rate-limit headers every answer carries. */
  readonly headers: Record<string, string>
  /** The routing plan, made before admission. */
  readonly planned: PlannedCall
  /** The request id (RequestId.ts), sent upstream. */
  readonly requestId: string
}

interface LaneRoute<B> {
  readonly path: string
  readonly envelope: Envelope
  readonly decode: (json: unknown) => B | BadRequest
  /** The call's input, or the refusal of its messages. */
  readonly input: (body: B) => CompletionInput | BadRequest
  /** Requests the lane leaves to the Effect route after reading them (Effect-only steps, acting for another avatar). */
  readonly delegate?: (json: any, caller: AvatarRecord) => boolean
  readonly serve: (call: Admitted<B>) => Promise<void>
}

export const make = Effect.gen(function*() {
  const { limits, maxBodyBytes } = yield* GatewayConfig
  const metering = yield* Metering
  const quota = yield* Quota
  const completions = yield* Completions
  const calls = yield* ProviderCalls
  const { logRequests, metrics } = yield* observabilityOptions
  const runtime = yield* Effect.runtime<AppServices>()
  const run = Runtime.runPromise(runtime)
  // The Effect app, for the few requests the lane reads but leaves to their route.
  const app = HttpApp.toWebHandlerRuntime(runtime)(yield* makeApp)

  /** The upstream call of an admitted chat request (planned before admission); the answer is written by `answer`. */
  const chatCall = async <B>(admitted: Admitted<B>, answer: (call: ChatCall) => Promise<void>) => {
    const { avatar, envelope, headers, planned: { messages, request, targets }, requestId, res } = admitted
    const controller = new AbortController()
    res.once("close", () => {
      if (!res.writableFinished) controller.abort(clientGone)
    })
    try {
      await answer({ avatar, messages, targets, request, controller, requestId })
    } catch (e) {
      if (isGatewayError(e) && !res.headersSent) return sendError(res, envelope, e, headers)
      throw e
    }
  }

  /** Streams a call's chunks as SSE frames (`opening` first, `trailer` last). */
  const streamAnswer = async (
    res: ServerResponse,
    headers: Record<string, string>,
    call: ChatCall,
    frames: (chunk: StreamChunk) => string,
    opening = "",
    trailer = ""
  ) => {
    const stream = await calls.openStream(call)
    res.writeHead(200, { ...headers, ...sse })
    if (opening !== "") res.write(opening)
    await stream.run((chunks) => {
      let out = ""
      for (const chunk of chunks) out += frames(chunk)
      if (out !== "") res.write(out)
    })
    res.end(trailer)
  }

  const openAiChat: LaneRoute<typeof ChatCompletionBody.Type> = {
    path: "/openai/v1/chat/completions",
    envelope: "openai",
    decode: decoderNow(ChatCompletionBody, "request body"),
    input: chatInputOf,
    serve: (admitted) =>
      chatCall(admitted, async (call) => {
        const { body, headers, res } = admitted
        const id = completionId()
        if (!body.stream) return sendJson(res, 200, toChatCompletion(id, await calls.complete(call)), headers)
        const { convert, opening } = toChunks(id, body.model, body.stream_options?.include_usage === true)
        await streamAnswer(res, headers, call, (chunk) => convert(chunk).map(frame).join(""), frame(opening), "data: [DONE]\n\n")
      })
  }

  // /v1/complete*: the gateway's own shapes. Avatar context, FAHRN, the braid and acting for another
  // avatar (Admins) need Effect services: those requests go to the route.
  const effectOnly = (json: any, caller: AvatarRecord) =>
    typeof json === "object" && json !== null &&
    (json.injectAvatarContext !== undefined || json.useFAHRN !== undefined || json.useHolonicBraid !== undefined ||
      (json.avatarId !== undefined && json.avatarId !== caller.id))
  type GatewayBody = typeof ToolResultBody.Type
  const complete = (
    path: string,
    decode: (json: unknown) => GatewayBody | BadRequest,
    check?: (body: GatewayBody) => BadRequest | undefined
  ): LaneRoute<GatewayBody> => ({
    path,
    envelope: "gateway",
    decode,
    input: (body) => check?.(body) ?? inputOf(body),
    delegate: effectOnly,
    serve: (admitted) =>
      chatCall(admitted, async (call) =>
        sendJson(admitted.res, 200, successOf("gateway", await calls.complete(call), null), admitted.headers))
  })
  const routes: ReadonlyArray<LaneRoute<any>> = [
    openAiChat,
    complete("/v1/complete", decoderNow(CompleteBody, "request body")),
    complete("/v1/complete/tool-result", decoderNow(ToolResultBody, "request body"), (body) =>
      body.messages.some((m) => m.role === "tool")
        ? undefined
        : new BadRequest({ message: "messages must contain at least one role=tool message (use /v1/complete otherwise)" })),
    {
      path: "/v1/complete/stream",
      envelope: "gateway",
      decode: decoderNow(CompleteBody, "request body"),
      input: inputOf,
      delegate: effectOnly,
      serve: (admitted) =>
        chatCall(admitted, (call) => streamAnswer(admitted.res, admitted.headers, call, frame))
    }
  ]
  const byPath = new Map(routes.map((r) => [r.path, r]))

  /**
   * Hands a request whose body the lane already read to the Effect app (with the lane's request id
   * in its `x-request-id`; the app counts and logs it). Resolves to DELEGATED.
   */
  const delegate = async (req: IncomingMessage, res: ServerResponse, text: string): Promise<typeof DELEGATED> => {
    const headers = new Headers()
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined || name === "content-length" || name === "transfer-encoding") continue
      for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v)
    }
    const answer = await app(new Request(new URL(req.url!, HANDOFF_BASE), { method: "POST", headers, body: text }))
    const out: Record<string, Array<string>> = {}
    answer.headers.forEach((value, name) => (out[name] ??= []).push(value))
    res.writeHead(answer.status, out)
    if (answer.body === null) {
      res.end()
      return DELEGATED
    }
    await pipeline(Readable.fromWeb(answer.body as any), res)
    return DELEGATED
  }

  const serve = async (req: IncomingMessage, res: ServerResponse, apiKey: string, route: LaneRoute<any>, requestId: string): Promise<unknown> => {
    if (!validHost(req.headers.host)) return sendError(res, route.envelope, new BadRequest({ message: "Invalid Host header." }))
    // The order of the route: credentials, body, admission, then the call.
    const caller = await metering.avatarOfKey(sha256(apiKey))
    if (caller === undefined) return sendError(res, route.envelope, new Unauthorized({ message: INVALID }))
    if (declaresTooLarge(req.headers, maxBodyBytes)) return sendError(res, route.envelope, tooLargeError(maxBodyBytes))
    const text = await readBody(req, maxBodyBytes)
    if (text === GONE) return
    if (text === TOO_LARGE) return sendError(res, route.envelope, tooLargeError(maxBodyBytes))
    const json = parseJsonBody(text, limits.maxJsonDepth)
    if (json instanceof BadRequest) return sendError(res, route.envelope, json)
    if (route.delegate?.(json, caller)) return delegate(req, res, text)
    const body = route.decode(json)
    if (body instanceof BadRequest) return sendError(res, route.envelope, body)

    const avatar = caller // acting for another avatar was delegated above
    const now = Date.now()
    const day = utcDay(now)
    const limit = quota.limitOf(avatar.plan, avatar.karmaTotal)
    /** A refusal with the day's rate-limit headers. */
    const refuse = async (error: GatewayError) =>
      sendError(res, route.envelope, error, headersOf(quotaState(avatar, limit, await metering.callsOn(avatar.id, day), now)))
    // Validation before admission (as Route.ts's `check`): a refused request costs no quota.
    const input = route.input(body)
    if (input instanceof BadRequest) return refuse(input)
    const planned = completions.plan(avatar, input, input.messages)
    if (!Array.isArray(planned.targets)) return refuse(planned.targets as GatewayError)
    const used = await metering.admit(avatar.id, day, limit, 1)
    if (used === undefined) return refuse(quotaExceeded(limit, avatar.plan, 1, now))
    return route.serve({
      envelope: route.envelope,
      avatar,
      body,
      res,
      headers: headersOf(quotaState(avatar, limit, used, now)),
      planned: planned as PlannedCall,
      requestId
    })
  }

  const handle = (req: IncomingMessage, res: ServerResponse): boolean => {
    if (req.method !== "POST") return false
    const url = req.url ?? ""
    const query = url.indexOf("?")
    const route = byPath.get(query === -1 ? url : url.slice(0, query))
    if (route === undefined) return false
    const apiKey = apiKeyOf(req)
    if (apiKey === undefined) return false
    const started = performance.now()
    // The request id (RequestId.ts): on every answer, and in the headers a hand-off passes on.
    const requestId = RequestId.fromHeader(req.headers[RequestId.HEADER])
    req.headers[RequestId.HEADER] = requestId
    res.setHeader(RequestId.HEADER, requestId)
    const done = () => {
      const ms = performance.now() - started
      if (metrics) Metrics.recordRequest(route.path, "POST", res.statusCode, ms / 1000)
      if (logRequests) void run(accessLogLine(requestId, "POST", route.path, route.path, res.statusCode, ms))
    }
    serve(req, res, apiKey, route, requestId).then(
      (outcome) => {
        if (outcome !== DELEGATED) done()
      },
      (e) => {
        // As Route.ts's last resort: log the cause, answer a generic 500 envelope (or cut a started stream).
        void run(Effect.logError("unexpected failure", e).pipe(Effect.annotateLogs("requestId", requestId)))
        if (res.headersSent) res.destroy()
        else sendJson(res, 500, errorBody(route.envelope, { _tag: "Internal", message: "Internal server error." }), {})
        done()
      }
    )
    return true
  }

  return { handle } satisfies FastLane
})

/**
 * Puts the fast lane in front of a node:http server's request listeners (the Effect app added
 * by NodeHttpServer): requests it claims never reach them.
 */
export const attach = <S extends Server>(server: S, lane: FastLane): S => {
  const emit = server.emit as (this: S, event: string | symbol, ...args: Array<any>) => boolean
  server.emit = function(this: S, event: string | symbol, ...args: Array<any>) {
    if (event === "request" && lane.handle(args[0], args[1])) return true
    return emit.call(this, event, ...args)
  } as S["emit"]
  return server
}
