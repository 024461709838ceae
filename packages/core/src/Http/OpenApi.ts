/** The OpenAPI 3.1 document and the HTML reference page, both generated from the routes. */
import { JSONSchema, Option, Schema } from "effect"
import type { Route } from "./Route.ts"
import { escapeHtml } from "./Pages.ts"

const toOpenApiPath = (path: string) => path.replace(/:(\w+)/g, "{$1}").replace(/\/\*$/, "/{path}")

type Json = Record<string, unknown>

/** A schema's JSON Schema with its own `$defs` (`#/$defs/X` references), or `{}` when it has none. */
const jsonSchemaOf = (s: Schema.Schema.Any, additionalProperties: "allow" | "strict" = "strict"): Json => {
  try {
    const definitions: Record<string, JSONSchema.JsonSchema7> = {}
    const root = JSONSchema.fromAST(s.ast, { definitions, target: "openApi3.1", additionalPropertiesStrategy: additionalProperties }) as unknown as Json
    return Object.keys(definitions).length > 0 ? { ...root, $defs: definitions } : root
  } catch {
    return {}
  }
}

/** For the HTML page: the schema's own properties. */
const schemaOf = (s: Schema.Schema.Any): Json => jsonSchemaOf(s, "allow")

const canonical = (value: unknown): string =>
  Array.isArray(value)
    ? `[${value.map(canonical).join(",")}]`
    : value !== null && typeof value === "object"
    ? `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical((value as Json)[k])}`).join(",")}}`
    : JSON.stringify(value)

/**
 * Rewrites a JSON Schema: `#/$defs/X` references through `names`, and Effect's marker
 * `$id`s (`/schemas/unknown`, …: they would change the base URI of references) dropped.
 */
const rewrite = (value: unknown, names: ReadonlyMap<string, string>): unknown => {
  if (Array.isArray(value)) return value.map((v) => rewrite(v, names))
  if (value === null || typeof value !== "object") return value
  const out: Json = {}
  for (const [k, v] of Object.entries(value)) {
    if (k === "$ref" && typeof v === "string" && v.startsWith("#/$defs/")) {
      const name = decodeURIComponent(v.slice("#/$defs/".length)).replace(/~1/g, "/").replace(/~0/g, "~")
      out[k] = `#/components/schemas/${names.get(name) ?? name}`
    } else if (k === "$id" && typeof v === "string" && v.startsWith("/schemas/")) {
      continue
    } else if (k === "$schema") {
      continue
    } else out[k] = rewrite(v, names)
  }
  return out
}

/**
 * The shared `components.schemas`: every `$defs` entry of every schema is hoisted here under a
 * unique name; an identical definition met again (from another route) is shared, a different
 * one under a taken name gets a numbered name (`X_2`).
 */
class Components {
  readonly schemas: Record<string, Json> = {}

  /** The schema of `s` with its definitions hoisted and its references pointing at them. */
  add(s: Schema.Schema.Any, additionalProperties: "allow" | "strict" = "strict"): Json {
    const { $defs, ...root } = jsonSchemaOf(s, additionalProperties) as Json & { $defs?: Record<string, Json> }
    const defs = Object.entries($defs ?? {})
    const sanitize = (n: string) => n.replace(/[^A-Za-z0-9._-]/g, "_") || "Schema"
    const names = new Map(defs.map(([n]) => [n, sanitize(n)]))
    // Names settle when every definition is either new or identical to the one already there.
    for (let round = 0; round < 100; round++) {
      let changed = false
      for (const [n, def] of defs) {
        const name = names.get(n)!
        const existing = this.schemas[name]
        if (existing !== undefined && canonical(existing) !== canonical(rewrite(def, names))) {
          const base = sanitize(n)
          let i = 2
          while (
            this.schemas[`${base}_${i}`] !== undefined && canonical(this.schemas[`${base}_${i}`]) !== canonical(rewrite(def, names)) ||
            [...names].some(([other, taken]) => other !== n && taken === `${base}_${i}`)
          ) i++
          names.set(n, `${base}_${i}`)
          changed = true
        }
      }
      if (!changed) break
    }
    for (const [n, def] of defs) this.schemas[names.get(n)!] ??= rewrite(def, names) as Json
    return rewrite(root, names) as Json
  }

