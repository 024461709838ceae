/** The avatar account API (spec: avatar-api.md), served under /api. */
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { type Context, Effect, Either, Schema } from "effect"
import { proofOf } from "../Accounts/Auth.ts"
import { Avatars, READ_ONLY_FIELDS } from "../Accounts/Avatars.ts"
import { clientAddress } from "../Accounts/ClientAddress.ts"
import { AvatarTypeSchema, Email, idParam, ImageField, IsoDate, Password, secretString, Username } from "../Accounts/Schemas.ts"
import { GatewayConfig } from "../Config.ts"
import { BadRequest, type GatewayError, statusOf } from "../Errors.ts"
import { Plan } from "../Plans.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import * as Pages from "./Pages.ts"
import { credentialsOf } from "./Edge.ts"
import { authed, decoderNow, type Docs, type Method, open, readText, Reply } from "./Route.ts"
import { AuthResult, AvatarList, AvatarOrPublicView, AvatarView } from "./ResponseSchemas.ts"

const tag = "Avatar accounts"
const envelope = "avatar" as const
/** A link's one-time token: a secret, never quoted back. */
const Token = secretString("token", 1, 200)

/** The POST bodies refuse a field they do not take by name (`bogus: is unexpected`): nothing sent is dropped unseen. */
const strict = { parseOptions: { onExcessProperty: "error" } } as const

const RegisterBody = Schema.Struct({
  username: Username,
  email: Email,
  password: Password,
  // A registration form's repeat of the password, checked (Avatars.register).
  confirmPassword: Schema.optional(secretString("confirmPassword", 0, 1024)),
  title: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
  providerType: Schema.optional(Schema.String.pipe(Schema.maxLength(100))),
  // Every registration makes a User; only an Admin makes Admins (PUT).
  AvatarType: Schema.optional(Schema.Literal("User").annotations({ message: () => "a registration makes a User; an Admin makes Admins with PUT /api/avatar/{id}" }))
}).annotations(strict)

const AuthenticateBody = Schema.Struct({
  username: Schema.optional(Schema.String.pipe(Schema.maxLength(254))),
  email: Schema.optional(Schema.String.pipe(Schema.maxLength(254))),
  password: secretString("password", 0, 1024)
}).annotations(strict)

/**
 * The logins a sign-in names: `username`, else `email` (an empty or blank one counts as not sent),
 * and the other when both are sent: it must name the same avatar (Avatars.authenticate).
 */
const loginsOf = (body: { readonly username?: string | undefined; readonly email?: string | undefined }) =>
  [body.username, body.email].filter((login): login is string => login !== undefined && login.trim() !== "")

/** A profile field sent back with a PUT (a GET's body edited): taken unchanged, refused by name when changed (Avatars.update). */
const ReadOnly = Schema.optional(Schema.Unknown)

const UpdateBody = Schema.Struct({
  title: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
  description: Schema.optional(Schema.String.pipe(Schema.maxLength(5000))),
  // Checked in Avatars.update when they change: the values an avatar has are taken back as they are.
  username: Schema.optional(Schema.String.pipe(Schema.maxLength(1024)).annotations({ description: "3 to 32 letters, digits and underscores (a value the avatar has is taken back unchanged)" })),
  email: Schema.optional(Schema.String.pipe(Schema.maxLength(1024)).annotations({ description: "an e-mail address (a value the avatar has is taken back unchanged)" })),
  image: Schema.optional(ImageField),
  dob: Schema.optional(Schema.NullOr(IsoDate)),
  AvatarType: Schema.optional(AvatarTypeSchema),
  karmaTotal: Schema.optional(Schema.Number.pipe(Schema.finite(), Schema.between(0, 1e12))),
  plan: Schema.optional(Plan),
  password: Schema.optional(Schema.Never.annotations({
    message: () => "a password is not changed with PUT: use POST /api/avatar/forgot-password and the reset link it mails"
  })),
  ...Object.fromEntries(READ_ONLY_FIELDS.map((field) => [field, ReadOnly])) as { readonly [K in typeof READ_ONLY_FIELDS[number]]: typeof ReadOnly }
}).annotations(strict)

const TokenQuery = Schema.Struct({ token: Token })
const EmailBody = Schema.Struct({ email: Email }).annotations(strict)
const ResetBody = Schema.Struct({
  token: Token,
  password: Password,
  confirmPassword: secretString("confirmPassword", 0, 1024)
}).annotations(strict)

