/**
 * Headers of every response, errors included: browsers take a body only as the type it is sent
 * as (never sniffing JSON into HTML or script), and no other site may frame any page. The
 * console adds its own strict Content-Security-Policy, with `frame-ancestors 'none'` too (`console.ts`).
 */
export const SECURITY_HEADERS = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'content-security-policy': "frame-ancestors 'none'",
} as const

/** The same headers as raw HTTP lines, for answers written straight to the socket. */
export const SECURITY_HEADER_LINES = Object.entries(SECURITY_HEADERS)
  .map(([name, value]) => `${name}: ${value}\r\n`)
  .join('')
