// The model a provider-named call uses when it names no model and the catalogue lists none for the provider:
// the upstream's own id for a current, generally available model of that kind, from the provider's documentation.
// Plain data, validated at load (Catalog.ts). Compiled 2026-11.
// `source` is the page the id was read from; where chat and embeddings come from different pages, the second is
// named in a comment. Left out on purpose: azure-openai (deployment names are the user's), vllm, lmstudio and
// llamacpp (they serve whatever is loaded), meta (Meta shut the Llama API preview down in July 2026), morph (only
// code-apply models), and providers whose own documentation names no current model id (see the task report).
export const defaultModelData: Record<string, { readonly chat?: string; readonly embeddings?: string; readonly source: string }> = {
  "ai21": { chat: "jamba-mini", source: "https://docs.ai21.com/reference/jamba-1-6-api-ref" },
  "moonshot": { chat: "kimi-k2.6", source: "https://platform.kimi.ai/docs/api/quickstart" },
  "zai": { chat: "glm-4.5-air", source: "https://docs.z.ai/api-reference/llm/chat-completion" },
  "alibaba": {
    chat: "qwen-plus",
    // embeddings: https://alibabacloud.com/help/en/model-studio/embedding-interfaces-compatible-with-openai
    embeddings: "text-embedding-v4",
    source: "https://alibabacloud.com/help/en/model-studio/compatibility-of-openai-with-dashscope"
  },
  "minimax": { chat: "MiniMax-M2.7", source: "https://platform.minimaxi.com/docs/api-reference/text-openai-api" },
  "stepfun": { chat: "step-3.5-flash", source: "https://platform.stepfun.ai/docs/en/guides/developer/reasoning" },
  "perplexity": { chat: "sonar", source: "https://docs.perplexity.ai/getting-started/models/models/sonar" },
  "writer": { chat: "palmyra-x5", source: "https://dev.writer.com/api-reference/completion-api/chat-completion" },
  "reka": { chat: "reka-flash-3", source: "https://docs.litellm.ai/docs/providers/reka" },
  "upstage": {
    chat: "solar-pro3",
    // embeddings: https://developers.upstage.ai/docs/apis/embeddings
    embeddings: "solar-embedding-1-large-query",
    source: "https://console.upstage.ai/api-keys?api=chat-reasoning"
  },
  "inception": { chat: "mercury-2", source: "https://docs.litellm.ai/docs/providers/inception" },
  "together-ai": {
    embeddings: "intfloat/multilingual-e5-large-instruct",
    source: "https://docs.agno.com/reference/knowledge/embedder/together"
  },
  "fireworks": {
    embeddings: "nomic-ai/nomic-embed-text-v1.5",
    source: "https://docs.fireworks.ai/api-reference/creates-an-embedding-vector-representing-the-input-text"
  },
  "deepinfra": {
    chat: "meta-llama/Meta-Llama-3.1-8B-Instruct",
    // embeddings: https://deepinfra.ai/intfloat/multilingual-e5-large-instruct/api
    embeddings: "intfloat/multilingual-e5-large-instruct",
    source: "https://deepinfra.com/meta-llama/Meta-Llama-3.1-8B-Instruct/api"
  },
  "cerebras": {
    chat: "gpt-oss-120b",
    source: "https://raw.githubusercontent.com/juspay/neurolink/master/docs/getting-started/providers/cerebras.md"
  },
  "sambanova": {
    chat: "Meta-Llama-3.3-70B-Instruct",
    // embeddings: https://docs.sambanova.ai/cloud/api-reference/endpoints/embeddings-api
    embeddings: "E5-Mistral-7B-Instruct",
    source: "https://community.sambanova.ai/t/standardized-api-calling-templates-for-sambacloud-models/1278"
  },
  "nebius": {
    chat: "meta-llama/Llama-3.3-70B-Instruct",
    // embeddings: https://docs.tokenfactory.nebius.com/api-reference/inference/create-embeddings
    embeddings: "BAAI/bge-en-icl",
    source: "https://docs.studio.nebius.com/api-reference/inference/create-chat-completion"
  },
  "hyperbolic": { chat: "meta-llama/Llama-3.3-70B-Instruct", source: "https://docs.hyperbolic.ai/inference/text-apis" },
  "novita": {
    chat: "meta-llama/llama-3.1-8b-instruct",
    // embeddings: https://novita.ai/docs/api-reference/model-apis-llm-create-embeddings
    embeddings: "baai/bge-m3",
    source: "https://novita.ai/docs/guides/llm-api"
  },
  "siliconflow": {
    chat: "Qwen/Qwen3-8B",
    // embeddings: https://docs.siliconflow.com/en/api-reference/embeddings/create-embeddings
    embeddings: "BAAI/bge-m3",
    source: "https://docs.siliconflow.cn/cn/api-reference/chat-completions/chat-completions"
  },
  "friendli": { chat: "meta-llama-3.1-8b-instruct", source: "https://friendli.ai/docs/openapi/create-chat-completions" },
  "baseten": { chat: "openai/gpt-oss-120b", source: "https://docs.baseten.co/development/model-apis/overview" },
  "nscale": { chat: "meta-llama/Llama-3.1-8B-Instruct", source: "https://docs.nscale.com/docs/inference/chat" },
  "netmind": {
    chat: "meta-llama/Meta-Llama-3.1-8B-Instruct",
    source: "https://netmind-power.gitbook.io/netmind-power-documentation/api/inference/chat"
  },
  "gmi-cloud": { chat: "deepseek-ai/DeepSeek-R1", source: "https://docs.gmicloud.ai/inference-engine/api-reference" },
  "wandb": { chat: "meta-llama/Llama-3.1-8B-Instruct", source: "https://docs.wandb.ai/guides/inference/api-reference" },
  "venice": {
    chat: "venice-uncensored",
    // embeddings: https://docs.venice.ai/api-reference/endpoint/embeddings/generate
    embeddings: "text-embedding-bge-m3",
    source: "https://docs.venice.ai/overview/about-venice"
  },
  "nvidia": {
    chat: "meta/llama-3.1-8b-instruct",
    source: "https://docs.nvidia.com/nemo/microservices/25.6.0/run-inference/nim-proxy/chat-completions.html"
  },
  "huggingface": { chat: "openai/gpt-oss-120b", source: "https://huggingface.co/docs/inference-providers/tasks/chat-completion" },
  "github-models": {
    chat: "openai/gpt-4.1",
    // embeddings: https://docs.github.com/en/rest/models/embeddings
    embeddings: "openai/text-embedding-3-small",
    source: "https://docs.github.com/en/rest/models/inference"
  },
  "openrouter": { chat: "openrouter/auto", source: "https://openrouter.ai/docs/guides/routing/routers/auto-router" },
  "vercel": {
    chat: "zai/glm-4.5-air",
    // embeddings: https://vercel.com/docs/ai-gateway/openai-compat/embeddings
    embeddings: "openai/text-embedding-3-small",
    source: "https://vercel.com/ai-gateway/models/glm-4.5-air"
  },
  "bedrock": {
    chat: "amazon.nova-lite-v1:0",
    // embeddings: https://docs.aws.amazon.com/bedrock/latest/userguide/titan-embedding-models.html
    embeddings: "amazon.titan-embed-text-v2:0",
    source: "https://docs.aws.amazon.com/bedrock/latest/userguide/bedrock-runtime_example_bedrock-runtime_Converse_AmazonNovaText_section.html"
  },
  "vertex": {
    chat: "gemini-2.5-flash-lite",
    // embeddings: https://cloud.google.com/vertex-ai/generative-ai/docs/embeddings/get-text-embeddings
    embeddings: "gemini-embedding-001",
    source: "https://cloud.google.com/vertex-ai/generative-ai/docs/models/gemini/2-5-flash-lite"
  },
  "watsonx": {
    chat: "ibm/granite-3-3-8b-instruct",
    // embeddings: https://www.ibm.com/architectures/papers/rag-cookbook/embedding
    embeddings: "ibm/slate-30m-english-rtrvr",
    source: "https://www.ibm.com/docs/en/watsonxdata/premium/2.4.x?topic=models-choosing-model"
  },
  "databricks": {
    chat: "databricks-meta-llama-3-3-70b-instruct",
    embeddings: "databricks-gte-large-en",
    source: "https://docs.databricks.com/en/machine-learning/foundation-models/supported-models.html"
  },
  "cloudflare": {
    chat: "@cf/meta/llama-3.1-8b-instruct",
    embeddings: "@cf/baai/bge-large-en-v1.5",
    source: "https://developers.cloudflare.com/workers-ai/configuration/open-ai-compatibility"
  },
  "scaleway": {
    chat: "llama-3.3-70b-instruct",
    // embeddings: https://www.scaleway.com/en/docs/generative-apis/api-cli/using-embeddings-api/
    embeddings: "bge-multilingual-gemma2",
    source: "https://www.scaleway.com/en/developers/api/generative-apis/"
  },
  "ovhcloud": {
    chat: "Meta-Llama-3_3-70B-Instruct",
    // embeddings: https://www.ovhcloud.com/en-in/public-cloud/ai-endpoints/catalog/bge-multilingual-gemma2
    embeddings: "bge-multilingual-gemma2",
    source: "https://ovh.github.io/apache-airflow-provider-ovhcloud-ai/ai-endpoints"
  },
  "digitalocean": {
    chat: "llama3.3-70b-instruct",
    source: "https://docs.langchain.com/oss/python/integrations/providers/gradientai"
  },
  "jina": { embeddings: "jina-embeddings-v3", source: "https://github.com/jina-ai/meta-prompt/blob/main/v0.txt" },
  "mixedbread": {
    embeddings: "mixedbread-ai/mxbai-embed-large-v1",
    source: "https://www.mixedbread.com/api-reference/endpoints/embeddings/create-embeddings"
  },
  "nomic": { embeddings: "nomic-embed-text-v1.5", source: "https://docs.nomic.ai/reference/endpoints/nomic-embed-text" },
  "pinecone": {
    embeddings: "multilingual-e5-large",
    source: "https://docs.pinecone.io/reference/api/2025-04/inference/generate-embeddings"
  },
  "replicate": { chat: "meta/meta-llama-3.1-405b-instruct", source: "https://replicate.com/meta/meta-llama-3.1-405b-instruct" },
  "ollama": {
    chat: "llama3.2",
    // embeddings: https://ollama.com/blog/embedding-models
    embeddings: "nomic-embed-text",
    source: "https://ollama.com/library/llama3.2"
  }
}
