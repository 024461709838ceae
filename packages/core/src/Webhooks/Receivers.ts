/**
 * Receivers that stopped answering, per process. A receiver is a caller's callback origin (the
 * avatar that owns the job, and the scheme, host and port of its callback URL): one caller's silent
 * receiver must not hold up another caller's deliveries to the same host (a webhook service with a
 * path per customer), and one caller cannot multiply its receivers by varying a path. A receiver
 * whose last two attempts got no answer at all (no response within the delivery timeout, no
 * connection) in the last 10 minutes is stalled: while any attempt to it is under way (a probe, or
 * those begun before it stalled), its other due deliveries are put back unsent (Delivery.ts). So a
 * receiver that never answers holds one delivery slot once its first attempts have ended, never all of
 * a process's, and the other receivers' deliveries go out on time. Any HTTP answer (a 500 included)
 * clears the receiver.
 */

/** Attempts without an answer, in a row, that make a receiver stalled. */
const STALLED_AFTER = 2
/** How long a receiver's silence is remembered. */
const REMEMBERED_MS = 10 * 60 * 1000
/** Attempts to one receiver under way at once: a process has 8 delivery slots, and one receiver takes at most half. */
export const MAX_SENDING_TO_ONE = 4
/** The receivers remembered at most (the oldest forgotten first). */
const MAX_REMEMBERED = 10_000

interface Receiver {
  /** Attempts in a row that got no answer, and when the last of them ended. */
  failures: number
  at: number
  /** Attempts under way. */
  sending: number
}

export interface Receivers {
  /**
   * What to do with a delivery to `url` now: `send` it, or put it back because its receiver is `busy`
   * (4 attempts to it under way) or `stalled` (an attempt to it under way). A `send` must be followed by
   * `ended`.
   */
  readonly admit: (owner: string, url: string, now: number) => "send" | "busy" | "stalled"
  /**
   * An attempt to `url` ended: `answered` (an HTTP answer, whatever its status), `unanswered` (a timeout,
   * a connection that failed) or `released` (refused before sending: nothing learnt of the receiver).
   */
  readonly ended: (owner: string, url: string, how: "answered" | "unanswered" | "released", now: number) => void
}

/** The receiver of `owner`'s callback `url`: the owner and the URL's origin (the URL itself when it cannot be read). */
const receiverOf = (owner: string, url: string) => {
  let origin = url
  try {
    origin = new URL(url).origin
  } catch {
    // Kept whole: a URL that cannot be read is its own receiver.
  }
  return `${owner} ${origin}`
}

export const makeReceivers = (): Receivers => {
  const receivers = new Map<string, Receiver>()
  const stalled = (r: Receiver, now: number) => r.failures >= STALLED_AFTER && now - r.at < REMEMBERED_MS
  /** The receiver's record, made when first sent to; the oldest forgotten past the bound (the map keeps insertion order). */
  const recordOf = (key: string) => {
    let r = receivers.get(key)
    if (r === undefined) {
      receivers.set(key, (r = { failures: 0, at: 0, sending: 0 }))
      if (receivers.size > MAX_REMEMBERED) {
        for (const [k, old] of receivers) {
          if (old.sending === 0) {
            receivers.delete(k)
            break
          }
        }
      }
    }
    return r
  }
  return {
    admit: (owner, url, now) => {
      const key = receiverOf(owner, url)
      const r = recordOf(key)
      // Stalled, and an attempt to it is under way (the probe, or ones begun before it stalled): this one waits.
      if (stalled(r, now) && r.sending > 0) return "stalled"
      if (r.sending >= MAX_SENDING_TO_ONE) return "busy"
      r.sending++
      return "send"
    },
    ended: (owner, url, how, now) => {
      const key = receiverOf(owner, url)
      const r = receivers.get(key)
      if (r === undefined) return
      if (how === "answered") r.failures = 0
      if (how === "unanswered") {
        r.failures = (now - r.at < REMEMBERED_MS ? r.failures : 0) + 1
        r.at = now
      }
      // The record goes when nothing is under way and no silence is remembered.
      r.sending = Math.max(0, r.sending - 1)
      if (r.sending === 0 && r.failures === 0) receivers.delete(key)
    }
  }
}
