/**
 * HTTP/1.1 pipelining, bounded. node parses every request a connection has sent and emits them all
 * at once, however many: one connection that wrote thousands of requests without reading an answer
 * had them all handled ahead of every other client (seconds of the event loop) and their answers
 * held in memory. A connection may have `MAX_PIPELINED` requests in flight; one that sends more is
 * closed, and the requests it sent past the bound are dropped unhandled. Clients that pipeline do so a
 * few requests deep; browsers do not at all.
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import type { Socket } from "node:net"

/** Requests one connection may have in flight (received, not yet answered). */
export const MAX_PIPELINED = 32

const inFlight = new WeakMap<Socket, number>()
/** The pipelined answers of a connection still waiting for those before them (see `admitted`). */
const queuedOf = new WeakMap<Socket, Set<ServerResponse>>()
/** Marks a request the first hook admitted (a property, not a WeakSet: a weak entry per request made each young-generation collection dearer). */
const ADMITTED = Symbol("aigw.admitted")

/**
 * A pipelined request waits for the answers before it: its response has no socket yet and hears
 * nothing when the client leaves (node destroys the request, but the response emits no `close`), so
 * its upstream call went on for nobody and was recorded as a success. When the connection closes
 * first, each waiting response is destroyed and closed, which is how both lanes learn the client
 * left. One listener per connection, not one per waiting request.
 */
const heedLeavingWhileQueued = (socket: Socket, res: ServerResponse) => {
  if (res.socket !== null) return
  const waiting = queuedOf.get(socket) ?? watchedForLeaving(socket)
  waiting.add(res)
  res.once("socket", () => waiting.delete(res))
}

/** The connection's set of waiting answers, with the one listener that closes them when it closes. */
const watchedForLeaving = (socket: Socket): Set<ServerResponse> => {
  const waiting = new Set<ServerResponse>()
  queuedOf.set(socket, waiting)
  socket.once("close", () => {
    for (const r of waiting) {
      if (r.writableFinished || r.socket !== null) continue
      r.destroy()
      r.emit("close")
    }
    waiting.clear()
  })
  return waiting
}

/**
 * Whether the server should handle this request: false for one past the connection's bound (the
 * connection is closed) or on a connection already closed. Watches it for the client leaving while
 * it waits behind earlier answers. Called by the first of the server's `request` hooks to see the
 * request (the fast lane's, else the server's own); later calls answer true.
 */
export const admitted = (req: IncomingMessage, res: ServerResponse): boolean => {
  const marked = req as IncomingMessage & { [ADMITTED]?: true }
  if (marked[ADMITTED] === true) return true
  marked[ADMITTED] = true
  const socket = req.socket
  if (socket.destroyed) return false
  const n = (inFlight.get(socket) ?? 0) + 1
  if (n > MAX_PIPELINED) {
    socket.destroy()
    return false
  }
  inFlight.set(socket, n)
  // `close` comes once for every response: after it finished, when its connection closed first, or (waiting
  // behind others) from heedLeavingWhileQueued.
  res.on("close", () => inFlight.set(socket, (inFlight.get(socket) ?? 1) - 1))
  heedLeavingWhileQueued(socket, res)
  return true
}
