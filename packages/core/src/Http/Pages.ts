/** Small HTML pages for people following e-mail links (verification, password reset). */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"

export const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

const layout = (title: string, body: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${escapeHtml(title)} · aigw</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}.ok{color:#17692c}.err{color:#a4161a}label{display:block;margin:.8rem 0 .2rem}
input{width:100%;padding:.5rem;font-size:1rem;box-sizing:border-box}button{margin-top:1rem;padding:.6rem 1.2rem;font-size:1rem}</style>
</head><body>${body}</body></html>`

/** No page of the gateway may be framed by another site (a reset form under a clickjacking overlay), nor read as another type. */
export const pageHeaders = { "x-frame-options": "DENY", "content-security-policy": "frame-ancestors 'none'", "x-content-type-options": "nosniff" }

/** The pages below answer links that hold a one-time token (and may show the avatar's address): never cached, never sent on as a Referer. */
const linkPageHeaders = { ...pageHeaders, "cache-control": "no-store", "referrer-policy": "no-referrer" }

const html = (title: string, body: string, status = 200) =>
  HttpServerResponse.html(layout(title, body)).pipe(HttpServerResponse.setStatus(status), HttpServerResponse.setHeaders(linkPageHeaders))

export const verificationResult = (ok: boolean, message: string) =>
  html(
    ok ? "E-mail verified" : "Verification failed",
    `<h1 class="${ok ? "ok" : "err"}" id="outcome">${ok ? "Your e-mail address is verified." : "Verification failed."}</h1>
<p id="message">${escapeHtml(message)}</p>`,
    ok ? 200 : 400
  )

/**
 * The reset form. With JavaScript it posts JSON to the API (`reset-password`) and shows the
 * envelope's message; without, the browser posts the form itself (`method="post"`, urlencoded) to
 * `reset-password-form`, which answers a page. The password never travels in a URL either way.
 * `problem` (the answer to a refused no-JavaScript post) is shown under the form.
 */
export const resetForm = (token: string, problem?: string, status = 200) =>
  html(
    "Choose a new password",
    `<h1>Choose a new password</h1>
<form id="reset" method="post" action="reset-password-form">
<input type="hidden" name="token" value="${escapeHtml(token)}">
<label for="password">New password (at least 8 characters)</label><input id="password" name="password" type="password" minlength="8" required autocomplete="new-password">
<label for="confirmPassword">Confirm new password</label><input id="confirmPassword" name="confirmPassword" type="password" minlength="8" required autocomplete="new-password">
<button type="submit" id="submit">Set password</button>
</form>
${problem === undefined ? `<p id="outcome" role="status"></p>` : `<p id="outcome" role="status" class="err">${escapeHtml(problem)}</p>`}
<script>
document.getElementById("reset").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  const outcome = document.getElementById("outcome");
  outcome.className = ""; outcome.textContent = "Saving…";
  try {
    const response = await fetch("reset-password", { method: "POST", headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({ token: form.get("token"), password: form.get("password"), confirmPassword: form.get("confirmPassword") }) });
    const envelope = await response.json();
    outcome.className = envelope.isError ? "err" : "ok";
    outcome.textContent = envelope.isError ? envelope.message : "Your password was changed. You can sign in now.";
    if (!envelope.isError) event.target.remove();
  } catch (e) { outcome.className = "err"; outcome.textContent = "Could not reach the server: " + e; }
});
</script>`,
    status
  )

/** The answer to the no-JavaScript reset form: done, or why the link cannot be used (no form: it would fail again). */
export const resetResult = (ok: boolean, message: string, status = ok ? 200 : 400) =>
  html(
    ok ? "Password changed" : "Password not changed",
    `<h1 class="${ok ? "ok" : "err"}" id="outcome">${ok ? "Your password was changed. You can sign in now." : "Your password was not changed."}</h1>
<p id="message">${escapeHtml(message)}</p>`,
    status
  )

/** True when the client asked for HTML (a browser following a link), not JSON. */
export const wantsHtml = (accept: string | undefined) =>
  accept !== undefined && accept.includes("text/html") && !accept.startsWith("application/json")