  /** A named schema written by hand; a reference to it. */
  named(name: string, schema: Json): Json {
    this.schemas[name] = schema
    return { $ref: `#/components/schemas/${name}` }
  }
}

/** The success body: the envelope of the route's API around `result` (raw routes: `result` itself). */
const successBody = (kind: Route["envelope"], result: Json): Json =>
  kind === "none" || kind === "openai" || kind === "anthropic"
    ? result
    : {
      type: "object",
      required: kind === "avatar" ? ["isError", "isWarning", "message", "detailedMessage", "result"] : ["isError", "message", "result"],
      properties: {
        isError: { type: "boolean", const: false },
        message: kind === "avatar" ? { type: "string" } : { type: ["string", "null"] },
        result,
        ...(kind === "avatar" ? { isWarning: { type: "boolean" }, detailedMessage: { type: "string" } } : {})
      }
    }

/** A success body that is not JSON: an event stream, an HTML page, audio bytes. */
const textBody = (contentType: string): Json =>
  contentType === "text/event-stream"
    ? { type: "string", description: "Server-sent events: `data: <JSON object>` frames" }
    : contentType.startsWith("text/")
    ? { type: "string" }
    : { type: "string", contentMediaType: contentType }

const errorSchemas = (c: Components) => ({
  gateway: c.named("ErrorEnvelope", {
    type: "object",
    description: "A gateway failure: `isError` true, the reason in `message`, `result` null.",
    required: ["isError", "message", "result"],
    properties: { isError: { type: "boolean", const: true }, message: { type: "string" }, result: { type: "null" } }
  }),
  avatar: c.named("AvatarErrorEnvelope", {
    type: "object",
    description: "An avatar API failure: `isError` true, the reason in `message` (details in `detailedMessage`), `result` null.",
    required: ["isError", "isWarning", "message", "detailedMessage", "result"],
    properties: {
      isError: { type: "boolean", const: true },
      isWarning: { type: "boolean" },
      message: { type: "string" },
      detailedMessage: { type: "string" },
      result: { type: "null" }
    }
  }),
  openai: c.named("OpenAiError", {
    type: "object",
    description: "An OpenAI-shaped failure of the /openai/v1 surface; `code` is the gateway's error kind, `param` the request field a 400 is about (`messages.[0].content`) or null.",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["message", "type", "param", "code"],
        properties: { message: { type: "string" }, type: { type: "string" }, param: { type: ["string", "null"] }, code: { type: "string" } }
      }
    }
  }),
  anthropic: c.named("AnthropicError", {
    type: "object",
    description: "An Anthropic-shaped failure of the /anthropic/v1 surface.",
    required: ["type", "error"],
    properties: {
      type: { type: "string", const: "error" },
      error: { type: "object", required: ["type", "message"], properties: { type: { type: "string" }, message: { type: "string" } } }
    }
  })
})

const errorStatuses: Record<string, string> = {
  "400": "Bad request: malformed JSON, a field of the wrong type or out of range (the message names them)",
  "401": "Missing, invalid or expired credentials",
  "403": "Authenticated, but not allowed (plan, role or ownership)",
  "404": "No such resource, model or provider",
  "413": "Request body above the configured size limit",
  "422": "Well-formed but refused (e.g. a provider that is not configured, a model of the wrong kind)",
  "429": "Daily quota exhausted or too many requests; see Retry-After",
  "500": "Unexpected failure",
  "501": "A capability that is not available in this deployment (the message says what to configure)",
  "502": "The upstream provider failed",
  "503": "At capacity (retry after Retry-After) or a dependency is unavailable",
  "504": "The upstream provider timed out"
}

