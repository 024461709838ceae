/**
 * A host's bound on one request's time, given with the request (the Lambda host: the invocation's
 * remaining time). A streamed chat answer still running at `at` (epoch ms) is ended by the gateway
 * with `message` in its final chunk, in the stream's own format, rather than cut by the host
 * without one (CompletionRoutes.ts `streamAnswer`).
 */
import { Context } from "effect"

/**
 * How long before a cut a stream still running is ended, so that it leaves whole: its usage is
 * recorded before its last event, which in a fresh process may first load the tokenizer.
 */
const STOP_AHEAD_MS = 1_000

/** When, of `cutMs` before a cut, a stream still running is ended: a second before it, or a quarter of the way when the cut is under 4 s away. */
export const stopBefore = (cutMs: number): number => cutMs - Math.min(STOP_AHEAD_MS, cutMs / 4)

export class RequestDeadline extends Context.Tag("aigw/RequestDeadline")<RequestDeadline, {
  readonly at: number
  readonly message: string
}>() {}
