/**
 * A host's bound on one request's time, given with the request (the Lambda host: the invocation's
 * remaining time). A streamed chat answer still running at `at` (epoch ms) is ended by the gateway
 * with `message` in its final chunk, in the stream's own format, rather than cut by the host
 * without one (CompletionRoutes.ts `streamAnswer`).
 */
import { Context } from "effect"

export class RequestDeadline extends Context.Tag("aigw/RequestDeadline")<RequestDeadline, {
  readonly at: number
  readonly message: string
}>() {}
