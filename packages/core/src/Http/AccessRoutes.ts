/** Gateway access: API keys, plans, usage, cost estimate and the catalogues. None of these is metered. */
import { Effect, Schema } from "effect"
import { ApiKeys } from "../Accounts/ApiKeys.ts"
import { proofOf } from "../Accounts/Auth.ts"
import { Avatars } from "../Accounts/Avatars.ts"
import { idParam } from "../Accounts/Schemas.ts"
import { EstimateRequest, estimateCost, getModel, listModels, listProviders, ModelCapability, openServModels, pathModelId } from "../Catalog/Queries.ts"
import { Forbidden } from "../Errors.ts"
import { Plan, PlanNames } from "../Plans.ts"
import { Usage } from "../Usage.ts"
import { credentialsOf } from "./Edge.ts"
import { authed, Reply } from "./Route.ts"
import { ApiKeyCreated, ApiKeyList, ApiKeyRevoked, CostEstimate, ModelDetail, ModelList, OpenServModelList, PlanSet, ProviderList, UsageSummary } from "./ResponseSchemas.ts"

const PlanQuery = Plan.annotations({
  message: () => `plan must be one of ${PlanNames.join(", ")}`
})

const KeyBody = Schema.Struct({
  name: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(100)), { default: () => "default" })
})

const UsageQuery = Schema.Struct({
  plan: Schema.optional(PlanQuery),
  // Decimal digits only: Number() would also read 0x10, 0b11, 1e3 and " 5 ".
  karma: Schema.optional(
    Schema.String.pipe(Schema.pattern(/^-?\d{1,13}$/), Schema.compose(Schema.NumberFromString), Schema.between(-1e12, 1e12), Schema.annotations({ message: () => "karma must be a whole number written in decimal digits" }))
  )
})

export const accessRoutes = [
  authed({
    method: "POST",
    path: "/v1/keys",
    success: ApiKeyCreated,
    tag: "API keys",
    summary: "Create an API key for the calling avatar (the secret is shown only in this answer)",
    description: "Needs a signed-in session (Authorization: Bearer <JWT>): an API key cannot create keys (403).",
    body: KeyBody,
    handle: ({ body, caller, request }) =>
      Effect.flatMap(ApiKeys, (k) => k.create(caller, body.name, proofOf(credentialsOf(request.headers)))).pipe(
        // The secret, shown once: kept by no cache.
        Effect.map((key) => new Reply(key, "API key created. Store the key now: it is not shown again.", 200, { "cache-control": "no-store" }))
      )
  }),
  authed({
    method: "GET",
    path: "/v1/keys",
    success: ApiKeyList,
    tag: "API keys",
    summary: "List the calling avatar's API keys (no secrets)",
    handle: ({ caller }) => Effect.flatMap(ApiKeys, (k) => k.list(caller.id))
  }),
  authed({
    method: "DELETE",
    path: "/v1/keys/:id",
    success: ApiKeyRevoked,
    tag: "API keys",
    summary: "Revoke one of the calling avatar's API keys; with stopJobs=true also stop the jobs it submitted",
    description:
      "The key stops working at once. Jobs it submitted (batches, videos, fine-tuning) run on unless `stopJobs=true`: then each is cancelled at its vendor where the vendor has a way, ends `cancelled` and sends no webhook (for a key that leaked; a key rotation leaves them running). `stopJobs=true` needs a signed-in session (Authorization: Bearer <JWT>), 403 with an API key; it may be sent for a key revoked before.",
    query: Schema.Struct({
      stopJobs: Schema.optional(Schema.Literal("true", "false").annotations({ message: () => "stopJobs must be true or false" }))
    }),
    handle: ({ caller, params, query, request }) =>
      idParam(params.id).pipe(
        Effect.flatMap((id) =>
          Effect.flatMap(ApiKeys, (k) => k.revoke(caller.id, id, proofOf(credentialsOf(request.headers)), query.stopJobs === "true"))
        ),
        Effect.as(new Reply({ id: params.id, revoked: true, ...(query.stopJobs === "true" ? { jobsStopped: true } : {}) }, query.stopJobs === "true" ? "API key revoked; the jobs it submitted are being stopped." : "API key revoked."))
      )
  }),
  authed({
    method: "PUT",
    path: "/v1/admin/avatars/:id/plan",
    success: PlanSet,
    tag: "Plans",
    summary: "Set an avatar's plan (Admin only)",
    body: Schema.Struct({ plan: PlanQuery }),
    handle: ({ body, caller, params, request }) =>
      caller.avatarType !== "Admin"
        ? Effect.fail(new Forbidden({ message: "Only an Admin can set plans." }))
        : Effect.flatMap(Avatars, (a) => a.update(caller, params.id ?? "", { plan: body.plan }, proofOf(credentialsOf(request.headers)))).pipe(
          Effect.map((avatar) => new Reply({ id: avatar.id, plan: avatar.plan }, `Plan set to ${avatar.plan}.`))
        )
  }),
  authed({
    method: "GET",
    path: "/v1/usage",
    success: UsageSummary,
    tag: "Usage",
    summary: "Usage summary of the calling avatar",
    description:
      "`plan` and `karma` compute a what-if limit for the answer (whatIf: true); they never change the enforced quota, which is under `enforced` and in the X-RateLimit-* headers.",
    query: UsageQuery,
    handle: ({ caller, query }) => Effect.flatMap(Usage, (u) => u.summary(caller, { plan: query.plan, karma: query.karma }))
  }),
  authed({
    method: "GET",
    path: "/v1/models",
    success: ModelList,
    tag: "Catalogue",
    summary: "Model catalogue, optionally filtered to the models available on a plan and/or by capability (chat, embeddings, rerank, tools, vision)",
    query: Schema.Struct({
      plan: Schema.optional(PlanQuery),
      capability: Schema.optional(ModelCapability.annotations({ message: () => "capability must be one of chat, embeddings, rerank, tools, vision" }))
    }),
    handle: ({ query }) => listModels({ plan: query.plan, capability: query.capability })
  }),
  authed({
    method: "GET",
    path: "/v1/models/*",
    success: ModelDetail,
    tag: "Catalogue",
    summary: "Detail of one model (ids with `/` may be sent as is or URL-encoded)",
    handle: ({ params }) => getModel(pathModelId(params["*"] ?? ""))
  }),
  authed({
    method: "GET",
    path: "/v1/providers",
    success: ProviderList,
    tag: "Catalogue",
    summary: "All providers with minimum plan, endpoint types, configuration and live status",
    handle: () => listProviders
  }),
  authed({
    method: "GET",
    path: "/v1/openserv/models",
    success: OpenServModelList,
    tag: "Catalogue",
    envelope: "none",
    summary: "Chat models in the third-party catalogue format (a bare array, not enveloped)",
    handle: () => openServModels
  }),
  authed({
    method: "POST",
    path: "/v1/estimate",
    success: CostEstimate,
    tag: "Cost",
    summary: "Estimate the cost of a call from token counts and catalogue prices",
    body: EstimateRequest,
    handle: ({ avatar, body }) => estimateCost(body, avatar.plan as Plan)
  })
]

