/**
 * A URL as logs and spans show it: the query's values are `REDACTED` (one-time tokens and receivers'
 * secrets travel there: `verify-email?token=…`, a callback's `?token=…`), its names kept; credentials
 * in the URL too.
 */
export const redactedUrl = (url: URL): URL => {
  const shown = new URL(url)
  if (shown.username !== "" || shown.password !== "") {
    shown.username = "REDACTED"
    shown.password = "REDACTED"
  }
  shown.search = [...new Set(shown.searchParams.keys())].map((n) => `${encodeURIComponent(n)}=REDACTED`).join("&")
  return shown
}

/** `text` as a redacted URL if it is one, else as it is (a URL that cannot be read carries no query to hide). */
export const shownUrl = (text: string): string => {
  try {
    return redactedUrl(new URL(text)).toString()
  } catch {
    return text
  }
}
