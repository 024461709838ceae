/**
 * Log format for hosts, one switch: `AIGW_LOG_FORMAT=json` writes one JSON object per line —
 * `timestamp`, `level`, `message`, `requestId` when the line belongs to a request, the other log
 * annotations (access log: method, route, status, durationMs) and `cause` when there is one —
 * instead of the default text logger (docs/observability.md). The request id is a log annotation
 * (RequestId.ts), so text lines carry it too.
 */
import { type ConfigError, Config, Effect, Layer, Logger } from "effect"

export type LogFormat = "text" | "json"

/** A log line as one JSON object (no trailing newline). */
export const jsonLine = Logger.map(Logger.structuredLogger, (log): string => {
  const { requestId, ...annotations } = log.annotations as Record<string, unknown>
  const line: Record<string, unknown> = {
    timestamp: log.timestamp,
    level: log.logLevel,
    message: log.message,
    ...(requestId !== undefined ? { requestId } : {}),
    ...annotations
  }
  if (log.cause !== undefined) line.cause = log.cause
  try {
    return JSON.stringify(line)
  } catch {
    return JSON.stringify({ timestamp: log.timestamp, level: log.logLevel, message: String(log.message), ...(requestId !== undefined ? { requestId } : {}) })
  }
})

/**
 * Replaces the default logger with the JSON logger (to stdout, or stderr for the stdio MCP host
 * whose stdout carries the protocol); `text` leaves `textLayer` in place.
 */
export const layer = (format: LogFormat, options: { readonly stderr?: boolean; readonly textLayer?: Layer.Layer<never> } = {}): Layer.Layer<never> =>
  format === "json"
    ? Logger.replace(Logger.defaultLogger, options.stderr ? Logger.withConsoleError(jsonLine) : Logger.withConsoleLog(jsonLine))
    : options.textLayer ?? Layer.empty

/** The format named by `AIGW_LOG_FORMAT` (`text` or `json`, default `text`). */
export const format: Config.Config<LogFormat> = Config.literal("text", "json")("AIGW_LOG_FORMAT").pipe(Config.withDefault("text" as const))

/** `layer` with the format of `AIGW_LOG_FORMAT`. */
export const layerFromEnv = (options: { readonly stderr?: boolean; readonly textLayer?: Layer.Layer<never> } = {}): Layer.Layer<never, ConfigError.ConfigError> =>
  Layer.unwrapEffect(Effect.map(format, (f) => layer(f, options)))
