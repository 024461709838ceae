/**
 * SSRF guard for URLs the gateway will fetch or POST to on a user's behalf (webhook
 * callbacks, seed images, orchestrators): http(s) only, and no loopback, private, link-local,
 * CGNAT, multicast, reserved or cloud-metadata targets, checked on every address the name
 * resolves to. IPv6 is allowed only in global unicast (2000::/3) outside the special-purpose
 * blocks; IPv6 forms that carry an IPv4 address (IPv4-mapped, NAT64, 6to4) are judged by it.
 * `AIGW_ALLOW_PRIVATE_URLS=true` lifts the address rule (tests, single-host setups).
 */
import { Data, Effect } from "effect"
import * as dns from "node:dns"
import * as net from "node:net"
import type { Agent, RequestInit, Response } from "undici"
import { once } from "./Once.ts"
import { readWebBody } from "./Providers/internal/nodeFetch.ts"
import { Unprocessable } from "./Errors.ts"
import { parseUpstreamJson } from "./JsonText.ts"
import { shownUpstreamText } from "./Providers/UpstreamError.ts"

const blockedV4 = new net.BlockList()
for (const [prefix, bits] of [
  ["0.0.0.0", 8], ["10.0.0.0", 8], ["100.64.0.0", 10], ["127.0.0.0", 8], ["169.254.0.0", 16], ["172.16.0.0", 12],
  ["192.0.0.0", 24], ["192.0.2.0", 24], ["192.88.99.0", 24], ["192.168.0.0", 16], ["198.18.0.0", 15], ["198.51.100.0", 24],
  ["203.0.113.0", 24], ["224.0.0.0", 4], ["240.0.0.0", 4]
] as const) blockedV4.addSubnet(prefix, bits, "ipv4")

// Special-purpose blocks inside 2000::/3: IETF protocol assignments (Teredo 2001::/32 among
// them, whose client address is obfuscated), documentation.
const blockedV6 = new net.BlockList()
for (const [prefix, bits] of [["2001::", 23], ["2001:db8::", 32], ["3fff::", 20]] as const) blockedV6.addSubnet(prefix, bits, "ipv6")

const METADATA_HOSTS = new Set(["metadata.google.internal", "metadata", "metadata.azure.com", "instance-data"])

/** The eight 16-bit groups of an IPv6 address (one `net.isIPv6` accepts, zone removed). */
const groupsOf = (address: string): Array<number> => {
  const parse = (part: string) =>
    part === "" ? [] : part.split(":").flatMap((g) => {
      if (!g.includes(".")) return [parseInt(g, 16)]
      const [a, b, c, d] = g.split(".").map(Number) as [number, number, number, number]
      return [(a << 8) | b, (c << 8) | d]
    })
  const [head, tail] = address.split("::") as [string, string | undefined]
  const h = parse(head)
  const t = tail === undefined ? [] : parse(tail)
  return [...h, ...Array<number>(8 - h.length - t.length).fill(0), ...t]
}

