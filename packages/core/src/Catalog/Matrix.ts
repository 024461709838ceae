/**
 * The provider × endpoint-type matrix of docs/providers.md, generated from the catalogue and the
 * registry so the page says what the code serves (test/Catalog/Matrix.test.ts keeps it current).
 */
import { notServed } from "../Providers/Registry.ts"
import { data, type EndpointType } from "./Catalog.ts"

/** The endpoint types with a column: those some provider offers. */
const columns = (): ReadonlyArray<EndpointType> => {
  const offered = new Set(data.providers.flatMap((p) => p.offers))
  return [
    "chat", "embeddings", "rerank", "images", "video", "speech", "transcription", "moderation", "batch", "finetune",
    "classify", "translate", "extract", "documents", "code", "memory", "graphrag", "guardrails", "prompts"
  ].filter((t): t is EndpointType => offered.has(t as EndpointType))
}

/** Counts per endpoint type: providers that offer it, and those aigw serves it through. */
export const servedCounts = () =>
  columns().map((type) => ({
    type,
    offered: data.providers.filter((p) => p.offers.includes(type)).length,
    served: data.providers.filter((p) => p.capabilities.includes(type)).length
  }))

/** The matrix as Markdown: ✓ served, ✗ offered by the upstream but not served (reason in GET /v1/providers), blank: not offered. */
export const providerMatrix = (): string => {
  const types = columns()
  const header = `| provider | family | ${types.join(" | ")} |`
  const rule = `| --- | --- | ${types.map(() => ":-:").join(" | ")} |`
  const rows = data.providers.map((p) => {
    const missing = new Set(notServed(p).map((n) => n.type))
    const cells = types.map((t) => (p.capabilities.includes(t) ? "✓" : missing.has(t) ? "✗" : ""))
    return `| ${p.id} | ${p.adapter} | ${cells.join(" | ")} |`
  })
  const counts = servedCounts()
  const total = `| **served / offered** | | ${counts.map((c) => `${c.served}/${c.offered}`).join(" | ")} |`
  return [header, rule, ...rows, total].join("\n")
}
