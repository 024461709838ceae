/**
 * The Node HTTP host: configuration -> layers -> NodeHttpServer. Wiring only.
 * SIGINT/SIGTERM interrupt the main fiber: the server stops accepting, in-flight requests
 * finish (within AIGW_SHUTDOWN_GRACE_SECONDS), layers (database pool, mail transport) are released. A failed start is one line on stderr
 * naming the cause and the variable to fix, and exit code 1 (StartupError.ts; AIGW_DEBUG=1 adds the cause).
 * Logs: text (Effect's pretty logger) or, with AIGW_LOG_FORMAT=json, one JSON object per line (Logging.ts).
 * Started by main.ts in each serving process.
 */
import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { ConfigFile, FastLane, GatewayConfig, HttpApp, Layers, Logging, MallocTrim, Mcp, ShutdownDeadline, StartupError, StopSignals } from "@aigw/core"
import { Config, Effect, Layer, Logger } from "effect"

const ServerLive = Layer.unwrapEffect(
  Effect.gen(function*() {
    const port = yield* GatewayConfig.portConfig
    const host = yield* GatewayConfig.hostConfig
    // The routes that declare a lane (metered chat and embeddings) take the fast lane (FastLane.ts); the
    // rest the Effect app. AIGW_FAST_LANE=false serves everything through the Effect app.
    const fastLane = yield* Config.boolean("AIGW_FAST_LANE").pipe(Config.withDefault(true))
    // After SIGTERM, requests in flight get this long before their connections are closed (ShutdownDeadline.ts).
    const graceSeconds = yield* Config.number("AIGW_SHUTDOWN_GRACE_SECONDS").pipe(
      Config.validate({ message: "AIGW_SHUTDOWN_GRACE_SECONDS must be a number of seconds above 0, at most 86400", validation: (n) => n > 0 && n <= 86_400 }),
      Config.withDefault(8)
    )
    yield* GatewayConfig.warnWithoutPublicUrl(true)
    const server = yield* ShutdownDeadline.serverOf(graceSeconds * 1000)
    if (!fastLane) return NodeHttpServer.layer(server, { port, host })
    const lane = yield* FastLane.make
    return NodeHttpServer.layer(() => FastLane.attach(server(), lane), { port, host })
  })
)

/** "Listening on" and the address as a URL (the platform's line wrote an IPv6 host without brackets). */
const logAddress = Layer.effectDiscard(Effect.flatMap(HttpServer.HttpServer, ({ address }) =>
  Effect.log(`Listening on ${address._tag === "UnixAddress" ? `unix://${address.path}` : `http://${GatewayConfig.urlHost(address.hostname)}:${address.port}`}`)))

const HttpLive = Layer.unwrapEffect(
  Effect.map(HttpApp.makeApp, (app) => HttpServer.serve(app))
).pipe(
  Layer.merge(logAddress),
  Layer.provide(ServerLive),
  // MCP over streamable HTTP at /mcp (+ /.well-known/mcp.json, /.well-known/agent.json)
  Layer.provide(Mcp.layerHttp),
  // Background rounds: advance durable jobs, deliver webhooks.
  Layer.merge(Layers.layerBackground),
  Layer.provide(Layers.layerFromEnv()),
  // Freed C heap memory back to the system (the bundle's parse, then every AIGW_MALLOC_TRIM_MS).
  Layer.merge(MallocTrim.layer),
  Layer.provide(ConfigFile.layer(process.env.AIGW_CONFIG))
)

const LoggingLive = Logging.layerFromEnv({ textLayer: Logger.pretty }).pipe(Layer.provide(ConfigFile.layer(process.env.AIGW_CONFIG)))

// Ctrl-C or a process manager may signal the whole process group, and a wrapper (npm, tsx) or the workers'
// primary relays the signal again: once the graceful shutdown has begun, a repeat must not kill it before the
// layers are released (the usage exporters' flush, the database pool).
StopSignals.keepGracefulStops()
Layer.launch(HttpLive).pipe(
  Effect.provide(LoggingLive),
  StartupError.reportStartupFailure,
  NodeRuntime.runMain({ disablePrettyLogger: true, disableErrorReporting: true })
)
