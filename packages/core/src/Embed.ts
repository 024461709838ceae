/**
 * Embedding: the whole HTTP API (gateway + avatar API) as a web-standard handler,
 * `(Request) => Promise<Response>`, built once from a layer. Serve it from any Node server,
 * framework route or serverless runtime.
 */
import * as HttpApp from "@effect/platform/HttpApp"
import { Effect, type Layer } from "effect"
import { makeRouter } from "./Http/App.ts"
import type { CoreServices } from "./Layers.ts"

export const makeWebHandler = <E>(layer: Layer.Layer<CoreServices, E>) =>
  HttpApp.toWebHandlerLayerWith(layer, {
    toHandler: (runtime) => Effect.provide(makeRouter(), runtime)
  })
