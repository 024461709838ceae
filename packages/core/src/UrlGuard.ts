/**
 * SSRF guard for URLs the gateway will fetch or POST to on a user's behalf (webhook
 * callbacks, seed images): http(s) only, and no loopback, private, link-local, CGNAT,
 * multicast or cloud-metadata targets, checked on every address the name resolves to.
 * `AIGW_ALLOW_PRIVATE_URLS=true` lifts the address rule (tests, single-host setups).
 */
import { Effect } from "effect"
import * as dns from "node:dns"
import * as net from "node:net"
import { Agent } from "undici"
import { Unprocessable } from "./Errors.ts"

const blocked = new net.BlockList()
for (const [prefix, bits] of [
  ["0.0.0.0", 8], ["10.0.0.0", 8], ["100.64.0.0", 10], ["127.0.0.0", 8], ["169.254.0.0", 16], ["172.16.0.0", 12],
  ["192.0.0.0", 24], ["192.0.2.0", 24], ["192.168.0.0", 16], ["198.18.0.0", 15], ["198.51.100.0", 24],
  ["203.0.113.0", 24], ["224.0.0.0", 4], ["240.0.0.0", 4]
] as const) blocked.addSubnet(prefix, bits, "ipv4")
for (const [prefix, bits] of [["::", 128], ["::1", 128], ["fc00::", 7], ["fe80::", 10], ["ff00::", 8], ["64:ff9b::", 96], ["2001:db8::", 32]] as const) {
  blocked.addSubnet(prefix, bits, "ipv6")
}

const METADATA_HOSTS = new Set(["metadata.google.internal", "metadata", "metadata.azure.com", "instance-data"])

/** True for addresses no user-supplied URL may reach. IPv4-mapped IPv6 is checked as IPv4. */
export const isBlockedAddress = (address: string): boolean => {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (mapped) return blocked.check(mapped[1]!, "ipv4")
  const family = net.isIP(address)
  if (family === 0) return true
  return blocked.check(address, family === 4 ? "ipv4" : "ipv6")
}

export type Resolver = (hostname: string) => Promise<ReadonlyArray<string>>

export const systemResolver: Resolver = (hostname) =>
  dns.promises.lookup(hostname, { all: true, verbatim: true }).then((list) => list.map((a) => a.address))

/**
 * Checks `raw` and returns the parsed URL, or fails with a 422 naming the problem.
 * `field` names the request field in the message.
 */
export const check = (raw: string, options: { readonly allowPrivate: boolean; readonly field: string; readonly resolve?: Resolver }) =>
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
    if (options.allowPrivate) return url
    const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase()
    if (METADATA_HOSTS.has(host) || host === "localhost" || host.endsWith(".localhost") || host.endsWith(".internal")) {
      return yield* Effect.fail(refuse(`host ${host} is internal`))
    }
    const addresses = net.isIP(host) !== 0
      ? [host]
      : yield* Effect.tryPromise({ try: () => (options.resolve ?? systemResolver)(host), catch: () => refuse(`host ${host} does not resolve`) })
    if (addresses.length === 0) return yield* Effect.fail(refuse(`host ${host} does not resolve`))
    const bad = addresses.find(isBlockedAddress)
    if (bad) return yield* Effect.fail(refuse(`${host} resolves to ${bad}, a private, loopback, link-local or metadata address`))
    return url
  })

/** An HTTP agent whose DNS lookups refuse blocked addresses, so the checked answer is the one used. */
export const guardedAgent = (allowPrivate: boolean) =>
  new Agent({
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
