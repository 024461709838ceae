/** Request fields shared by many endpoints and MCP tools. */
import { Schema } from "effect"

/** `provider`: a provider id or `auto` (the default). */
export const Provider = Schema.optionalWith(Schema.String.pipe(Schema.maxLength(100)), { default: () => "auto" })
