import dns from 'node:dns'
import net from 'node:net'

/** The SSRF guard (W010): public unicast addresses only, checked when set and on every connection (DNS rebinding). */

interface Range {
  bytes: number[]
  bits: number
}

function range(cidr: string): Range {
  const [address, bits] = cidr.split('/')
  const bytes = net.isIPv4(address) ? ipv4Bytes(address) : ipv6Bytes(address)
  if (!bytes) throw new Error(`bad range ${cidr}`)
  return { bytes, bits: Number(bits) }
}

function inRange(bytes: number[], { bytes: prefix, bits }: Range): boolean {
  if (bytes.length !== prefix.length) return false
  for (let bit = 0; bit < bits; bit += 8) {
    const take = Math.min(8, bits - bit)
    const mask = (0xff << (8 - take)) & 0xff
    if ((bytes[bit / 8] & mask) !== (prefix[bit / 8] & mask)) return false
  }
  return true
}

/** IANA special-purpose IPv4 blocks that a public service never needs to call. */
const IPV4_BLOCKED = [
  '0.0.0.0/8', // "this network", unspecified
  '10.0.0.0/8', // private
  '100.64.0.0/10', // carrier-grade NAT
  '127.0.0.0/8', // loopback
  '169.254.0.0/16', // link-local (cloud metadata lives here)
  '172.16.0.0/12', // private
  '192.0.0.0/24', // IETF protocol assignments
  '192.0.2.0/24', // documentation
  '192.88.99.0/24', // 6to4 relay anycast
  '192.168.0.0/16', // private
  '198.18.0.0/15', // benchmarking
  '198.51.100.0/24', // documentation
  '203.0.113.0/24', // documentation
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved, broadcast
].map(range)

/** Only global unicast (2000::/3) is public; within it these blocks are not. */
const IPV6_GLOBAL = range('2000::/3')
const IPV6_BLOCKED = [
  '2001::/23', // IETF protocol assignments (Teredo, ORCHID, …)
  '2001:db8::/32', // documentation
  '3fff::/20', // documentation
].map(range)
/** Prefixes that carry an IPv4 address; the embedded address decides. */
const IPV4_MAPPED = range('::ffff:0:0/96')
const IPV4_COMPATIBLE = range('::/96')
const NAT64 = range('64:ff9b::/96')
const SIX_TO_FOUR = range('2002::/16')

function ipv4Bytes(address: string): number[] | undefined {
  if (!net.isIPv4(address)) return undefined
  return address.split('.').map(Number)
}

/** The 16 bytes of an IPv6 address (zone ids ignored), or undefined when it is not one. */
function ipv6Bytes(address: string): number[] | undefined {
  const bare = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '')
  if (!net.isIPv6(bare)) return undefined
  // A trailing dotted IPv4 (`::ffff:127.0.0.1`) becomes its two hex groups.
  const text = bare.replace(
    /(\d+)\.(\d+)\.(\d+)\.(\d+)$/,
    (_match, a, b, c, d) => `${((Number(a) << 8) | Number(b)).toString(16)}:${((Number(c) << 8) | Number(d)).toString(16)}`,
  )
  const [head, rest] = text.includes('::') ? text.split('::') : [text, undefined]
  const groups = (part: string) => (part === '' ? [] : part.split(':').map((group) => parseInt(group, 16)))
  const first = groups(head)
  const last = rest === undefined ? [] : groups(rest)
  const missing = 8 - first.length - last.length
  const words = rest === undefined ? first : [...first, ...new Array(missing).fill(0), ...last]
  if (words.length !== 8) return undefined
  return words.flatMap((word) => [word >> 8, word & 0xff])
}

function isPublicIpv4(bytes: number[]): boolean {
  return !IPV4_BLOCKED.some((blocked) => inRange(bytes, blocked))
}

function isPublicIpv6(bytes: number[]): boolean {
  if (inRange(bytes, IPV4_MAPPED) || inRange(bytes, NAT64)) return isPublicIpv4(bytes.slice(12))
  // ::/96 holds :: and ::1 as well as the deprecated IPv4-compatible form: none is public.
  if (inRange(bytes, IPV4_COMPATIBLE)) return false
  if (inRange(bytes, SIX_TO_FOUR)) return isPublicIpv4(bytes.slice(2, 6))
  return inRange(bytes, IPV6_GLOBAL) && !IPV6_BLOCKED.some((blocked) => inRange(bytes, blocked))
}

