/** What the three observability vendors share in the registry (Served entries in Langfuse.ts, PromptLayer.ts, Braintrust.ts). */

/** Why their "prompts" endpoint type is not served: aigw exports usage to them instead (Exporters.ts). */
export const PROMPTS_NOT_SERVED =
  "aigw does not serve this vendor's prompt management API; with its credentials set, aigw exports every call's usage to it instead (docs/observability.md, \"Exporting to Langfuse, PromptLayer, Braintrust\")"
