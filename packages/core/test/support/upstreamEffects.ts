/** Running an adapter's Effect in a test: its value, or the UpstreamError it must fail with. */
import { Effect, Either } from "effect"
import type { UpstreamError } from "../../src/Providers/UpstreamError.ts"

export const run = <A>(e: Effect.Effect<A, UpstreamError>) => Effect.runPromise(e)

export const failure = async <A>(e: Effect.Effect<A, UpstreamError>) => {
  const r = await Effect.runPromise(Effect.either(e))
  if (Either.isRight(r)) throw new Error(`expected a failure, got ${JSON.stringify(r.right)}`)
  return r.left
}
