/**
 * The web-page extraction vendors (Tavily, Exa, Firecrawl): catalogued for `extract`, which aigw
 * does not serve through them. Their APIs fetch pages by URL (Tavily `POST /extract` {urls}, Exa
 * `POST /contents` {urls}, Firecrawl `POST /v2/scrape` {url, formats} and `POST /v2/extract`
 * {urls, schema}); the gateway's `POST /v1/extract` extracts a schema's fields from `text` the
 * caller sends (required by the spec), with no URL to fetch, and runs on a routed chat model
 * (Capabilities/LlmTasks.ts). Sending the caller's text to a page fetcher has no faithful mapping.
 */
import type { Served } from "./Served.ts"

/** Why `extract` is not served through a vendor that fetches pages by URL, naming its API. */
export const pageFetcherReason = (vendor: string, api: string) =>
  `${vendor}'s extraction fetches web pages by URL (${api}); aigw's POST /v1/extract extracts from the text the caller sends (text is required, there is no URL field), so it runs on a routed chat model instead`

export const tavily: Served = { notServed: { extract: pageFetcherReason("Tavily", "POST /extract {urls}") } }

export const exa: Served = { notServed: { extract: pageFetcherReason("Exa", "POST /contents {urls}") } }

export const firecrawl: Served = { notServed: { extract: pageFetcherReason("Firecrawl", "POST /v2/scrape {url, formats} and POST /v2/extract {urls, schema}") } }