/** The error statuses an operation documents: what its declaration can lead to. */
const errorStatusesOf = (r: Route): Array<string> => {
  const statuses = ["400", "404", "500"]
  if (r.auth === "required") statuses.push("401", "403", "429")
  // The avatar API answers Conflict and Rejected with 200 + isError (in the 200 schema).
  if (r.envelope === "avatar") statuses.push("401", "422", "429")
  if (Option.isSome(r.body) || r.rawBody) statuses.push("413", "422")
  if (r.metered) statuses.push("422", "501", "502", "503", "504")
  return [...new Set(statuses)].sort()
}

const operationId = (r: Route) =>
  `${r.method.toLowerCase()}${
    r.path.replace(/\*/g, "path").split(/[^A-Za-z0-9]+/).filter(Boolean).map((w) => w[0]!.toUpperCase() + w.slice(1)).join("")
  }`

export const openApiDocument = (routes: ReadonlyArray<Route>, version: string) => {
  const components = new Components()
  const errors = errorSchemas(components)
  const paths: Record<string, Record<string, unknown>> = {}
  for (const r of routes) {
    const path = toOpenApiPath(r.path)
    const pathParams = [...r.path.matchAll(/:(\w+)/g)].map((m) => ({
      name: m[1],
      in: "path",
      required: true,
      schema: { type: "string" }
    }))
    if (r.path.endsWith("/*")) {
      pathParams.push({ name: "path", in: "path", required: true, schema: { type: "string" } })
    }
    const query = Option.match(r.query, {
      onNone: () => [],
      onSome: (s) => {
        const js = components.add(s, "allow") as { properties?: Record<string, unknown>; required?: Array<string> }
        return Object.entries(js.properties ?? {}).map(([name, schema]) => ({
          name,
          in: "query",
          required: js.required?.includes(name) ?? false,
          schema
        }))
      }
    })
    const result = r.docs.success ? components.add(r.docs.success) : {}
    const errorSchema = r.envelope === "none" ? errors.gateway : errors[r.envelope]
    const errorResponses = Object.fromEntries(
      errorStatusesOf(r).map((status) => [status, {
        description: errorStatuses[status],
        ...(status === "429" || status === "503"
          ? { headers: { "Retry-After": { description: "Seconds to wait before retrying", schema: { type: "integer" } } } }
          : {}),
        content: { "application/json": { schema: errorSchema } }
      }])
    )
    paths[path] ??= {}
    paths[path][r.method.toLowerCase()] = {
      operationId: operationId(r),
      tags: [r.docs.tag],
      summary: r.docs.summary,
      ...(r.docs.description ? { description: r.docs.description } : {}),
      // Open routes keep the document's security (anonymous, or credentials that are checked when sent).
      ...(r.auth === "required" ? { security: [{ bearer: [] }, { apiKey: [] }] } : {}),
      parameters: [...pathParams, ...query],
      ...(Option.isSome(r.body) && !r.rawBody
        ? { requestBody: { required: true, content: { "application/json": { schema: components.add(r.body.value, "allow") } } } }
        : {}),
      ...(r.rawBody ? { requestBody: { required: true, content: { "multipart/form-data": { schema: { type: "object" } } } } } : {}),
      responses: {
        "200": {
          description: r.envelope === "avatar"
            ? "Success, or a business rejection (wrong password, taken username, expired token) with isError true"
            : r.metered
            ? "Success (counts against the daily quota)"
            : "Success",
          content: {
            [r.docs.contentType ?? "application/json"]: {
              schema: r.docs.contentType !== undefined && r.docs.contentType !== "application/json"
                ? textBody(r.docs.contentType)
                : r.envelope === "avatar"
                ? { oneOf: [successBody(r.envelope, result), errors.avatar] }
                : successBody(r.envelope, result)
            }
          }
        },
        ...errorResponses
      }
    }
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "aigw",
      version,
      description: "One HTTP API in front of many upstream AI providers, plus the avatar (user account) API."
    },
    servers: [{ url: "/", description: "This gateway" }],
    // The default of every operation: anonymous, or credentials (checked when sent); authenticated
    // operations require one of the two.
    security: [{}, { bearer: [] }, { apiKey: [] }],
    components: {
      schemas: components.schemas,
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT or API key", description: "`Authorization: Bearer <JWT or API key>`" },
        apiKey: { type: "apiKey", in: "header", name: "X-Api-Key", description: "An API key from POST /v1/keys" }
      }
    },
    paths
  }
}

