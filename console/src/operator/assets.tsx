import { useState } from 'preact/hooks'
import { call, coffer, type Asset } from '../api.ts'
import { formatQuantity, formatValue } from '../format.ts'
import { Done, Empty, ErrorNotice, Field, Loading, Page, useAction, useConfirm, useLoad } from '../ui.tsx'
import { ASSET_NAME, check, parseAssetValue } from '../validate.ts'

const NAME_RULE = '1 to 32 letters, digits, _ or -'

function checkAssetName(name: string): string {
  check(ASSET_NAME.test(name), `An asset name is ${NAME_RULE}.`)
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
      setDone(`Asset ${asset.name} created. Issue it from a wallet’s page.`)
    })
  }

  return (
    <Page title="Assets">
      {done && <Done>{done}</Done>}
      <ErrorNotice error={error} />
      <h2>New asset</h2>
      <form onSubmit={create} noValidate>
        <Field label="Asset name" value={name} onValue={setName} hint={NAME_RULE} autoComplete="off" />
        <Field
          label="Value each"
          value={value}
          onValue={setValue}
          inputMode="decimal"
          hint="a number of 0 or more, for display, like 1.5"
          autoComplete="off"
        />
        <button type="submit" class="primary" disabled={pending}>
          Create asset
        </button>
      </form>
      <h2>All assets</h2>
      <ErrorNotice error={overview.error} />
      {overview.loading && <Loading what="assets" />}
      {overview.data && overview.data.assets.length === 0 && <Empty>No assets yet.</Empty>}
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
      setDone(`Renamed to ${renamed.name}.`)
      await changed()
    })
  }
  const revalue = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      const revalued = await call(coffer.PUT('/assets/{id}/value', { params: { path: { id } }, body: { value: parseAssetValue(value) } }))
      setValue('')
      setDone(`Value set to ${formatValue(revalued.value)}.`)
      await changed()
    })
  }
  const remove = async () => {
    const yes = await confirm({
      title: `Delete asset ${asset.name}?`,
      body: (
        <p>
          It disappears from the asset list; its past transactions stay in the journal. An asset that any wallet still holds cannot be
          deleted: burn it first.
        </p>
      ),
      action: 'Delete asset',
      tone: 'danger',
    })
    if (yes) await run(async () => (await call(coffer.DELETE('/assets/{id}', { params: { path: { id } } })), await changed()))
  }

  return (
    <li>
      <h3>{asset.name}</h3>
      <p class="meta">
        Value each {formatValue(asset.value)} · {formatQuantity(circulating)} circulating among {formatQuantity(holders)} wallet
        {holders === 1 ? '' : 's'}
      </p>
      {done && <Done>{done}</Done>}
      <ErrorNotice error={error} />
      <form onSubmit={rename} noValidate class="inline">
        <Field label={`New name for ${asset.name}`} value={name} onValue={setName} autoComplete="off" />
        <button type="submit" disabled={pending}>
          Rename
        </button>
      </form>
      <form onSubmit={revalue} noValidate class="inline">
        <Field label={`New value of ${asset.name}`} value={value} onValue={setValue} inputMode="decimal" autoComplete="off" />
        <button type="submit" disabled={pending}>
          Set value
        </button>
      </form>
      <button type="button" class="danger" disabled={pending} onClick={remove} aria-label={`Delete asset ${asset.name}`}>
        Delete
      </button>
    </li>
  )
}
