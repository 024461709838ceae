/**
 * A bound on a graceful stop. Closing a node server waits for every request in flight, and a
 * stream whose upstream stalls lasts until its idle timeout; a process manager does not wait that
 * long (Docker and Podman send SIGKILL after 10 s, Kubernetes after 30), and a killed process
 * records nothing of the calls it was serving. So once `close` has waited `graceMs`, the
 * connections still open are closed: their calls end as abandoned ones do (the upstream request
 * aborted, the usage recorded), and the layers are released before the manager's SIGKILL.
 * A second before that cut (a quarter of the grace, when it is shorter than 4 s) `beforeCut` runs:
 * the host ends its calls there (ProviderCalls `stopCalls`): chat streams with their own error
 * ending, calls still waiting for their upstream's answer with a 503 in their route's envelope.
 */
import { Effect } from "effect"
import { Server } from "node:http"
import { ProviderCalls, type StreamError } from "../Engine/ProviderCalls.ts"
import { admitted } from "./Pipelining.ts"
import { stopBefore } from "./RequestDeadline.ts"
import * as Tokens from "../Tokens.ts"
import { answerUnreadableRequests } from "./UnreadableRequests.ts"

/** The message a stream ended by a graceful stop closes with. */
export const STOPPING_MESSAGE = "The gateway is shutting down and ended this stream before the answer was complete; send the request again."

/** A stream's end at a graceful stop: `Busy`, as a call stopped before its stream began is answered. */
export const STOPPING: StreamError = { message: STOPPING_MESSAGE, code: "Busy" }

/** The message of a call a graceful stop ended before its upstream answered (a 503 with Retry-After). */
export const STOPPED_CALL_MESSAGE = "The gateway is shutting down and ended this call before its upstream answered; send the request again."

/** A node:http server whose `close` ends the connections still open after `graceMs`. */
export class BoundedServer extends Server {
  constructor(readonly graceMs: number, private readonly beforeCut: () => void = () => undefined, private readonly atClose: () => void = () => undefined) {
    // A header sent twice reaches the gateway as both values joined (node keeps the first otherwise): two
    // Host lines are then an invalid Host (RFC 9112 §3.2: 400), two credentials no credential.
    // An HTTP/1.1 request without Host is the gateway's to refuse (in its envelope), not node's (empty body).
    super({ joinDuplicateHeaders: true, requireHostHeader: false })
    // node keeps 2,000 header lines and drops the rest unseen: padding pushed a proxy's X-Forwarded-For (or
    // any credential) out. Every line is kept; the header section's size limit (431) bounds them.
    this.maxHeadersCount = 0
  }

  #closing = false

  override emit(event: string, ...args: Array<any>): boolean {
    // A request past its connection's pipelining bound is not handled (Pipelining.ts).
    if (event === "request" && !admitted(args[0], args[1])) return true
    return super.emit(event, ...args)
  }

  override close(callback?: (error?: Error) => void): this {
    // A second call waits for the same close: the deadline is the first call's.
    if (this.#closing) return super.close(callback)
    this.#closing = true
    this.atClose()
    const notice = setTimeout(this.beforeCut, stopBefore(this.graceMs))
    const deadline = setTimeout(() => this.closeAllConnections(), this.graceMs)
    notice.unref()
    deadline.unref()
    return super.close((error) => {
      clearTimeout(notice)
      clearTimeout(deadline)
      callback?.(error)
    })
  }
}

/** The server factory of a host: each server's `beforeCut` ends the engine's calls (STOPPING, STOPPED_CALL_MESSAGE); the parser's refusals are answered in envelopes. */
export const serverOf = (graceMs: number) =>
  Effect.map(ProviderCalls, (calls) => () =>
    answerUnreadableRequests(new BoundedServer(graceMs, () => calls.stopCalls(STOPPING, STOPPED_CALL_MESSAGE), Tokens.warmUp)))
