/**
 * The client address that per-address limits count. X-Forwarded-For is client-controlled except
 * for the entries our own proxies appended, so it is read only when `trustedProxies` (the number
 * of reverse proxies in front of aigw, AIGW_TRUST_PROXY) says so, and then only at the position
 * the nearest trusted proxy wrote: the `trustedProxies`-th entry from the right.
 */
import { Option } from "effect"
import { isIP } from "node:net"

export const clientAddress = (
  socketAddress: Option.Option<string>,
  forwardedFor: string | undefined,
  trustedProxies: number
): Option.Option<string> => {
  if (trustedProxies <= 0 || forwardedFor === undefined) return Option.flatMap(socketAddress, limitKey)
  const entries = forwardedFor.split(",").map((s) => s.trim())
  // Fewer entries than proxies: the request did not come through all of them; use the peer.
  const entry = entries.length >= trustedProxies ? entries[entries.length - trustedProxies]! : undefined
  return entry === undefined ? Option.flatMap(socketAddress, limitKey) : limitKey(entry)
}

/**
 * An address as a limit key: IPv4 as is (also when IPv4-mapped IPv6), IPv6 by its /64 prefix,
 * since one subscriber usually holds a whole /64. None for anything that is not an IP address.
 */
export const limitKey = (address: string): Option.Option<string> => {
  const a = address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, "")
  const kind = isIP(a)
  if (kind === 4) return Option.some(a)
  if (kind !== 6) return Option.none()
  const [head, tail = ""] = a.toLowerCase().split("%")[0]!.split("::") as [string, string?]
  const left = head === "" ? [] : head.split(":")
  const right = a.includes("::") ? (tail === "" ? [] : tail.split(":")) : []
  const groups = [...left, ...Array(8 - left.length - right.length).fill("0"), ...right]
  return Option.some(`${groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, "")).join(":")}::/64`)
}
