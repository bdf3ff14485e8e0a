import crypto from 'node:crypto'

/** Standard Webhooks signing (https://www.standardwebhooks.com): `webhook-id`, `webhook-timestamp`, `webhook-signature`. */

const SECRET_PREFIX = 'whsec_'

/** A new signing secret: `whsec_` + base64 of 24 random bytes (192 bits). */
export function newWebhookSecret(): string {
  return `${SECRET_PREFIX}${crypto.randomBytes(24).toString('base64')}`
}

/** `v1,` + base64 HMAC-SHA256 of `id.timestamp.body`, keyed with the secret's decoded bytes. */
function signPayload(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64')
  const mac = crypto.createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')
  return `v1,${mac}`
}

/** The three Standard Webhooks headers for one attempt; the timestamp is the attempt's, in seconds. */
export function webhookHeaders(secret: string, id: string, body: string, now = Date.now()): Record<string, string> {
  const timestamp = Math.floor(now / 1000)
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signPayload(secret, id, timestamp, body),
  }
}
