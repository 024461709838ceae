/** The OpenAPI 3.1 document and the HTML reference page, both generated from the routes. */
import { JSONSchema, Option, Schema } from "effect"
import type { Route } from "./Route.ts"
import { escapeHtml } from "./Pages.ts"

const toOpenApiPath = (path: string) => path.replace(/:(\w+)/g, "{$1}")

const schemaOf = (s: Schema.Schema.Any): Record<string, unknown> => {
  try {
    return JSONSchema.make(s as Schema.Schema<unknown, unknown>, { target: "openApi3.1" }) as unknown as Record<string, unknown>
  } catch {
    return {}
  }
}

const envelopeSchema = (kind: Route["envelope"], result: Record<string, unknown>) =>
  kind === "none" || kind === "openai"
    ? result
    : {
      type: "object",
      required: ["isError", "message", "result"],
      properties: {
        isError: { type: "boolean" },
        message: { type: ["string", "null"] },
        result,
        ...(kind === "avatar" ? { isWarning: { type: "boolean" }, detailedMessage: { type: "string" } } : {})
      }
    }

export const openApiDocument = (routes: ReadonlyArray<Route>, version: string) => {
  const paths: Record<string, Record<string, unknown>> = {}
  for (const r of routes) {
    const path = toOpenApiPath(r.path)
    const pathParams = [...r.path.matchAll(/:(\w+)/g)].map((m) => ({
      name: m[1],
      in: "path",
      required: true,
      schema: { type: "string" }
    }))
    const query = Option.match(r.query, {
      onNone: () => [],
      onSome: (s) => {
        const js = schemaOf(s) as { properties?: Record<string, unknown>; required?: Array<string> }
        return Object.entries(js.properties ?? {}).map(([name, schema]) => ({
          name,
          in: "query",
          required: js.required?.includes(name) ?? false,
          schema
        }))
      }
    })
    const result = r.docs.success ? schemaOf(r.docs.success) : {}
    paths[path] ??= {}
    paths[path][r.method.toLowerCase()] = {
      tags: [r.docs.tag],
      summary: r.docs.summary,
      ...(r.docs.description ? { description: r.docs.description } : {}),
      ...(r.auth === "required" ? { security: [{ bearer: [] }, { apiKey: [] }] } : {}),
      parameters: [...pathParams, ...query],
      ...(Option.isSome(r.body) && !r.rawBody
        ? { requestBody: { required: true, content: { "application/json": { schema: schemaOf(r.body.value) } } } }
        : {}),
      ...(r.rawBody ? { requestBody: { required: true, content: { "multipart/form-data": { schema: { type: "object" } } } } } : {}),
      responses: {
        "200": {
          description: r.metered ? "Success (counts against the daily quota)" : "Success",
          content: { [r.docs.contentType ?? "application/json"]: { schema: envelopeSchema(r.envelope, result) } }
        },
        default: { description: "Error envelope", content: { "application/json": { schema: envelopeSchema(r.envelope, { type: "null" }) } } }
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
    components: {
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT or API key" },
        apiKey: { type: "apiKey", in: "header", name: "X-Api-Key" }
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
