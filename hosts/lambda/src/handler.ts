/**
 * AWS Lambda entry points (bundled to dist/handler.mjs):
 *
 *  - `handler`: API Gateway HTTP API (payload 2.0), REST API (1.0) and Function URL (BUFFERED)
 *    events -> the gateway and avatar API; SSE answers arrive whole.
 *  - `streamHandler`: Function URL with InvokeMode RESPONSE_STREAM; SSE is passed on as produced.
 *  - `migrate`: applies pending database migrations (invoke once per deploy).
 *  - `scheduled`: EventBridge schedule; runs the `drainers` within the invocation's time budget.
 *
 * Wiring only: the adapter (event mapping, streaming, one runtime per container) is core's
 * Lambda module (packages/core/src/Lambda). Configuration is the node host's
 * (docs/configuration.md); Lambda additionally needs a PostgreSQL DATABASE_URL and JWT_SECRET or
 * JWT_PRIVATE_KEY (docs/deployment-lambda.md).
 */
import { JobWorker, Lambda, UsageRetention } from "@aigw/core"

export type Drainer = Lambda.Drainer

/**
 * Background work the scheduled handler runs, in order, each until the deadline it is given: the usage
 * records older than AIGW_USAGE_RETENTION_DAYS (none when it is unset; first, for a few seconds at most,
 * since the next drains as long as work is due), then core's rounds of due jobs (video, batch,
 * fine-tuning), webhook deliveries and mail retries.
 */
export const drainers: ReadonlyArray<Drainer> = [
  { name: "usage retention", drain: UsageRetention.pruneScheduled },
  { name: "jobs+webhooks", drain: (deadlineMs) => JobWorker.drainUntil(deadlineMs) }
]

// nodeApi: the bundle ships argon2's prebuilt binaries, which need Node-API 10 (nodejs22.x).
const host = Lambda.makeLambdaHost({ drainers, nodeApi: 10 })

// In a gateway function, build the runtime during Lambda's init phase (which waits for this
// top-level await), so that provisioned or pre-initialised containers start warm. A failure is
// logged and left to the first invocation, which retries and answers the 503 envelope.
if (process.env.AWS_LAMBDA_FUNCTION_NAME && /\.(handler|streamHandler)$/.test(process.env._HANDLER ?? "")) {
  await host.warm()
}

export const handler = host.handler
export const migrate = host.migrate
export const scheduled = host.scheduled

/** The streaming handler before `awslambda.streamifyResponse` (for tests and other runtimes). */
export const streamingHandler = host.streamingHandler

/** Marked for response streaming when the Lambda Node.js runtime (or lambda-local) provides `awslambda`. */
export const streamHandler = Lambda.streamify(streamingHandler)
