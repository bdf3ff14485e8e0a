import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Webhook } from 'standardwebhooks'
import { retryDelayMs } from '../../src/events/delivery.sender.ts'
import { formatEvent } from '../../src/events/event-hub.ts'
import { newWebhookSecret, webhookHeaders } from '../../src/events/signature.ts'
import { checkWebhookUrlForm, isPublicAddress } from '../../src/events/ssrf.ts'

describe('webhook target addresses', () => {
  const cases: [string, boolean][] = [
    ['93.184.215.14', true],
    ['8.8.8.8', true],
    ['100.63.255.255', true],
    ['100.128.0.1', true],
    ['172.15.255.255', true],
    ['172.32.0.1', true],
    ['0.0.0.0', false],
    ['127.0.0.1', false],
    ['127.255.255.254', false],
    ['10.20.30.40', false],
    ['100.64.0.1', false],
    ['100.127.255.255', false],
    ['169.254.169.254', false],
    ['172.16.0.1', false],
    ['172.31.255.255', false],
    ['192.168.0.1', false],
    ['192.0.2.1', false],
    ['198.18.0.1', false],
    ['203.0.113.9', false],
    ['224.0.0.251', false],
    ['239.255.255.250', false],
    ['240.0.0.1', false],
    ['255.255.255.255', false],
    ['2606:4700:4700::1111', true],
    ['2001:4860:4860::8888', true],
    ['[2606:4700:4700::1111]', true],
    ['::ffff:8.8.8.8', true],
    ['64:ff9b::808:808', true],
    ['2002:808:808::1', true],
    ['::', false],
    ['::1', false],
    ['[::1]', false],
    ['::ffff:127.0.0.1', false],
    ['::ffff:7f00:1', false],
    ['::ffff:10.0.0.1', false],
    ['::ffff:169.254.169.254', false],
    ['::127.0.0.1', false],
    ['64:ff9b::7f00:1', false],
    ['2002:7f00:1::1', false],
    ['2002:c0a8:101::1', false],
    ['fe80::1', false],
    ['fe80::1%eth0', false],
    ['fc00::1', false],
    ['fd12:3456:789a::1', false],
    ['fec0::1', false],
    ['ff02::1', false],
    ['2001:db8::1', false],
    ['2001::1', false],
    ['100::1', false],
    ['3fff::1', false],
    ['not-an-ip', false],
    ['1.2.3', false],
  ]
  for (const [address, expected] of cases) {
    it(`${address} is ${expected ? 'public' : 'refused'}`, () => {
      assert.equal(isPublicAddress(address), expected)
    })
  }
})

describe('webhook URL form', () => {
  it('accepts absolute http and https URLs and normalizes them', () => {
    const form = checkWebhookUrlForm('HTTPS://Example.COM:443/a b?x=1')
    assert.ok('url' in form)
    assert.equal(form.url.toString(), 'https://example.com/a%20b?x=1')
  })

  it('names the reason for anything else', () => {
    for (const [raw, reason] of [
      ['example.com/hook', /absolute/],
      ['ws://example.com/', /http and https/],
      ['mailto:a@example.com', /http and https/],
      ['https://a:b@example.com/', /credentials/],
      [`https://example.com/${'x'.repeat(493)}`, /512/],
    ] as const) {
      const form = checkWebhookUrlForm(raw)
      assert.ok('reason' in form, raw)
      assert.match(form.reason, reason)
    }
  })
})

describe('webhook signatures', () => {
  it('verify with the standardwebhooks package', () => {
    const secret = newWebhookSecret()
    assert.match(secret, /^whsec_/)
    assert.equal(Buffer.from(secret.slice(6), 'base64').length, 24)
    const body = JSON.stringify({ type: 'transaction.sent', id: 'evt_1', data: { memo: 'ünïcode ✓' } })
    const headers = webhookHeaders(secret, 'evt_1', body)
    assert.deepEqual(new Webhook(secret).verify(body, headers), JSON.parse(body))
    assert.throws(() => new Webhook(secret).verify(`${body} `, headers))
    assert.throws(() => new Webhook(newWebhookSecret()).verify(body, headers))
  })

  it('match a known vector', () => {
    // The example of the Standard Webhooks specification.
    const headers = webhookHeaders(
      'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
      'msg_p5jXN8AQM9LWM0D4loKWxJek',
      '{"test": 2432232314}',
      1614265330_000,
    )
    assert.equal(headers['webhook-signature'], 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=')
    assert.equal(headers['webhook-timestamp'], '1614265330')
  })
})

describe('retry schedule jitter', () => {
  it('stays within ±20 % of the configured delay', () => {
    assert.equal(retryDelayMs(5, 0), 4_000)
    assert.equal(retryDelayMs(5, 0.5), 5_000)
    assert.equal(retryDelayMs(5, 0.999999), 6_000)
    assert.equal(retryDelayMs(0.1, 0.5), 100)
  })
})

describe('SSE frames', () => {
  it('carry the sequence id, the type and the payload on one data line', () => {
    const payload = JSON.stringify({ type: 'transaction.received', id: 'evt_x', data: { memo: 'two\nlines' } })
    const frame = formatEvent({ id: 42, wallet_id: 7, type: 'transaction.received', payload })
    assert.equal(frame, `id: 42\nevent: transaction.received\ndata: ${payload}\n\n`)
    assert.equal(frame.split('\n').length, 5)
  })
})