const decodeResetForm = decoderNow(ResetBody, "form")

/**
 * A urlencoded form's fields (the first of a repeated name), or undefined when an escape is not UTF-8:
 * URLSearchParams turns `%ED%A0%80` or `%FF` into U+FFFD, and two different passwords became one.
 */
const formFields = (text: string): Record<string, string> | undefined => {
  const fields: Record<string, string> = Object.create(null)
  try {
    for (const pair of text.split("&")) {
      if (pair === "") continue
      const at = pair.indexOf("=")
      const [key, value] = (at < 0 ? [pair, ""] : [pair.slice(0, at), pair.slice(at + 1)]).map((t) => decodeURIComponent(t.replace(/\+/g, " ")))
      fields[key!] ??= value!
    }
  } catch {
    return undefined
  }
  return fields
}

/**
 * The reset page's form posted without JavaScript: urlencoded fields in the body (read within the
 * body limit), an HTML page back. A problem the person can fix (passwords that differ, too short)
 * shows the form again with the message; a link that cannot be used shows why. Anything but a
 * form (an API client) gets the 400 envelope every route gives to a body it cannot read.
 */
const resetFromForm = (contentType: string | undefined) =>
  Effect.gen(function*() {
    if ((contentType ?? "").split(";")[0]!.trim().toLowerCase() !== "application/x-www-form-urlencoded") {
      return yield* Effect.fail(
        new BadRequest({ message: "The request must be an application/x-www-form-urlencoded form; API clients use POST /api/avatar/reset-password." })
      )
    }
    const text = yield* readText.pipe(Effect.either)
    if (Either.isLeft(text)) return Pages.resetResult(false, text.left.message, statusOf(text.left))
    const fields = formFields(text.right)
    if (fields === undefined) return Pages.resetResult(false, "The form is not valid UTF-8.", 400)
    const token = fields.token !== undefined && fields.token.length > 0 && fields.token.length <= 200 ? fields.token : undefined
    return yield* Effect.gen(function*() {
      if (Object.values(fields).some((v) => v.includes("\0"))) {
        return yield* Effect.fail(new BadRequest({ message: "NUL characters are not accepted." }))
      }
      const body = decodeResetForm(fields)
      if (body instanceof BadRequest) return yield* Effect.fail(body)
      yield* Effect.flatMap(Avatars, (a) => a.resetPassword(body.token, body.password, body.confirmPassword))
      return Pages.resetResult(true, "Sign in with the new password.")
    }).pipe(
      Effect.catchAll((e: GatewayError) =>
        Effect.succeed(
          e._tag === "BadRequest" && token !== undefined
            ? Pages.resetForm(token, e.message, statusOf(e))
            : Pages.resetResult(false, e.message, statusOf(e))
        )
      )
    )
  })

/** The client address that per-address limits (registrations, failed logins) count. */
const addressOf = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.map(GatewayConfig, ({ trustProxy }) => clientAddress(request.remoteAddress, request.headers["x-forwarded-for"], trustProxy))

type AvatarsApi = Context.Tag.Service<typeof Avatars>

/**
 * A route on the avatar the path names (`:id`, a UUID, else 400): `call` acts on it and the
 * answer is the avatar it returns, with `message` (written from the avatar and the request's body).
 */
const avatarById = <A, B = undefined>(
  method: Method,
  call: (
    a: AvatarsApi,
    input: { readonly caller: AvatarRecord; readonly id: string; readonly body: B; readonly request: HttpServerRequest.HttpServerRequest }
  ) => Effect.Effect<A, GatewayError>,
  message: (avatar: A, body: B) => string,
  docs: Omit<Docs, "tag"> & { readonly body?: Schema.Schema<B, any, never> }
) =>
  authed({
    method,
    path: "/api/avatar/:id",
    tag,
    envelope,
    ...docs,
    handle: ({ body, caller, params, request }) =>
      idParam(params.id).pipe(
        Effect.flatMap((id) => Effect.flatMap(Avatars, (a) => call(a, { caller, id, body, request }))),
        Effect.map((avatar) => new Reply(avatar, message(avatar, body)))
      )
  })

/** A whole number in decimal digits within `min`..`max`, from a query value (`Number()` would also read 0x10 and 1e3). */
const wholeQuery = (name: string, min: number, max: number) =>
  Schema.String.pipe(
    Schema.pattern(/^\d{1,10}$/),
    Schema.compose(Schema.NumberFromString),
    Schema.between(min, max),
    Schema.annotations({ message: () => `${name} must be a whole number from ${min} to ${max}` })
  )
