import { useState } from 'preact/hooks'
import { call, coffer } from '../api.ts'
import { formatQuantity } from '../format.ts'
import { VERIFICATION_TEXT as T } from '../text.ts'
import { ErrorNotice, Page, useAction } from '../ui.tsx'

type Report = Awaited<ReturnType<typeof verify>>
const verify = () => call(coffer.GET('/admin/verification'))

/** Runs the check of `coffer verify` and shows its result. */
export function Verification() {
  const [report, setReport] = useState<Report | undefined>()
  const { run, pending, error } = useAction(['A003'])
  return (
    <Page title={T.title}>
      <p>
        {T.intro[0]}
        <strong>{T.mint}</strong>
        {T.intro[1]}
      </p>
      <button type="button" class="primary" disabled={pending} onClick={() => run(async () => setReport(await verify()))}>
        {pending ? T.checking : T.run}
      </button>
      <ErrorNotice error={error} />
      <div role="status">
        {report &&
          (report.ok ? (
            <div class="notice done">
              <p>
                <strong>{T.consistent}</strong>
                {T.checked(formatQuantity(report.transactions), formatQuantity(report.holdings), formatQuantity(report.assets))}
              </p>
            </div>
          ) : (
            <div class="notice error">
              <p>
                <strong>{T.problems(report.problems.length)}</strong>
                {T.checkedTransactions(formatQuantity(report.transactions))}
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
