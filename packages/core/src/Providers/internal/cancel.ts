/**
 * Cancellation of upstream calls: what an AbortController does for them, without an EventTarget.
 * Node's AbortSignal costs microseconds to create and to listen to, and every metered call made
 * two of them (the caller's, and its deadline's) with three listeners (docs/performance.md); a
 * Cancel is a flag and a short list of hooks. An API that needs a real AbortSignal (fetch, a
 * provider's authorizer) gets one that follows the Cancel, made when it first asks (`signal()`).
 */

const noop = () => {}

export class Cancel {
  #aborted = false
  #reason: unknown = undefined
  #hooks: Array<(reason: unknown) => void> | undefined
  #controller: AbortController | undefined

  get aborted(): boolean {
    return this.#aborted
  }

  /** Why it was aborted (as AbortSignal's `reason`): the value given to `abort`, or an AbortError. */
  get reason(): unknown {
    return this.#reason
  }

  /**
   * Aborts, once: the hooks registered so far run in their order (every one, also when one throws:
   * its error is rethrown on its own tick, as EventTarget reports a listener's), and `signal()`'s
   * signal aborts.
   */
  abort(reason: unknown = new DOMException("This operation was aborted", "AbortError")): void {
    if (this.#aborted) return
    this.#aborted = true
    this.#reason = reason
    const hooks = this.#hooks
    this.#hooks = undefined
    this.#controller?.abort(reason)
    if (hooks === undefined) return
    for (const hook of hooks) {
      try {
        hook(reason)
      } catch (error) {
        process.nextTick(() => {
          throw error
        })
      }
    }
  }

  /** Calls `hook` with the reason when aborted (at once when it already is); returns what removes it. */
  onAbort(hook: (reason: unknown) => void): () => void {
    if (this.#aborted) {
      hook(this.#reason)
      return noop
    }
    const hooks = (this.#hooks ??= [])
    hooks.push(hook)
    return () => {
      // Once aborted the list is being run (or was): a hook that removes itself must not shift it.
      if (this.#aborted) return
      const i = hooks.indexOf(hook)
      if (i !== -1) hooks.splice(i, 1)
    }
  }

  /** An AbortSignal that aborts with this (made on first use, for APIs that take one). */
  signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController()
      if (this.#aborted) this.#controller.abort(this.#reason)
    }
    return this.#controller.signal
  }

  /**
   * A Cancel that aborts when `signal` does (for callers that hold an AbortSignal), and what stops
   * it following (the listener would otherwise stay on a long-lived signal).
   */
  static following(signal: AbortSignal): { readonly cancel: Cancel; readonly release: () => void } {
    const cancel = new Cancel()
    if (signal.aborted) {
      cancel.abort(signal.reason)
      return { cancel, release: noop }
    }
    const forward = () => cancel.abort(signal.reason)
    signal.addEventListener("abort", forward, { once: true })
    return { cancel, release: () => signal.removeEventListener("abort", forward) }
  }
}
