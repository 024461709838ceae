/** The account e-mails. Links are built from the configured public URL only. */
import type { Mail } from "./Mailer.ts"

const escape = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

const page = (to: string, subject: string, lines: ReadonlyArray<string>, link?: { href: string; label: string }): Mail => ({
  to,
  subject,
  text: [...lines, ...(link ? ["", `${link.label}: ${link.href}`] : [])].join("\n"),
  html: `<!doctype html><html><body style="font-family:sans-serif">${lines.map((l) => `<p>${escape(l)}</p>`).join("")}${
    link ? `<p><a href="${escape(link.href)}">${escape(link.label)}</a></p><p style="color:#666">${escape(link.href)}</p>` : ""
  }</body></html>`
})

export const verification = (to: string, username: string, link: string): Mail =>
  page(to, "Verify your e-mail address", [
    `Hello ${username},`,
    "please confirm this e-mail address for your aigw avatar. The link is valid for 24 hours and can be used once."
  ], { href: link, label: "Verify e-mail address" })

export const passwordReset = (to: string, username: string, link: string): Mail =>
  page(to, "Reset your password", [
    `Hello ${username},`,
    "someone asked to reset the password of your aigw avatar. If it was you, follow the link within one hour; otherwise ignore this mail."
  ], { href: link, label: "Choose a new password" })

/**
 * An address as a notice may show it: its first character and its domain (`t***@example.com`), enough
 * for the owner to recognise it, not to hand it on.
 */
export const maskAddress = (address: string) => {
  const at = address.lastIndexOf("@")
  return `${address.slice(0, Math.min(1, at))}***${address.slice(at)}`
}

/** `cancelledChange`: the new address of an e-mail change the reset cancelled, if one was waiting. */
export const passwordChanged = (to: string, username: string, cancelledChange: string | null = null): Mail =>
  page(to, "Your password was changed", [
    `Hello ${username},`,
    "the password of your aigw avatar was just changed: every earlier session was signed out and every API key of your avatar was revoked (create new keys after signing in). Jobs submitted before the change (batches, fine-tuning, videos) were stopped, without their webhooks: submit again what you still need.",
    ...(cancelledChange === null ? [] : [`The change of your e-mail address to ${maskAddress(cancelledChange)} that was waiting for confirmation was cancelled; its link no longer works.`]),
    "If this was not you, reset your password now."
  ])

export const emailChangeRequested = (to: string, username: string, newAddress: string): Mail =>
  page(to, "A change of your e-mail address was requested", [
    `Hello ${username},`,
    `a change of this aigw avatar's e-mail address to ${maskAddress(newAddress)} was requested. It takes effect only once the link sent to that address is followed; until then this address stays in force.`,
    "If it was not you, reset your password now (use \"forgot password\" with this address): that cancels the change and signs out every session and API key."
  ])

export const emailChanged = (to: string, username: string, newAddress: string): Mail =>
  page(to, "Your e-mail address was changed", [
    `Hello ${username},`,
    `the e-mail address of your aigw avatar was changed to ${maskAddress(newAddress)}. This address no longer signs in, receives the avatar's mails or resets its password, and password-reset links sent to it before no longer work.`,
    "If it was not you, contact the operator of this service."
  ])

export const addressClaimed = (to: string, username: string): Mail =>
  page(to, "Someone asked to use your e-mail address", [
    `Hello ${username},`,
    "another aigw avatar asked to change its e-mail address to this one, which already belongs to your avatar. Nothing was changed on your avatar and no link was sent for theirs; you need not do anything."
  ])

export const alreadyRegistered = (to: string, username: string, link: string): Mail =>
  page(to, "You already have an account", [
    `Hello ${username},`,
    "someone tried to register a new aigw avatar with this e-mail address, which already belongs to your avatar. If you forgot your password, reset it here."
  ], { href: link, label: "Reset password" })