/** True for a public unicast IP literal, also through IPv4-mapped, NAT64 or 6to4 forms; unparsable is not public. */
export function isPublicAddress(address: string): boolean {
  const v4 = ipv4Bytes(address)
  if (v4) return isPublicIpv4(v4)
  const v6 = ipv6Bytes(address)
  return v6 ? isPublicIpv6(v6) : false
}

/** The URL's host as an IP literal without brackets, or undefined when it is a name. */
export function ipLiteral(hostname: string): string | undefined {
  const bare = hostname.replace(/^\[|\]$/g, '')
  return net.isIP(bare) ? bare : undefined
}

/** Names that mean "this machine" without asking DNS (RFC 6761). */
export function isLocalName(hostname: string): boolean {
  const name = hostname.toLowerCase().replace(/\.$/, '')
  return name === 'localhost' || name.endsWith('.localhost')
}

const MAX_WEBHOOK_URL_LENGTH = 512

/** Why a webhook URL is refused (the W010 detail), or undefined when its form is fine. */
export function checkWebhookUrlForm(raw: string): { url: URL } | { reason: string } {
  if (raw.length > MAX_WEBHOOK_URL_LENGTH) return { reason: `the URL is longer than ${MAX_WEBHOOK_URL_LENGTH} characters` }
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return { reason: 'not an absolute URL' }
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { reason: 'only http and https URLs are allowed' }
  if (url.hostname === '') return { reason: 'the URL has no host' }
  if (url.username !== '' || url.password !== '') return { reason: 'credentials in the URL are not supported; check the signature instead' }
  return { url }
}

export class AddressNotAllowedError extends Error {
  readonly code = 'ERR_WEBHOOK_ADDRESS_NOT_ALLOWED'
  constructor(
    readonly hostname: string,
    readonly address?: string,
  ) {
    super(address ? `${hostname} resolves to ${address}, which is not a public address` : `${hostname} is not a public host`)
  }
}

/** Resolves a host name to every address it has (A and AAAA). */
async function resolveAll(hostname: string): Promise<dns.LookupAddress[]> {
  return dns.promises.lookup(hostname, { all: true, verbatim: true })
}

/** Throws AddressNotAllowedError (or the resolver's error) unless every address of the host is public. */
export async function assertPublicHost(hostname: string): Promise<void> {
  const literal = ipLiteral(hostname)
  if (literal !== undefined) {
    if (!isPublicAddress(literal)) throw new AddressNotAllowedError(hostname, literal)
    return
  }
  if (isLocalName(hostname)) throw new AddressNotAllowedError(hostname)
  const addresses = await resolveAll(hostname)
  if (addresses.length === 0) throw Object.assign(new Error(`${hostname} has no addresses`), { code: 'ENOTFOUND' })
  const bad = addresses.find((entry) => !isPublicAddress(entry.address))
  if (bad) throw new AddressNotAllowedError(hostname, bad.address)
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void

/** A socket `lookup` that connects to exactly the addresses it checked (no second resolution to rebind). */
export function guardedLookup(hostname: string, options: dns.LookupOptions, callback: LookupCallback): void {
  if (isLocalName(hostname)) {
    callback(new AddressNotAllowedError(hostname), '', 0)
    return
  }
  dns.lookup(hostname, { all: true, verbatim: true, family: options.family, hints: options.hints }, (error, addresses) => {
    if (error) return callback(error, '', 0)
    if (addresses.length === 0) return callback(Object.assign(new Error(`${hostname} has no addresses`), { code: 'ENOTFOUND' }), '', 0)
    const bad = addresses.find((entry) => !isPublicAddress(entry.address))
    if (bad) return callback(new AddressNotAllowedError(hostname, bad.address), '', 0)
    if (options.all) return callback(null, addresses)
    callback(null, addresses[0].address, addresses[0].family)
  })
}
