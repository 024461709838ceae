/** Cost = tokens x catalogue price (USD per 1000 tokens), rounded to 1e-10 USD to drop float noise. */
import type { ModelEntry } from "./Catalog/Catalog.ts"

export const round = (usd: number): number => Math.round(usd * 1e10) / 1e10

/** Prompt tokens the upstream read from or wrote to its prompt cache (not part of the prompt count: Providers/Chat.ts TokenUsage). */
export interface CacheTokens {
  readonly cacheCreationTokens?: number | undefined
  readonly cacheReadTokens?: number | undefined
  /** Of the writes, those kept for an hour (Anthropic's `ttl: "1h"`). */
  readonly cacheCreation1hTokens?: number | undefined
}

/** What a cache write costs where the model's entry gives no price: Anthropic's (and Bedrock's) 5-minute cache write. */
const CACHE_WRITE_SHARE = 1.25
/** What a one-hour cache write costs: twice the input price (Anthropic's pricing, for every model). */
const HOUR_CACHE_WRITE_SHARE = 2

/**
 * The cost of a call; 0 for a model without a known price (see `costKnown`). Cache reads cost the
 * entry's `cacheReadPer1kUSD`, else the input price: the discount differs by model (a half to a
 * tenth), so none is assumed where the catalogue does not know it. Cache writes cost
 * `cacheWritePer1kUSD`, else 1.25 × the input price; those kept for an hour twice the input price.
 */
export const costOf = (
  model: Pick<ModelEntry, "inputPer1kUSD" | "outputPer1kUSD" | "cacheReadPer1kUSD" | "cacheWritePer1kUSD" | "unpriced">,
  promptTokens: number,
  completionTokens: number,
  cache?: CacheTokens
): number => {
  if (model.unpriced) return 0
  const read = cache?.cacheReadTokens ?? 0
  const written = cache?.cacheCreationTokens ?? 0
  const hour = Math.min(cache?.cacheCreation1hTokens ?? 0, written)
  const cached = read === 0 && written === 0
    ? 0
    : read * (model.cacheReadPer1kUSD ?? model.inputPer1kUSD) + (written - hour) * (model.cacheWritePer1kUSD ?? model.inputPer1kUSD * CACHE_WRITE_SHARE) +
      hour * model.inputPer1kUSD * HOUR_CACHE_WRITE_SHARE
  return round((promptTokens / 1000) * model.inputPer1kUSD + (completionTokens / 1000) * model.outputPer1kUSD + cached / 1000)
}

/** Whether a call's cost is known: false for models named outside the catalogue without a configured price. */
export const costKnown = (model: Pick<ModelEntry, "unpriced">): boolean => model.unpriced !== true

export const pricingNote = (model: ModelEntry, providerName: string) =>
  model.kind === "rerank"
    // Rerank prices are per 1K of what the vendor bills by (Providers/Rerank.ts `billing`).
    ? `List price of ${providerName} ${model.id}: $${model.inputPer1kUSD} per 1K billed units: tokens, or searches for a provider that bills per search such as Cohere (a query with up to 100 documents) (public pricing, ${model.pricingSource}). Estimate only, reading promptTokens as those units: the recorded cost of a real rerank uses what the provider reports.`
    : `List price of ${providerName} ${model.id}: $${model.inputPer1kUSD} per 1K input tokens and $${model.outputPer1kUSD} per 1K output tokens (public pricing, ${model.pricingSource}). Estimate only: the recorded cost of a real call uses the token counts the provider reports.`
