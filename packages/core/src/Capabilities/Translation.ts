/**
 * POST /v1/translate: on a routed chat model (LlmTasks.ts, the default and `auto`), or through a
 * named translation vendor (DeepL: Providers/Translation/), which translates on its side. A vendor
 * picks its own model: a request naming one is refused.
 */
import { Effect, Option } from "effect"
import { Catalog } from "../Catalog/Catalog.ts"
import { Unprocessable } from "../Errors.ts"
import type { Plan } from "../Plans.ts"
import { servedBy } from "../Providers/Registry.ts"
import { Routing } from "../Routing.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { LlmTasks } from "./LlmTasks.ts"
import { vendorCall } from "./VendorCall.ts"

export interface TranslateInput {
  readonly text: string
  readonly targetLanguage: string
  readonly sourceLanguage?: string | undefined
  readonly provider: string
  readonly model?: string | undefined
}

/** Whether `provider` is a translation vendor (the route calls it), not a chat provider or `auto` (LlmTasks). */
export const namesVendor = (catalog: Catalog["Type"], provider: string) => {
  const named = catalog.provider(provider)
  return Option.isSome(named) && servedBy(named.value).translate !== undefined
}

/** The translation vendor a request names, or none (a chat provider, or `auto`: LlmTasks). */
const vendorOf = (avatar: AvatarRecord, input: TranslateInput) =>
  Effect.flatMap(Catalog, (catalog) => {
    if (!namesVendor(catalog, input.provider)) return Effect.succeed(Option.none())
    if (input.model !== undefined) {
      return Effect.fail(new Unprocessable({ message: `Provider ${input.provider} translates with its own model; model ${input.model} cannot be chosen there.` }))
    }
    return Effect.map(Effect.flatMap(Routing, (r) => r.providerFor("translate", input.provider, avatar.plan as Plan)), Option.some)
  })

/** The refusals that depend only on the request and configuration (answered before admission). */
export const check = (avatar: AvatarRecord, input: TranslateInput) =>
  Effect.gen(function*() {
    const vendor = yield* vendorOf(avatar, input)
    if (Option.isNone(vendor)) yield* Effect.flatMap(LlmTasks, (t) => t.check.translate(avatar, input))
  })

export const translate = (avatar: AvatarRecord, input: TranslateInput) =>
  Effect.gen(function*() {
    const found = yield* vendorOf(avatar, input)
    if (Option.isNone(found)) return yield* Effect.flatMap(LlmTasks, (t) => t.translate(avatar, input))
    const vendor = found.value
    const t = yield* vendorCall(avatar.id, vendor, "translate", servedBy(vendor).translate!.translate(vendor, input))
    return {
      translation: t.translation,
      sourceLanguage: input.sourceLanguage ?? t.detectedSourceLanguage,
      targetLanguage: input.targetLanguage,
      provider: vendor.id,
      model: vendor.id,
      usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0, estimated: false },
      costUSD: 0
    }
  })