const PageLimit = wholeQuery("limit", 1, 1000)
const PageOffset = wholeQuery("offset", 0, 1_000_000_000)

export const avatarRoutes = [
  open({
    method: "POST",
    path: "/api/avatar/register",
    success: AvatarView,
    tag,
    envelope,
    summary: "Register an avatar",
    description:
      "Creates an avatar and sends a verification e-mail. A taken e-mail address answers exactly like a success and its avatar behaves like a fresh unverified one (no enumeration; docs/accounts.md); a taken username is an error.",
    body: RegisterBody,
    handle: ({ body, request }) =>
      addressOf(request).pipe(
        Effect.flatMap((address) => Effect.flatMap(Avatars, (a) => a.register(body, address))),
        Effect.map((avatar) => new Reply(avatar, "Avatar registered. Check your e-mail and follow the link to verify your address."))
      )
  }),
  open({
    method: "POST",
    path: "/api/avatar/authenticate",
    success: AuthResult,
    tag,
    envelope,
    summary: "Log in and get a JWT (valid 7 days)",
    description:
      "`username` or `email` may hold either a username or an e-mail address (an e-mail address only once verified). Failed sign-ins are limited per account and per client address: over the limit, 429 with Retry-After.",
    body: AuthenticateBody,
    handle: ({ body, request }) => {
      const [login, alsoNamed] = loginsOf(body)
      if (login === undefined) return Effect.fail(new BadRequest({ message: "username or email is required." }))
      return Effect.gen(function*() {
        const address = yield* addressOf(request)
        const result = yield* Effect.flatMap(Avatars, (a) => a.authenticate(login, body.password, address, alsoNamed))
        return new Reply(result, "Avatar authenticated.")
      })
    }
  }),
  open({
    method: "GET",
    path: "/api/avatar/verify-email",
    success: AvatarView,
    tag,
    envelope,
    summary: "Verify an e-mail address with the token from the e-mail",
    description: "Browsers (Accept: text/html) get a small HTML page; API clients get the envelope.",
    query: TokenQuery,
    handle: ({ query, request }) =>
      Effect.flatMap(Avatars, (a) => a.verifyEmail(query.token)).pipe(
        Effect.map((avatar) =>
          Pages.wantsHtml(request.headers["accept"])
            ? Pages.verificationResult(true, `${avatar.email} is now verified. You can sign in.`)
            : new Reply(avatar, "E-mail address verified.")
        ),
        Effect.catchAll((e: GatewayError) =>
          Pages.wantsHtml(request.headers["accept"]) ? Effect.succeed(Pages.verificationResult(false, e.message)) : Effect.fail(e)
        )
      )
  }),
  open({
    method: "POST",
    // A wildcard, not `:email`: the router refuses a path parameter of more than 100 characters
    // (find-my-way's maxParamLength) and an address may have 254. Everything after the slash is the address.
    path: "/api/avatar/resend-verification-email/*",
    success: Schema.Null,
    tag,
    envelope,
    summary: "Send the verification e-mail again (at most 3 per hour per address)",
    description: "The rest of the path is the e-mail address (URL-encoded), up to the 254 characters registration accepts.",
    handle: ({ params }) =>
      Schema.decodeUnknown(Email)(params["*"]).pipe(
        Effect.mapError(() => new BadRequest({ message: "email must be a valid e-mail address" })),
        Effect.flatMap((email) => Effect.flatMap(Avatars, (a) => a.resendVerification(email))),
        Effect.as(new Reply(null, "If an unverified avatar uses this address, a new verification e-mail is on its way."))
      )
  }),
  open({
    method: "POST",
    path: "/api/avatar/forgot-password",
    success: Schema.Null,
    tag,
    envelope,
    summary: "Send a password-reset e-mail",
    body: EmailBody,
    handle: ({ body }) =>
      Effect.flatMap(Avatars, (a) => a.forgotPassword(body.email)).pipe(
        Effect.as(new Reply(null, "If an avatar uses this address, a password-reset e-mail is on its way."))
      )
  }),
  open({
    method: "GET",
    path: "/api/avatar/reset-password",
    tag,
    // A page when it works; the avatar API's envelope for what is refused before (a missing token).
    envelope,
    summary: "HTML form for the password-reset link",
    query: TokenQuery,
    contentType: "text/html",
    // A dead link (used, expired, superseded) says so at once, not after the form is filled in.
    handle: ({ query }) =>
      Effect.flatMap(Avatars, (a) => a.checkResetLink(query.token)).pipe(
        Effect.as(Pages.resetForm(query.token)),
        Effect.catchAll((e) => Effect.succeed(Pages.resetResult(false, e.message, statusOf(e))))
      )
  }),
  open({
    method: "POST",
    path: "/api/avatar/reset-password",
    success: Schema.Null,
    tag,
    envelope,
    summary: "Reset the password with the token from the e-mail",
    description: "Revokes every JWT issued before the reset and every API key of the avatar, and sends a 'password changed' notice.",
    body: ResetBody,
    handle: ({ body }) =>
      Effect.flatMap(Avatars, (a) => a.resetPassword(body.token, body.password, body.confirmPassword)).pipe(
        Effect.as(new Reply(null, "Password changed. Sign in with the new password."))
      )
  }),
  open({
    method: "POST",
    path: "/api/avatar/reset-password-form",
    tag,
    // Pages for the form; the avatar API's envelope for an API client that sent anything else.
    envelope,
    summary: "Reset the password from the HTML form without JavaScript",
    description:
      "What the reset page's form posts when JavaScript is off: `application/x-www-form-urlencoded` fields `token`, `password` and `confirmPassword` (as for POST /api/avatar/reset-password, within AIGW_MAX_BODY_BYTES). Answers an HTML page: the password was changed; or the form again with the problem (e.g. passwords that do not match); or why the link cannot be used.",
    contentType: "text/html",
    handle: ({ request }) => resetFromForm(request.headers["content-type"])
  }),
  authed({
    method: "GET",
    path: "/api/avatar",
    success: AvatarList,
    tag,
    envelope,
    summary: "List all avatars (Admin only), oldest first; or one page of them with `limit` and `offset`",
    description:
      "Without a query, every avatar (the spec's list). `limit` (1 to 1000) answers at most that many, after the first `offset` (default 0): for installations with more avatars than one answer should carry. `offset` alone is a 400.",
    query: Schema.Struct({ limit: Schema.optional(PageLimit), offset: Schema.optional(PageOffset) }),
    handle: ({ caller, query }) => {
      if (query.offset !== undefined && query.limit === undefined) {
        return Effect.fail(new BadRequest({ message: "Invalid query: offset needs a limit (1 to 1000).", param: "offset" }))
      }
      const page = query.limit === undefined ? undefined : { limit: query.limit, offset: query.offset ?? 0 }
      return Effect.flatMap(Avatars, (a) => a.list(caller, page)).pipe(
        Effect.map((list) => new Reply(list, page === undefined ? `${list.length} avatars.` : `${list.length} avatars from ${page.offset}.`))
      )
    }
  }),
  avatarById("GET", (a, { caller, id }) => a.get(caller, id), () => "Avatar loaded.", {
    success: AvatarOrPublicView,
    summary: "Read an avatar profile",
    description: "The owner and Admins see the full profile; other avatars see the public fields only."
  }),
  avatarById(
    "PUT",
    (a, { body, caller, id, request }) => a.update(caller, id, body, proofOf(credentialsOf(request.headers))),
    // A change is waiting after a PUT that sent `email` exactly when this PUT asked for it (the
    // current address would have cancelled it): only then was a link sent.
    (avatar, body) =>
      body.email !== undefined && avatar.pendingEmail !== null
        ? "Avatar updated. Confirm the new e-mail address with the link we sent to it."
        : "Avatar updated.",
    {
      success: AvatarView,
      summary: "Update an avatar (owner or Admin)",
      description:
        "A new `email` is stored as pending and a verification e-mail goes to it (the current address gets a notice); the old address stays in force until the link is followed. Sending the current address cancels a pending change. E-mail changes are limited to 3 per hour per avatar and share the resend limit of the new address (429). Changing `username`, `email` or `AvatarType` needs a signed-in session (JWT); with an API key it is 403. Only Admins may change AvatarType, karmaTotal and plan.",
      body: UpdateBody
    }
  ),
  avatarById("DELETE", (a, { caller, id }) => a.delete(caller, id), () => "Avatar deleted.", {
    success: AvatarView,
    summary: "Soft-delete an avatar (Admin only)",
    description: "The record is kept and deactivated; its credentials stop working at once."
  })
]
