/**
 * The fast lane of the node host: the routes that declare a `lane` (Lane.ts) — the metered chat
 * and embeddings calls — served on node:http directly instead of through the Effect HTTP stack.
 * They are the gateway's hottest requests, and the per-request cost of the HttpServer / HttpRouter /
 * route wrapper pipeline (fibers, scopes, context copies) was several times the work of the call
 * itself (docs/performance.md).
 *
 * Same contract as the routes, built from the same parts: the route's body decoder, envelope and
 * metering, the edge's credentials, bounded reader, JSON checks and error envelopes (Edge.ts), Auth's
 * key and JWT checks, Quota's admission and headers, the route's lane plan and the engine
 * (Engine/ProviderCalls.ts). Requests it does not claim (other paths and methods, no or malformed
 * credentials) go to the Effect app unchanged; requests it reads but that the route must serve (a
 * step that needs Effect services, an Admin acting for another avatar) are handed to the Effect app
 * with their body, on their own path: the Host header never builds the URL (it once routed
 * hand-offs to other endpoints), and an invalid one is answered 400.
 */
import type { IncomingMessage, Server, ServerResponse } from "node:http"
import type { Socket } from "node:net"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Cause, Effect, Exit, FiberId, Option, Runtime, type Scope } from "effect"
import { Auth, INVALID, type KeyOrToken } from "../Accounts/Auth.ts"
import { Completions } from "../Capabilities/Completions.ts"
import { Embeddings } from "../Capabilities/Embeddings.ts"
import { GatewayConfig } from "../Config.ts"
import { ProviderCalls } from "../Engine/ProviderCalls.ts"
import { storedId } from "../Accounts/Schemas.ts"
import { Cancel } from "../Providers/internal/cancel.ts"
import { BadRequest, type GatewayError, isGatewayError, QuotaExceeded, Unauthorized } from "../Errors.ts"
import * as Metrics from "../Metrics.ts"
import { headersOf, Quota } from "../Quota.ts"
import * as RequestId from "../RequestId.ts"
import { Routing } from "../Routing.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { CallerGone } from "../Storage/Metering.ts"
import { makeApp, routes as appRoutes } from "./App.ts"
import {
  bodyTookLong,
  crossSiteFormProblem,
  credentialsOf,
  declaresTooLarge,
  defectParts,
  errorParts,
  parseJsonBody,
  presented,
  presentedKey,
  readLimitedText,
  sendError,
  sendJson,
  SSE_HEADERS,
  textDecoderOf,
  TOO_LARGE,
  tooLargeError,
  validHost,
  webHeaders
} from "./Edge.ts"
import { Catalog } from "../Catalog/Catalog.ts"
import { type LaneCall, type LaneServices, runNowOn, STREAMED } from "./Lane.ts"
import { accessLogLine, asRequest, asServerSpan, options as observabilityOptions } from "./Observability.ts"
import { answerParts, logUnexpected, pathAndQueryRefusal, type Route } from "./Route.ts"
import { admitted } from "./Pipelining.ts"

export interface FastLane {
  /** Serves the request and returns true, or returns false without touching it. */
  readonly handle: (req: IncomingMessage, res: ServerResponse) => boolean
}


const clientGone = new DOMException("The client closed the connection", "AbortError")
/** The response was closed before it was all written: the client went away. */
const clientLeft = (res: ServerResponse) => res.destroyed && !res.writableFinished
/** An admission's CallerGone as its value (the lane answers nobody then); any other failure stays one. */
const goneAsValue = (e: unknown): CallerGone => {
  if (e instanceof CallerGone) return e
  throw e
}

/** The base hand-offs are parsed against: the request's own path, never its Host header, names the route. */
const HANDOFF_BASE = "http://aigw.internal"

/** A request the lane handed to the Effect app (which counted and logged it). */
const DELEGATED = Symbol("delegated")

/** What the Effect app needs besides the request (for handing requests to it). */
type AppServices = Exclude<
  Effect.Effect.Context<Effect.Effect.Success<typeof makeApp>>,
  HttpServerRequest.HttpServerRequest | Scope.Scope