/** A readable, self-contained reference page (no external scripts or fonts). */
export const docsPage = (routes: ReadonlyArray<Route>, version: string) => {
  const byTag = new Map<string, Array<Route>>()
  for (const r of routes) byTag.set(r.docs.tag, [...(byTag.get(r.docs.tag) ?? []), r])
  const fields = (s: Schema.Schema.Any) => {
    const js = schemaOf(s) as { properties?: Record<string, any>; required?: Array<string> }
    const rows = Object.entries(js.properties ?? {}).map(([name, p]) =>
      `<tr><td><code>${escapeHtml(name)}</code></td><td>${escapeHtml(String(p.type ?? (p.anyOf ? "union" : p.enum ? "enum" : "")))}</td><td>${
        js.required?.includes(name) ? "yes" : ""
      }</td><td>${escapeHtml(String(p.description ?? p.title ?? (p.enum ? p.enum.join(", ") : "")))}</td></tr>`
    )
    return rows.length ? `<table><tr><th>field</th><th>type</th><th>required</th><th>notes</th></tr>${rows.join("")}</table>` : ""
  }
  const sections = [...byTag].map(([tag, rs]) =>
    `<section><h2 id="${escapeHtml(tag.toLowerCase().replace(/\W+/g, "-"))}">${escapeHtml(tag)}</h2>${
      rs.map((r) =>
        `<article><h3><span class="m ${r.method.toLowerCase()}">${r.method}</span> <code>${escapeHtml(r.path)}</code></h3>
<p>${escapeHtml(r.docs.summary)}${r.auth === "required" ? ' <span class="b">auth</span>' : ""}${r.metered ? ' <span class="b">metered</span>' : ""}</p>
${r.docs.description ? `<p>${escapeHtml(r.docs.description)}</p>` : ""}
${Option.match(r.query, { onNone: () => "", onSome: (s) => `<h4>Query</h4>${fields(s)}` })}
${Option.isSome(r.body) && !r.rawBody ? `<h4>Body</h4>${fields(r.body.value)}` : ""}</article>`
      ).join("")
    }</section>`
  ).join("")
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>aigw API reference</title>
<meta name="viewport" content="width=device-width,initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
code{font-family:ui-monospace,monospace}table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;font-size:.9rem}
article{border-top:1px solid #eee;padding:.5rem 0}.m{display:inline-block;min-width:4rem;font-size:.8rem;padding:.1rem .3rem;border-radius:3px;color:#fff;background:#555}
.get{background:#1f6feb}.post{background:#2da44e}.put{background:#bf8700}.delete{background:#cf222e}.b{font-size:.75rem;background:#eee;padding:.05rem .3rem;border-radius:3px}</style></head>
<body><h1>aigw API reference <small>v${escapeHtml(version)}</small></h1>
<p>Machine-readable: <a href="/openapi.json">/openapi.json</a>. Authenticate with <code>Authorization: Bearer &lt;JWT or API key&gt;</code> or <code>X-Api-Key</code>. Every gateway answer is an envelope <code>{ isError, message, result }</code>.</p>
<nav>${[...byTag.keys()].map((t) => `<a href="#${escapeHtml(t.toLowerCase().replace(/\W+/g, "-"))}">${escapeHtml(t)}</a>`).join(" · ")}</nav>
${sections}</body></html>`
}
