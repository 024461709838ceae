/** Voyage AI (a bespoke provider): its embeddings API has the OpenAI embeddings wire format. */
import { openAiEmbeddings } from "./Embeddings.ts"
import type { Served } from "./Served.ts"

export const served: Served = { embeddings: openAiEmbeddings }
