/**
 * The result envelopes of the two APIs. The gateway answers `{ isError, message, result }`;
 * the avatar API adds `isWarning` and `detailedMessage`.
 */
export interface Envelope<A = unknown> {
  readonly isError: boolean
  readonly message: string | null
  readonly result: A | null
}

export interface AvatarEnvelope<A = unknown> extends Envelope<A> {
  readonly isWarning: boolean
  readonly detailedMessage: string
}

export type EnvelopeKind = "gateway" | "avatar"

export const success = <A>(result: A, message: string | null = null): Envelope<A> => ({
  isError: false,
  message,
  result
})

export const failure = (message: string): Envelope<never> => ({ isError: true, message, result: null })

export const avatarSuccess = <A>(result: A, message: string, isWarning = false): AvatarEnvelope<A> => ({
  isError: false,
  isWarning,
  message,
  detailedMessage: "",
  result
})

export const avatarFailure = (message: string, detailedMessage = ""): AvatarEnvelope<never> => ({
  isError: true,
  isWarning: false,
  message,
  detailedMessage,
  result: null
})

/** Wraps an error message in the envelope of the given API. */
export const failureOf = (kind: EnvelopeKind, message: string, detailedMessage = ""): Envelope<never> =>
  kind === "avatar" ? avatarFailure(message, detailedMessage) : failure(message)

export const successOf = <A>(kind: EnvelopeKind, result: A, message: string | null): Envelope<A> =>
  kind === "avatar" ? avatarSuccess(result, message ?? "OK") : success(result, message)
