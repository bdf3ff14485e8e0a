import { useState } from 'preact/hooks'
import { call, coffer } from '../api.ts'
import { formatQuantity } from '../format.ts'
import { ErrorNotice, Page, useAction } from '../ui.tsx'

type Report = Awaited<ReturnType<typeof verify>>
const verify = () => call(coffer.GET('/admin/verification'))

/** Runs the check of `coffer verify` and shows its result. */
export function Verification() {
  const [report, setReport] = useState<Report | undefined>()
  const { run, pending, error } = useAction(['A003'])
  return (
    <Page title="Verification">
      <p>
        Recomputes every balance from the journal and checks the ledger’s rules: each asset sums to zero counting <strong>mint</strong>,
        nothing but mint is negative, and every entry refers to wallets and assets that exist. It reads one consistent snapshot, so it can
        run while people send.
      </p>
      <button type="button" class="primary" disabled={pending} onClick={() => run(async () => setReport(await verify()))}>
        {pending ? 'Checking…' : 'Run the check'}
      </button>
      <ErrorNotice error={error} />
      <div role="status">
        {report &&
          (report.ok ? (
            <div class="notice done">
              <p>
                <strong>The ledger is consistent.</strong> Checked {formatQuantity(report.transactions)} transactions,{' '}
                {formatQuantity(report.holdings)} holdings and {formatQuantity(report.assets)} assets.
              </p>
            </div>
          ) : (
            <div class="notice error">
              <p>
                <strong>The check found {formatQuantity(report.problems.length)} problems.</strong> Checked{' '}
                {formatQuantity(report.transactions)} transactions.
              </p>
              <ul>
                {report.problems.map((problem, index) => (
                  <li key={index}>{problem}</li>
                ))}
              </ul>
            </div>
          ))}
      </div>
    </Page>
  )
}
