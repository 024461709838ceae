/**
 * Span creation for hosts. Effect opens a span for every `Effect.fn` call and every SQL statement,
 * and @effect/platform's HTTP server one per request (with the URL and every header as attributes).
 * aigw exports none of them: they only matter to an embedder that provides its own Tracer. So the
 * hosts turn span creation off unless `AIGW_TRACING=true`; it costs CPU on every request (see
 * docs/performance.md).
 *
 * With `OTEL_EXPORTER_OTLP_ENDPOINT` set, spans are on and exported over OTLP/HTTP (JSON) to
 * `<endpoint>/v1/traces` by @effect/opentelemetry's OtlpTracer (batched; flushed at shutdown), with
 * `OTEL_SERVICE_NAME` (default `aigw`) as the service name (docs/observability.md).
 */
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as Headers from "@effect/platform/Headers"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import { Config, Duration, Effect, Layer, Option } from "effect"
import { REDACTED_HEADERS } from "./Http/Observability.ts"

/** Spans on: request headers that hold credentials are redacted in every server span (`REDACTED_HEADERS`). */
const layerRedacting: Layer.Layer<never> = Layer.scopedDiscard(Effect.locallyScoped(Headers.currentRedactedNames, REDACTED_HEADERS))

/** No spans: Effect's tracer and the HTTP server's request spans are off for everything built after. */
export const layerOff: Layer.Layer<never> = Layer.mergeAll(
  Layer.setTracerEnabled(false),
  Layer.scopedDiscard(Effect.locallyScoped(HttpMiddleware.currentTracerDisabledWhen, () => true))
)

/** Spans exported over OTLP/HTTP (JSON) to `<endpoint>/v1/traces`. */
export const layerOtlp = (options: { readonly endpoint: string; readonly serviceName: string; readonly serviceVersion?: string }): Layer.Layer<never> =>
  OtlpTracer.layer({
    url: `${options.endpoint.replace(/\/+$/, "")}/v1/traces`,
    resource: { serviceName: options.serviceName, ...(options.serviceVersion ? { serviceVersion: options.serviceVersion } : {}) },
    exportInterval: Duration.seconds(2)
  }).pipe(Layer.provide(FetchHttpClient.layer), Layer.provide(OtlpSerialization.layerJson), Layer.merge(layerRedacting))

/** OTLP export when `OTEL_EXPORTER_OTLP_ENDPOINT` is set; else `layerOff` unless `AIGW_TRACING=true`. */
export const layerFromEnv: Layer.Layer<never> = Layer.unwrapEffect(
  Effect.map(
    Config.all({
      on: Config.boolean("AIGW_TRACING").pipe(Config.withDefault(false)),
      // Checked at start: a value that is no URL used to start and export nothing, saying nothing.
      endpoint: Config.option(Config.nonEmptyString("OTEL_EXPORTER_OTLP_ENDPOINT").pipe(
        Config.validate({ message: "OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL (the collector, e.g. http://127.0.0.1:4318)", validation: (u) => /^https?:\/\/[^\s/]+/i.test(u) })
      )),
      serviceName: Config.string("OTEL_SERVICE_NAME").pipe(Config.withDefault("aigw"))
    }),
    ({ endpoint, on, serviceName }) =>
      Option.isSome(endpoint) ? layerOtlp({ endpoint: endpoint.value, serviceName }) : on ? layerRedacting : layerOff
  )
).pipe(Layer.orDie)
