/**
 * A value made once by an asynchronous step (a lazy import, a model load): the first caller starts
 * it, later callers share it, and a failed attempt is forgotten so that the next caller tries again.
 */
export interface Once<A> {
  /** The value, made on the first call. */
  readonly get: () => Promise<A>
  /** The value if it was made already, for callers that must not wait. */
  readonly current: () => A | undefined
}

export const once = <A>(make: () => Promise<A>): Once<A> => {
  let pending: Promise<A> | undefined
  let made: A | undefined
  return {
    get: () =>
      (pending ??= make().then(
        (value) => (made = value),
        (error) => {
          pending = undefined
          throw error
        }
      )),
    current: () => made
  }
}