const v4Of = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`

const isBlockedV6 = (address: string): boolean => {
  const g = groupsOf(address.split("%")[0]!)
  const zeroUpTo = (n: number) => g.slice(0, n).every((x) => x === 0)
  // IPv4-mapped ::ffff:a.b.c.d: the connection goes to the IPv4 address.
  if (zeroUpTo(5) && g[5] === 0xffff) return blockedV4.check(v4Of(g[6]!, g[7]!), "ipv4")
  // NAT64 64:ff9b::/96 reaches the IPv4 address in its last 32 bits, 6to4 2002::/16 the one after the prefix.
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return blockedV4.check(v4Of(g[6]!, g[7]!), "ipv4")
  if (g[0] === 0x2002) return blockedV4.check(v4Of(g[1]!, g[2]!), "ipv4")
  // Outside global unicast: unspecified, loopback, IPv4-compatible ::a.b.c.d, discard 100::/64,
  // local-use NAT64, ULA fc00::/7, link- and site-local, multicast, unassigned.
  if ((g[0]! & 0xe000) !== 0x2000) return true
  return blockedV6.check(g.map((x) => x.toString(16)).join(":"), "ipv6")
}

/** True for addresses no user-supplied URL may reach; anything that is not an IP address included. */
export const isBlockedAddress = (address: string): boolean => {
  switch (net.isIP(address)) {
    case 4:
      return blockedV4.check(address, "ipv4")
    case 6:
      return isBlockedV6(address)
    default:
      return true
  }
}

export type Resolver = (hostname: string) => Promise<ReadonlyArray<string>>

export const systemResolver: Resolver = (hostname) =>
  dns.promises.lookup(hostname, { all: true, verbatim: true }).then((list) => list.map((a) => a.address))

/** The host's DNS lookup failed (ENOTFOUND, EAI_AGAIN, ...): unlike a refusal, it may pass later. */
export class Unresolved extends Data.TaggedError("Unresolved")<{ readonly message: string }> {}

/**
 * Checks `raw` and returns the parsed URL; fails with Unresolved when the host does not resolve
 * (now), with a 422 naming the problem when the URL is refused. `field` names the request field.
 */
export const inspect = (raw: string, options: { readonly allowPrivate: boolean; readonly field: string; readonly resolve?: Resolver }) =>
  Effect.gen(function*() {
    const refuse = (why: string) => new Unprocessable({ message: `${options.field} refused: ${why}` })
    let url: URL
    try {
      url = new URL(raw)
    } catch {
      return yield* Effect.fail(refuse("not a valid absolute URL"))
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return yield* Effect.fail(refuse(`scheme ${url.protocol} is not allowed (http or https only)`))
    if (url.username || url.password) return yield* Effect.fail(refuse("credentials in URLs are not allowed"))
    if (url.port === "0") return yield* Effect.fail(refuse("port 0 is no port a server listens on"))
    if (options.allowPrivate) return url
    const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase()
    if (METADATA_HOSTS.has(host) || host === "localhost" || host.endsWith(".localhost") || host.endsWith(".internal")) {
      return yield* Effect.fail(refuse(`host ${host} is internal`))
    }
    const unresolved = () => new Unresolved({ message: `host ${host} does not resolve` })
    const addresses = net.isIP(host) !== 0
      ? [host]
      : yield* Effect.tryPromise({ try: () => (options.resolve ?? systemResolver)(host), catch: unresolved })
    if (addresses.length === 0) return yield* Effect.fail(unresolved())
    const bad = addresses.find(isBlockedAddress)
    // The address a name resolved to is not said: it would show a caller the gateway's internal DNS answers.
    if (bad) return yield* Effect.fail(refuse(`${bad === host ? `${host} is` : `${host} resolves to`} a private, loopback, link-local, reserved or metadata address`))
    return url
  })

/** `inspect` for requests: a host that does not resolve is refused too (422). */
export const check = (raw: string, options: { readonly allowPrivate: boolean; readonly field: string; readonly resolve?: Resolver }) =>
  Effect.catchTag(inspect(raw, options), "Unresolved", (e) => Effect.fail(new Unprocessable({ message: `${options.field} refused: ${e.message}` })))

// undici (for its connect-time DNS hook) is imported on the first guarded call: most processes make none.
const undici = once(() => import("undici"))

/** An HTTP agent whose DNS lookups refuse blocked addresses, so the checked answer is the one used. */
const guardedAgent = (AgentClass: typeof Agent, allowPrivate: boolean) =>
  new AgentClass({
    connect: {
      lookup: (hostname, options, callback) =>
        dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
          if (err) return callback(err, "", 4)
          const list = addresses as unknown as Array<dns.LookupAddress>
          const bad = allowPrivate ? undefined : list.find((a) => isBlockedAddress(a.address))
          if (bad) return callback(new Error(`refused: ${hostname} resolves to blocked address ${bad.address}`), "", 4)
          if ((options as { all?: boolean }).all) return (callback as any)(null, list)
          callback(null, list[0]!.address, list[0]!.family)
        })
    }
  })

/** fetch through the guarded agent (made on the first call), and closing that agent. */
export interface GuardedClient {
  readonly fetch: (url: string | URL, init: Omit<RequestInit, "dispatcher">) => Promise<Response>
  readonly close: () => Promise<void>
}

export const guardedClient = (allowPrivate: boolean): GuardedClient => {
  let agent: Agent | undefined
  return {
    fetch: async (url, init) => {
      const { Agent, fetch } = await undici.get()
      agent ??= guardedAgent(Agent, allowPrivate)
      return fetch(url, { ...init, dispatcher: agent })
    },
    close: async () => {
      await agent?.close()
    }
  }
}

const clients = new Map<boolean, GuardedClient>()

/**
 * GETs a URL an outsider supplied (a vendor's result link) as JSON: checked first (`check`), then
 * fetched through the guarded agent so the address connected to is the checked kind, with
 * redirects refused rather than followed (a redirect could lead anywhere) and the reply read up
 * to `limit` bytes.
 */
export const guardedGetJson = (raw: string, options: { readonly allowPrivate: boolean; readonly field: string; readonly limit: number }) =>
  Effect.flatMap(check(raw, options), (url) =>
    Effect.tryPromise({
      try: async (signal) => {
        let client = clients.get(options.allowPrivate)
        if (client === undefined) clients.set(options.allowPrivate, (client = guardedClient(options.allowPrivate)))
        const res = await client.fetch(url, { headers: { accept: "application/json" }, signal, redirect: "manual" })
        if (res.status >= 300 && res.status < 400) throw new Error(`${options.field} redirects (HTTP ${res.status}); redirects are not followed`)
        const text = new TextDecoder().decode(await readWebBody(res.body as ReadableStream<Uint8Array> | null, options.limit))
        if (!res.ok) throw new Error(`${options.field} answered HTTP ${res.status}: ${shownUpstreamText(text, 200)}`)
        const parsed = parseUpstreamJson(text)
        if ("value" in parsed) return parsed.value
        throw new Error(parsed.malformed ? `${options.field} is not JSON` : `${options.field} is not usable JSON: ${parsed.problem}`)
      },
      catch: (e) => new Unprocessable({ message: `${options.field} could not be read: ${(e as Error)?.message ?? String(e)}` })
    }))