>

/** The fast lane over the routes that declare a lane (by default the app's). */
export const make = Effect.gen(function*() {
  const { limits, maxBodyBytes } = yield* GatewayConfig
  const quota = yield* Quota
  const auth = yield* Auth
  const { logRequests, metrics } = yield* observabilityOptions
  const runtime = yield* Effect.runtime<AppServices>()
  const run = Runtime.runPromise(runtime)
  const runFork = Runtime.runFork(runtime)
  const services: LaneServices = {
    calls: yield* ProviderCalls,
    catalog: yield* Catalog,
    completions: yield* Completions,
    embeddings: yield* Embeddings,
    routing: yield* Routing,
    runNow: runNowOn(runtime)
  }
  // The Effect app, for the requests the lane reads but leaves to their route.
  const app = HttpApp.toWebHandlerRuntime(runtime)(yield* makeApp)
  const byPath = new Map(appRoutes.filter((r) => r.lane !== undefined && r.method === "POST").map((r) => [r.path, r]))
  /** The requests the lane is serving now (a stream holds its last writes for its end only when not alone). */
  let serving = 0


  /**
   * Hands a request whose body the lane already read to the Effect app (with the lane's request id
   * in its `x-request-id`; the app counts and logs it). Resolves to DELEGATED.
   */
  const delegate = async (req: IncomingMessage, res: ServerResponse, text: string): Promise<typeof DELEGATED> => {
    const headers = webHeaders(req.headers)
    // The body is the text read, framed anew.
    headers.delete("content-length")
    headers.delete("transfer-encoding")
    // A client that leaves interrupts the app's handling (and its upstream calls), as on the node server.
    const left = new AbortController()
    const onClose = () => {
      if (clientLeft(res)) left.abort(clientGone)
    }
    res.once("close", onClose)
    try {
      const answer = await app(new Request(new URL(req.url!, HANDOFF_BASE), { method: "POST", headers, body: text, signal: left.signal }))
      if (clientLeft(res)) {
        await answer.body?.cancel()
        return DELEGATED
      }
      const out: Record<string, Array<string>> = {}
      answer.headers.forEach((value, name) => (out[name] ??= []).push(value))
      res.writeHead(answer.status, out)
      if (answer.body === null) res.end()
      else await pipeline(Readable.fromWeb(answer.body as any), res)
    } catch (e) {
      // The client left mid-answer: nobody to answer, nothing went wrong.
      if (!clientLeft(res)) throw e
    } finally {
      res.off("close", onClose)
    }
    return DELEGATED
  }

  /** The status a route's Effect ends in, for its server span (as the platform's: 499 when the client left). */
  const statusOf = (route: Route) => (exit: Exit.Exit<unknown, unknown>): number => {
    if (Exit.isSuccess(exit)) return answerParts(route.envelope, exit.value, {}).status
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure) && isGatewayError(failure.value)) return errorParts(route.envelope, failure.value).status
    return Cause.isInterruptedOnly(exit.cause) ? 499 : 500
  }

  /**
   * The lane call of an admitted request: its abort follows the client, its SSE writer answers on
   * `res`, and the route's own Effects run as the request (its id, its server span).
   */
  const laneCall = (
    route: Route,
    req: IncomingMessage,
    avatar: AvatarRecord,
    requestId: string,
    apiKey: string | undefined,
    res: ServerResponse,
    headers: Record<string, string>
  ): LaneCall => {
    const cancel = new Cancel()
    // A client that left while its admission was on its way: its call is counted, but made for nobody.
    if (clientLeft(res)) cancel.abort(clientGone)
    else {
      res.once("close", () => {
        if (clientLeft(res)) cancel.abort(clientGone)
      })
    }
    return {
      call: (targets) => ({ avatar, targets, cancel, requestId }),
      run: (effect) =>
        new Promise((resolve, reject) => {
          // Interrupted through the Cancel's hook: no AbortSignal per call (Providers/internal/cancel.ts).
          const served = asServerSpan(req, statusOf(route))(effect)
          const fiber = runFork(asRequest({ id: requestId, route: route.path, apiKey })(served))
          const unhook = cancel.onAbort(() => fiber.unsafeInterruptAsFork(FiberId.none))
          fiber.addObserver((exit) => {
            unhook()
            // squash: the failure (a GatewayError) when there is one, else the defect or the interruption.
            if (Exit.isSuccess(exit)) resolve(exit.value)
            else reject(Cause.squash(exit.cause))
          })
        }),
      stream: async (stream, frames, opening = "", trailer = "") => {
        res.writeHead(200, { ...headers, ...SSE_HEADERS })
        // Writes are held (corked) and leave together, one socket write each time: the head and the
        // opening (if the surface has one) with the first batch when the upstream's first read comes in
        // the same turn of the event loop, else at that turn's end; each batch once the microtasks of
        // its tick have run.
        // Under load (other requests in flight), once the upstream's answer is complete, what is held
        // waits for the final chunk (totals, emitted once usage is recorded) and leaves with the end:
        // an answer that came in one upstream read leaves in one socket write. Alone, it leaves at
        // once, so its first byte does not wait for the usage record.
        // The response's socket is corked, not the response: on Node 22 a corked response keeps a chunked
        // body's writes in a buffer of its own, which `end` sends after the body's terminating chunk (the
        // stream's last events and its [DONE] then came after its end). Node 20's response cork is the
        // socket's. A response still queued behind a pipelined one has no socket: its writes wait anyway.
        let corked: Socket | null = null
        let holding = false
        const flush = () => {
          if (corked === null || holding) return
          const socket = corked
          corked = null
          if (!res.writableEnded) socket.uncork()
        }
        const send = (text: string, flushWhen: (flush: () => void) => void) => {
          if (corked === null) {
            corked = res.socket
            corked?.cork()
          }
          res.write(text)
          flushWhen(flush)
        }
        // Written even when empty: the head leaves then, so the client learns that the call was accepted.
        send(opening, setImmediate)
        await stream.run((chunks, upstreamDone) => {
          let out = ""
          for (const chunk of chunks) out += frames(chunk)
          holding ||= upstreamDone && serving > 1
          if (out !== "") send(out, process.nextTick)
          // A client that does not read: the upstream waits with it (ProviderCalls.WhenReady).
          return res.writableNeedDrain ? (resume: () => void) => void res.once("drain", resume) : undefined
        })
        res.end(trailer)
        return STREAMED
      }
    }
  }

  const serve = async (req: IncomingMessage, res: ServerResponse, route: Route, credentials: KeyOrToken, requestId: string): Promise<unknown> => {
    const { envelope } = route
    // The order of the route: credentials, query, body, admission, then the call.
    const unauthorized = () => sendError(res, envelope, new Unauthorized({ message: INVALID }))
    const checked = await auth.ownerOf(credentials)
    if (checked === undefined) return unauthorized()
    let caller: AvatarRecord = checked
    const checkedAt = performance.now()
    // Every refusal to the caller carries its day's rate-limit headers (as Route.ts's).
    const refuse = async (error: GatewayError) => sendError(res, envelope, error, headersOf(await quota.peek(caller)))
    const query = req.url!.indexOf("?")
    const refused = query === -1
      ? undefined
      : pathAndQueryRefusal({ envelope, takesQuery: Option.isSome(route.query) }, {}, HttpServerRequest.searchParamsFromURL(new URL(req.url!, HANDOFF_BASE)))
    if (refused !== undefined) return refuse(refused)
    const crossSite = crossSiteFormProblem(req.headers)
    if (crossSite !== undefined) return refuse(crossSite)
    if (declaresTooLarge(req.headers, maxBodyBytes)) return refuse(tooLargeError(maxBodyBytes))
    const decoder = textDecoderOf(req.headers)
    if (decoder instanceof BadRequest) return refuse(decoder)
    // A client that leaves mid-upload: nothing to answer.
    const text = await readLimitedText(req, maxBodyBytes, decoder).catch(() => undefined)
    if (text === undefined) return
    if (text === TOO_LARGE) return refuse(tooLargeError(maxBodyBytes))
    if (text instanceof BadRequest) return refuse(text)
    const json = parseJsonBody(text, limits, req.headers["content-type"])
    if (json instanceof BadRequest) return refuse(json)
    const body = route.decode!(json)
    if (body instanceof BadRequest) return refuse(body)
    // As the route: once the body is read and accepted, a caller whose body took long is looked up again.
    if (bodyTookLong(checkedAt)) {
      const again = await auth.ownerOf(credentials)
      if (again === undefined) return unauthorized()
      caller = again
    }
    // Acting for another avatar (Admins) is the route's.
    const actingFor = route.avatarIdOf?.(body)
    if (actingFor !== undefined && storedId(actingFor) !== caller.id) return delegate(req, res, text)
    // Validation before admission (as Route.ts's `check`): a refused request costs no quota.
    const plan = route.lane!.plan(services, caller, body, req.headers)
    if (plan === undefined) return delegate(req, res, text)
    if (typeof plan !== "function") return refuse(plan)
    const admitted = await quota.admit(caller, route.meteredCalls(body), () => clientLeft(res)).catch(goneAsValue)
    // The client left while its admission waited: nothing counted, nobody to answer.
    if (admitted instanceof CallerGone) return
    if (admitted instanceof QuotaExceeded) return refuse(admitted)
    const headers = headersOf(admitted)
    try {
      const answer = await plan(laneCall(route, req, caller, requestId, presentedKey(credentials), res, headers))
      if (answer === STREAMED) return
      const parts = answerParts(envelope, answer, headers)
      sendJson(res, parts.status, parts.body, parts.headers)
    } catch (e) {
      // The client left, which aborted its call (laneCall): nobody to answer, nothing went wrong.
      if (clientLeft(res)) return
      if (isGatewayError(e) && !res.headersSent) return sendError(res, envelope, e, headers)
      throw e
    }
  }

  const handle = (req: IncomingMessage, res: ServerResponse): boolean => {
    if (req.method !== "POST") return false
    const url = req.url ?? ""
    const query = url.indexOf("?")
    const route = byPath.get(query === -1 ? url : url.slice(0, query))
    if (route === undefined) return false
    // Missing or malformed credentials, and an invalid Host header, are the Effect app's to refuse.
    const credentials = presented(credentialsOf(req.headers))
    if (credentials._tag !== "ApiKey" && credentials._tag !== "Jwt") return false
    if (!validHost(req.headers.host, req.httpVersion)) return false
    const started = performance.now()
    // The request id (RequestId.ts): on every answer, and in the headers a hand-off passes on.
    const requestId = RequestId.fromHeader(req.headers[RequestId.HEADER])
    req.headers[RequestId.HEADER] = requestId
    res.setHeader(RequestId.HEADER, requestId)
    const surface = RequestId.surfaceHeader(req.url ?? "")
    if (surface !== undefined) res.setHeader(surface, requestId)
    const done = () => {
      const ms = performance.now() - started
      // A client that left before its answer ended is 499 (as the Effect app's middleware logs it), not the status begun.
      const status = clientLeft(res) ? 499 : res.statusCode
      if (metrics) Metrics.recordRequest(route.path, "POST", status, ms / 1000)
      if (logRequests) void run(accessLogLine(requestId, "POST", route.path, route.path, status, ms))
    }
    serving++
    serve(req, res, route, credentials, requestId).then(
      (outcome) => {
        serving--
        if (outcome !== DELEGATED) done()
      },
      (e) => {
        serving--
        // As Route.ts's last resort: log the cause, answer a generic 500 envelope (or cut a started stream).
        void run(logUnexpected(Cause.die(e)).pipe(Effect.annotateLogs("requestId", requestId)))
        if (res.headersSent) res.destroy()
        else {
          const { body, headers, status } = defectParts(route.envelope, e)
          sendJson(res, status, body, headers)
        }
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
    if (event === "request" && (!admitted(args[0], args[1]) || lane.handle(args[0], args[1]))) return true
    return emit.call(this, event, ...args)
  } as S["emit"]
  return server
}
