/**
 * Span creation for hosts. Effect opens a span for every `Effect.fn` call and every SQL statement,
 * and @effect/platform's HTTP server one per request (with the URL and every header as attributes).
 * aigw exports none of them: they only matter to an embedder that provides its own Tracer. So the
 * hosts turn span creation off unless `AIGW_TRACING=true`; it costs CPU on every request (see
 * docs/performance.md).
 */
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import { Config, Effect, Layer } from "effect"

/** No spans: Effect's tracer and the HTTP server's request spans are off for everything built after. */
export const layerOff: Layer.Layer<never> = Layer.mergeAll(
  Layer.setTracerEnabled(false),
  Layer.scopedDiscard(Effect.locallyScoped(HttpMiddleware.currentTracerDisabledWhen, () => true))
)

/** `layerOff` unless `AIGW_TRACING=true`. */
export const layerFromEnv: Layer.Layer<never> = Layer.unwrapEffect(
  Effect.map(Config.boolean("AIGW_TRACING").pipe(Config.withDefault(false)), (on) => (on ? Layer.empty : layerOff))
).pipe(Layer.orDie)
