import { useState } from 'preact/hooks'
import { call, coffer, type Asset } from '../api.ts'
import { formatQuantity, formatValue } from '../format.ts'
import { ASSETS_TEXT as T } from '../text.ts'
import { Done, Empty, ErrorNotice, Field, Loading, Page, useAction, useConfirm, useLoad } from '../ui.tsx'
import { ASSET_NAME, check, parseAssetValue } from '../validate.ts'

function checkAssetName(name: string): string {
  check(ASSET_NAME.test(name), T.badName)
  return name
}

/** Assets: create, rename, revalue, delete. Issuing and burning are on a wallet's page. */
export function Assets() {
  const overview = useLoad(() => call(coffer.GET('/admin/overview')), [], ['A003'])
  const [name, setName] = useState('')
  const [value, setValue] = useState('')
  const [done, setDone] = useState('')
  const { run, pending, error } = useAction(['A003'])

  const create = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      setDone('')
      const asset = await call(coffer.POST('/assets', { body: { name: checkAssetName(name.trim()), value: parseAssetValue(value) } }))
      setName('')
      setValue('')
      await overview.reload()
      setDone(T.created(asset.name))
    })
  }

  return (
    <Page title={T.title}>
      {done && <Done>{done}</Done>}
      <ErrorNotice error={error} />
      <h2>{T.newAsset}</h2>
      <form onSubmit={create} noValidate>
        <Field label={T.name} value={name} onValue={setName} hint={T.nameHint} autoComplete="off" />
        <Field label={T.valueEach} value={value} onValue={setValue} inputMode="decimal" hint={T.valueHint} autoComplete="off" />
        <button type="submit" class="primary" disabled={pending}>
          {T.create}
        </button>
      </form>
      <h2>{T.all}</h2>
      <ErrorNotice error={overview.error} />
      {overview.loading && <Loading what={T.loading} />}
      {overview.data && overview.data.assets.length === 0 && <Empty>{T.none}</Empty>}
      {overview.data && overview.data.assets.length > 0 && (
        <ul class="cards">
          {overview.data.assets.map((entry) => (
            <AssetCard
              key={entry.asset.id}
              asset={entry.asset}
              circulating={entry.circulating}
              holders={entry.holders}
              changed={overview.reload}
            />
          ))}
        </ul>
      )}
    </Page>
  )
}

function AssetCard({
  asset,
  circulating,
  holders,
  changed,
}: {
  asset: Asset
  circulating: number
  holders: number
  changed: () => Promise<void>
}) {
  const [name, setName] = useState('')
  const [value, setValue] = useState('')
  const [done, setDone] = useState('')
  const { run, pending, error } = useAction(['A003'])
  const confirm = useConfirm()
  const id = String(asset.id)

  const rename = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      const renamed = await call(coffer.PUT('/assets/{id}/name', { params: { path: { id } }, body: { name: checkAssetName(name.trim()) } }))
      setName('')
      setDone(T.renamed(renamed.name))
      await changed()
    })
  }
  const revalue = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      const revalued = await call(coffer.PUT('/assets/{id}/value', { params: { path: { id } }, body: { value: parseAssetValue(value) } }))
      setValue('')
      setDone(T.revalued(formatValue(revalued.value)))
      await changed()
    })
  }
  const remove = async () => {
    const yes = await confirm({
      title: T.deleteTitle(asset.name),
      body: <p>{T.deleteBody}</p>,
      action: T.deleteAsset,
      tone: 'danger',
    })
    if (yes) await run(async () => (await call(coffer.DELETE('/assets/{id}', { params: { path: { id } } })), await changed()))
  }

  return (
    <li>
      <h3>{asset.name}</h3>
      <p class="meta">{T.facts(formatValue(asset.value), formatQuantity(circulating), holders)}</p>
      {done && <Done>{done}</Done>}
      <ErrorNotice error={error} />
      <form onSubmit={rename} noValidate class="inline">
        <Field label={T.newName(asset.name)} value={name} onValue={setName} autoComplete="off" />
        <button type="submit" disabled={pending}>
          {T.rename}
        </button>
      </form>
      <form onSubmit={revalue} noValidate class="inline">
        <Field label={T.newValue(asset.name)} value={value} onValue={setValue} inputMode="decimal" autoComplete="off" />
        <button type="submit" disabled={pending}>
          {T.setValue}
        </button>
      </form>
      <button type="button" class="danger" disabled={pending} onClick={remove} aria-label={T.deleteLabel(asset.name)}>
        {T.delete}
      </button>
    </li>
  )
}
