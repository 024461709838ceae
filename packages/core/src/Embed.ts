/**
 * Embedding: the whole HTTP API (gateway + avatar API) as a web-standard handler,
 * `(Request) => Promise<Response>`, built once from a layer. Serve it from any Node server,
 * framework route or serverless runtime. It is the application the hosts serve (`App.makeApp`):
 * request ids, request metrics and `/metrics`, the access log and the Host check included.
 *
 * `run` runs an effect against the same service instances the handler uses (the layer is built
 * once, shared through one memo map), e.g. `await gateway.run(Mailer.MemoryMailbox)` to read the
 * mails sent with `Mailer.layerMemory`. `dispose` releases them (database pools, workers).
 */
import * as HttpApp from "@effect/platform/HttpApp"
import { Effect, Layer, ManagedRuntime } from "effect"
import { makeApp } from "./Http/App.ts"
import type { CoreServices } from "./Layers.ts"

export interface WebHandler<R> {
  /** The whole API: gateway, avatar API, OpenAI-compatible surface (and /mcp with Mcp.layerHttp). */
  readonly handler: (request: Request) => Promise<Response>
  /** Runs an effect with the handler's services (the layer's output, built once). */
  readonly run: <A, E>(effect: Effect.Effect<A, E, R>) => Promise<A>
  /** Releases the services; the handler must not be called afterwards. */
  readonly dispose: () => Promise<void>
}

/** `layer` provides at least the core services; whatever else it provides (`R`) is reachable through `run`. */
export const makeWebHandler = <R = never, E = never>(layer: Layer.Layer<CoreServices | R, E>): WebHandler<CoreServices | R> => {
  const memoMap = Effect.runSync(Layer.makeMemoMap)
  const services = ManagedRuntime.make(layer, memoMap)
  const core: Layer.Layer<CoreServices, E> = layer
  const web = HttpApp.toWebHandlerLayerWith(core, {
    memoMap,
    toHandler: (runtime) => Effect.provide(makeApp, runtime)
  })
  return {
    handler: (request) => web.handler(request),
    run: (effect) => services.runPromise(effect),
    dispose: async () => {
      await web.dispose()
      await services.dispose()
    }
  }
}
