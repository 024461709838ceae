/** The engine (ProviderCalls) with provider health over a metering that admits every call and knows no key. */
import { Layer } from "effect"
import * as ProviderCalls from "../../src/Engine/ProviderCalls.ts"
import * as ProviderHealth from "../../src/Providers/ProviderHealth.ts"
import { Metering } from "../../src/Storage/Metering.ts"

/** A fresh engine each time it is built (a stopped engine stays stopped); `record` takes the usage the engine writes. */
export const engineLayer = (record: Metering["Type"]["record"] = async () => undefined) =>
  ProviderCalls.layer.pipe(Layer.provideMerge(Layer.merge(
    ProviderHealth.layer,
    Layer.succeed(Metering, {
      avatarOfKey: async () => undefined,
      activeAvatar: async () => undefined,
      admit: async () => 1,
      callsOn: async () => 0,
      record
    })
  )))
