import { call, CofferError, coffer, importJournalKey, verifyCheckpoint } from '../api.ts'
import { formatFullTime, formatQuantity } from '../format.ts'
import { JOURNAL_TEXT as T } from '../text.ts'
import { Empty, ErrorNotice, useLoad } from '../ui.tsx'

/** The journal's latest signed checkpoint, its signature checked here against the journal's public key. */
export function LatestCheckpoint() {
  const latest = useLoad(
    async () => {
      const [{ public_key: publicKey }, checkpoint] = await Promise.all([
        call(coffer.GET('/journal/key')),
        call(coffer.GET('/journal/checkpoint')).catch((caught: unknown) => {
          if (caught instanceof CofferError && caught.code === 'J000') return undefined
          throw caught
        }),
      ])
      return checkpoint && { checkpoint, signed: await verifyCheckpoint(await importJournalKey(publicKey), checkpoint) }
    },
    [],
    ['A003'],
  )
  return (
    <section aria-labelledby="checkpoint">
      <h2 id="checkpoint">{T.checkpoint}</h2>
      <ErrorNotice error={latest.error} />
      {latest.data === undefined && !latest.loading && !latest.error && <Empty>{T.noCheckpoint}</Empty>}
      {latest.data && (
        <dl class="facts">
          <div>
            <dt>{T.checkpointFacts.size}</dt>
            <dd>{formatQuantity(latest.data.checkpoint.size)}</dd>
          </div>
          <div>
            <dt>{T.checkpointFacts.signedAt}</dt>
            <dd>{formatFullTime(latest.data.checkpoint.signed_at)}</dd>
          </div>
          <div>
            <dt>{T.checkpointFacts.root}</dt>
            <dd>
              <code class="token">{latest.data.checkpoint.root}</code>
            </dd>
          </div>
          <div>
            <dt>{T.checkpointFacts.signature}</dt>
            <dd>{latest.data.signed ? T.signatureGood : <strong>{T.signatureBad}</strong>}</dd>
          </div>
        </dl>
      )}
    </section>
  )
}
