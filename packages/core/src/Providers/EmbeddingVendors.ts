/**
 * The embedding and rerank vendors that are bespoke providers: Jina and Mixedbread speak the OpenAI
 * embeddings wire format (https://jina.ai/embeddings, https://www.mixedbread.com/api-reference/endpoints/embeddings),
 * Nomic has its own (`/embedding/text`); their rerank APIs are in Rerank.ts.
 */
import { nomicEmbeddings, openAiEmbeddings } from "./Embeddings.ts"
import { pageFetcherReason } from "./PageExtractors.ts"
import { jinaRerank, mixedbreadRerank } from "./Rerank.ts"
import type { Served } from "./Served.ts"

export const jina: Served = {
  embeddings: openAiEmbeddings,
  rerank: jinaRerank,
  // Jina's Reader (r.jina.ai) fetches a web page by URL, like the page extractors (PageExtractors.ts).
  notServed: { extract: pageFetcherReason("Jina AI", "the Reader, r.jina.ai/{url}") }
}

export const mixedbread: Served = { embeddings: openAiEmbeddings, rerank: mixedbreadRerank }

export const nomic: Served = { embeddings: nomicEmbeddings }
