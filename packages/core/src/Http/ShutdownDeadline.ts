/**
 * A bound on a graceful stop. Closing a node server waits for every request in flight, and a
 * stream whose upstream stalls lasts until its idle timeout; a process manager does not wait that
 * long (Docker and Podman send SIGKILL after 10 s, Kubernetes after 30), and a killed process
 * records nothing of the calls it was serving. So once `close` has waited `graceMs`, the
 * connections still open are closed: their calls end as abandoned ones do (the upstream request
 * aborted, the usage recorded), and the layers are released before the manager's SIGKILL.
 */
import type { Server } from "node:http"

/** `server`, whose `close` ends the connections still open after `graceMs`. */
export const withShutdownDeadline = <S extends Server>(server: S, graceMs: number): S => {
  const close = server.close.bind(server)
  server.close = (callback?: (error?: Error) => void) => {
    const deadline = setTimeout(() => server.closeAllConnections(), graceMs)
    deadline.unref()
    return close((error) => {
      clearTimeout(deadline)
      callback?.(error)
    })
  }
  return server
}
