/**
 * `DATABASE_URL` for PostgreSQL in libpq's URI form, one host or several:
 * `postgres://user:password@h1:5432,h2:5432/db?target_session_attrs=read-write`. node-postgres
 * reads a single host only, so the host list is taken apart here: each host gets a URL of its own
 * (everything else unchanged) for the driver, and `postgres.ts` picks the host to connect to.
 */

export interface PostgresHost {
  host: string
  port: number
}

/**
 * Which server a connection may use (libpq's values that make sense for a service that writes):
 * `any` the first that accepts the connection, `read-write` one that accepts writes (not a standby
 * in recovery, `transaction_read_only` off), `primary` one not in recovery.
 */
export type TargetSessionAttrs = 'any' | 'read-write' | 'primary'

export interface PostgresUrl {
  hosts: PostgresHost[]
  targetSessionAttrs: TargetSessionAttrs
  /** A single-host URL for `host` that node-postgres reads: the same user, database and parameters. */
  urlFor(host: PostgresHost): string
}

const TARGETS = ['any', 'read-write', 'primary']
const REFUSED_TARGETS = ['read-only', 'standby', 'prefer-standby']
/** A host name, an IPv4 address, a bracketed IPv6 address, or a percent-encoded socket directory. */
const HOST = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~%-]+)$/

/**
 * Parses a PostgreSQL URL; throws an Error whose message says what is wrong (the caller names the
 * variable). Without `target_session_attrs`, a URL of several hosts means `read-write` (the
 * service writes: a standby is never what it wants), one host means `any`, as for libpq.
 */
export function parsePostgresUrl(raw: string): PostgresUrl {
  const match = /^(postgres(?:ql)?):\/\/(?:([^@/?#]*)@)?([^/?#]*)(.*)$/.exec(raw)
  if (!match) throw new Error('must start with postgres:// or postgresql://')
  const [, scheme, userinfo, hostList, rest] = match
  if (hostList === '') throw new Error('must name a host, e.g. postgres://user@db.example.com:5432/coffer')
  // Entries are never echoed: a password with an unencoded "/" or "@" would end up in one.
  const hosts = hostList.split(',').map((entry, index) => {
    const parts = /^(\[[^\]]*\]|[^:]*)(?::(\d*))?$/.exec(entry)
    if (!parts || parts[1] === '' || !HOST.test(parts[1])) throw new Error(`has a malformed host list: entry ${index + 1} is not host or host:port (hosts are separated by commas)`)
    const port = parts[2] === undefined || parts[2] === '' ? 5432 : Number(parts[2])
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`has a malformed host list: the port of entry ${index + 1} must be 1-65535`)
    return { host: parts[1], port }
  })
  const queryStart = rest.indexOf('?')
  const path = queryStart === -1 ? rest : rest.slice(0, queryStart)
  const params = new URLSearchParams(queryStart === -1 ? '' : rest.slice(queryStart + 1))
  const given = params.get('target_session_attrs')
  params.delete('target_session_attrs')
  if (given !== null && !TARGETS.includes(given)) {
    const why = REFUSED_TARGETS.includes(given) ? 'the service writes, so it needs read-write, primary or any' : `must be one of ${TARGETS.join(', ')}`
    throw new Error(`has target_session_attrs=${given}: ${why}`)
  }
  const targetSessionAttrs = (given ?? (hosts.length > 1 ? 'read-write' : 'any')) as TargetSessionAttrs
  const query = params.size > 0 ? `?${params.toString()}` : ''
  const urlFor = (host: PostgresHost) => `${scheme}://${userinfo === undefined ? '' : `${userinfo}@`}${host.host}:${host.port}${path}${query}`
  for (const host of hosts) {
    try {
      new URL(urlFor(host))
    } catch {
      throw new Error('is not a valid URL')
    }
  }
  return { hosts, targetSessionAttrs, urlFor }
}
