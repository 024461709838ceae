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

export const passwordChanged = (to: string, username: string): Mail =>
  page(to, "Your password was changed", [
    `Hello ${username},`,
    "the password of your aigw avatar was just changed: every earlier session was signed out and every API key of your avatar was revoked (create new keys after signing in). If this was not you, reset your password now."
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
