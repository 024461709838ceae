/** Cost = tokens x catalogue price (USD per 1000 tokens), rounded to 1e-10 USD to drop float noise. */
import type { ModelEntry } from "./Catalog/Catalog.ts"

export const round = (usd: number): number => Math.round(usd * 1e10) / 1e10

export const costOf = (model: Pick<ModelEntry, "inputPer1kUSD" | "outputPer1kUSD">, promptTokens: number, completionTokens: number): number =>
  round((promptTokens / 1000) * model.inputPer1kUSD + (completionTokens / 1000) * model.outputPer1kUSD)

export const pricingNote = (model: ModelEntry, providerName: string) =>
  `List price of ${providerName} ${model.id}: $${model.inputPer1kUSD} per 1K input tokens and $${model.outputPer1kUSD} per 1K output tokens (public pricing, ${model.pricingSource}). Estimate only: the recorded cost of a real call uses the token counts the provider reports.`
