/** Voyage AI (a bespoke provider): its embeddings API has the OpenAI embeddings wire format; its rerank API is in Rerank.ts. */
import { openAiEmbeddings } from "./Embeddings.ts"
import { voyageRerank } from "./Rerank.ts"
import type { Served } from "./Served.ts"

export const served: Served = { embeddings: openAiEmbeddings, rerank: voyageRerank }
