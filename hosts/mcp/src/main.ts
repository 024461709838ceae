/**
 * The MCP host over stdio, for desktop MCP hosts: the gateway toolkit (the same as /mcp on the
 * node host) with `AIGW_API_KEY` naming the avatar. Wiring only: configuration -> layers -> stdio.
 * stdout carries the protocol, so every log line goes to stderr (text, or JSON lines with
 * AIGW_LOG_FORMAT=json; Logging.ts). A failed start is one line on stderr
 * naming the cause and the variable to fix, and exit code 1 (StartupError.ts; AIGW_DEBUG=1 adds the cause).
 * The process ends when stdin ends (after the answers still due) or on SIGTERM/SIGINT.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeSink from "@effect/platform-node/NodeSink"
import * as NodeStream from "@effect/platform-node/NodeStream"
import { ConfigFile, Layers, Logging, MallocTrim, Mcp, StartupError, StopSignals } from "@aigw/core"
import { Config, Context, Effect, Layer, Logger } from "effect"

// A stray console.log from any library would corrupt the protocol stream.
console.log = console.error
console.info = console.error
console.debug = console.error

const McpLive = Layer.unwrapEffect(
  Effect.map(Config.option(Config.redacted("AIGW_API_KEY")), (apiKey) =>
    Mcp.layerStdio({ stdin: NodeStream.stdin, stdout: NodeSink.stdout, apiKey }))
).pipe(
  Layer.provide(Layers.layerFromEnv()),
  Layer.merge(MallocTrim.layer),
  Layer.provide(ConfigFile.layer(process.env.AIGW_CONFIG))
)

StopSignals.keepGracefulStops()
// Serves until stdin ends (the MCP host closed it) and every answer is written, then exits. The logging layer
// reads AIGW_CONFIG too: provided inside the start-up report, so that a bad file is its one line on stderr.
Effect.scoped(Effect.flatMap(Layer.build(McpLive), (context) => Context.get(context, Mcp.McpStdio).done)).pipe(
  Effect.provide(
    Logging.layerFromEnv({
      stderr: true,
      textLayer: Logger.replace(Logger.defaultLogger, Logger.prettyLogger({ stderr: true, colors: false }))
    }).pipe(Layer.provide(ConfigFile.layer(process.env.AIGW_CONFIG)))
  ),
  StartupError.reportStartupFailure,
  NodeRuntime.runMain({ disablePrettyLogger: true, disableErrorReporting: true })
)
