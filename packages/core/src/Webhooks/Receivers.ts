/**
 * Receivers that stopped answering, per process. A receiver (the host and port of a callback URL)
 * whose last two attempts got no answer at all (no response within the delivery timeout, no
 * connection) in the last 10 minutes is stalled: one of its deliveries is sent at a time, as a
 * probe, and its other due deliveries are put back unsent, with their backoff, at once. So callback
 * URLs that never answer hold one delivery slot each, never all of a process's, and the other
 * receivers' deliveries go out on time. Any HTTP answer (a 500 included) clears the receiver.
 */

/** Attempts without an answer, in a row, that make a receiver stalled. */
const STALLED_AFTER = 2
/** How long a receiver's silence is remembered. */
const REMEMBERED_MS = 10 * 60 * 1000
/** The receivers remembered at most (the oldest forgotten first). */
const MAX_REMEMBERED = 10_000

interface Silence {
  failures: number
  at: number
  probing: boolean
}

export interface Receivers {
  /**
   * What to do with a delivery to `url` now: `send` it, or `defer` it (its receiver is stalled and
   * already being probed). A `send` must be followed by `answered` or `unanswered` once it ends.
   */
  readonly admit: (url: string, now: number) => "send" | "defer"
  /** The attempt got an HTTP answer, whatever its status. */
  readonly answered: (url: string) => void
  /** The attempt got no answer (a timeout, a connection that failed). */
  readonly unanswered: (url: string, now: number) => void
  /** Ends an attempt that neither answered nor failed for its receiver's sake (refused before sending). */
  readonly released: (url: string) => void
}

/** The receiver of a URL: its origin (scheme, host and port), or the URL itself when it cannot be read. */
const receiverOf = (url: string) => {
  try {
    return new URL(url).origin
  } catch {
    return url
  }
}

export const makeReceivers = (): Receivers => {
  const silent = new Map<string, Silence>()
  const stalled = (s: Silence | undefined, now: number): s is Silence => s !== undefined && s.failures >= STALLED_AFTER && now - s.at < REMEMBERED_MS
  return {
    admit: (url, now) => {
      const s = silent.get(receiverOf(url))
      if (!stalled(s, now)) return "send"
      if (s.probing) return "defer"
      s.probing = true
      return "send"
    },
    answered: (url) => void silent.delete(receiverOf(url)),
    unanswered: (url, now) => {
      const key = receiverOf(url)
      const s = silent.get(key)
      // Re-inserted, so the map's order is the order of silence and the oldest goes first.
      silent.delete(key)
      silent.set(key, { failures: (s !== undefined && now - s.at < REMEMBERED_MS ? s.failures : 0) + 1, at: now, probing: false })
      if (silent.size > MAX_REMEMBERED) silent.delete(silent.keys().next().value!)
    },
    released: (url) => {
      const s = silent.get(receiverOf(url))
      if (s !== undefined) s.probing = false
    }
  }
}
