/**
 * A bound on a graceful stop. Closing a node server waits for every request in flight, and a
 * stream whose upstream stalls lasts until its idle timeout; a process manager does not wait that
 * long (Docker and Podman send SIGKILL after 10 s, Kubernetes after 30), and a killed process
 * records nothing of the calls it was serving. So once `close` has waited `graceMs`, the
 * connections still open are closed: their calls end as abandoned ones do (the upstream request
 * aborted, the usage recorded), and the layers are released before the manager's SIGKILL.
 */
import { Server } from "node:http"

/** A node:http server whose `close` ends the connections still open after `graceMs`. */
export class BoundedServer extends Server {
  constructor(readonly graceMs: number) {
    super()
  }

  override close(callback?: (error?: Error) => void): this {
    const deadline = setTimeout(() => this.closeAllConnections(), this.graceMs)
    deadline.unref()
    return super.close((error) => {
      clearTimeout(deadline)
      callback?.(error)
    })
  }
}
