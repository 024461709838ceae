/** Code execution, document parsing and graph retrieval. */
import { Effect, Schema } from "effect"
import { CodeExecution } from "../Capabilities/CodeExecution.ts"
import { Completions } from "../Capabilities/Completions.ts"
import * as Documents from "../Capabilities/Documents.ts"
import { GraphRag } from "../Capabilities/GraphRag.ts"
import { BadRequest } from "../Errors.ts"
import { CODE_LANGUAGES } from "../Providers/Sandboxes/CodeEndpoint.ts"
import { authed, formProblem } from "./Route.ts"
import { onLane } from "./Lane.ts"
import { Provider } from "../RequestFields.ts"
import { DocumentParseResult, ExecutionResult, GraphRagResult } from "./ResponseSchemas.ts"


/** The parse request from its multipart form, or what is wrong with it. */
const documentInput = (form: FormData) =>
  Effect.suspend(() => {
    const problem = formProblem(form, ["file", "provider"])
    if (problem) return Effect.fail(problem)
    const file = form.get("file")
    if (!(file instanceof File) || file.size === 0) return Effect.fail(new BadRequest({ message: "file (a non-empty document) is required" }))
    const provider = form.get("provider")
    return Effect.succeed({ file, provider: typeof provider === "string" && provider ? provider : "auto" })
  })

const CodeBody = Schema.Struct({
  code: Schema.String.pipe(Schema.minLength(1, { message: () => "code must not be empty" }), Schema.maxLength(200_000)),
  language: Schema.optionalWith(Schema.Literal(...CODE_LANGUAGES).annotations({ message: () => `language must be one of ${CODE_LANGUAGES.join(", ")}` }), { default: () => "python" as const }),
  provider: Provider,
  timeoutMs: Schema.optionalWith(Schema.Int.pipe(Schema.between(100, 30_000, { message: () => "timeoutMs must be an integer from 100 to 30000" })), { default: () => 5000 })
})

const GraphRagBody = Schema.Struct({
  query: Schema.String.pipe(Schema.minLength(1, { message: () => "query must not be empty" }), Schema.maxLength(10_000)),
  userId: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))),
  provider: Provider
})

export const toolRoutes = [
  authed({
    method: "POST",
    path: "/v1/code/execute",
    success: ExecutionResult,
    tag: "Tools",
    metered: true,
    summary: "Run code in a sandbox: locally python (Pyodide/WebAssembly, default) or javascript (QuickJS/WebAssembly), or at a named remote sandbox vendor (riza, daytona); stdout, stderr, exit code",
    description: "Locally: no network or host file system inside the sandbox; timeoutMs (default 5000, at most 30000) bounds the run. typescript, ruby, php and bash run only at a named vendor (provider riza or daytona), which receives the code; auto and local never send code off the machine.",
    // Not on the lane: the check takes a sandbox slot the request holds until it ends (Route.ts `Held`).
    body: CodeBody,
    check: ({ avatar, body }) => Effect.flatMap(CodeExecution, (c) => c.check(body, avatar.id, avatar.plan)),
    handle: ({ avatar, body, checked }) => Effect.flatMap(CodeExecution, (c) => c.execute(body, avatar.id, checked))
  }),
  authed({
    method: "POST",
    path: "/v1/documents/parse",
    success: DocumentParseResult,
    tag: "Tools",
    metered: true,
    rawBody: true,
    summary: `Parse a document (multipart \`file\`; ${Documents.SUPPORTED}) into text (plus rows for CSV, data for JSON, pages for PDF), in-process or through a named vendor (\`provider\`)`,
    check: ({ avatar, form }) => Effect.flatMap(documentInput(form!), (input) => Documents.validate({ ...input, avatarId: avatar.id, plan: avatar.plan })),
    handle: ({ avatar, checked, form }) => Effect.flatMap(documentInput(form!), (input) => Documents.parseValidated({ ...input, avatarId: avatar.id, plan: avatar.plan }, checked))
  }),
  authed({
    method: "POST",
    path: "/v1/graphrag/query",
    success: GraphRagResult,
    tag: "Retrieval",
    metered: true,
    summary: "Multi-hop question over the caller's memories: entity graph walk + a routed model's cited answer",
    ...onLane(GraphRagBody, {
      check: ({ avatar, body }) => Effect.flatMap(Completions, (c) => c.check(avatar, { provider: body.provider, model: "auto", messages: [] })),
      handle: ({ avatar, body }) => Effect.flatMap(GraphRag, (g) => g.query(avatar, body))
    })
  })
]
