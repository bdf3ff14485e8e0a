import { useState } from 'preact/hooks'
import { dayBound, formatDay } from './format.ts'
import { KIND_OPTIONS, KIND_TEXT } from './text.ts'
import { Field, Select, type Chip } from './ui.tsx'

/** The filters a wallet's history and the operator's journal share, as query parameters (`metadata[KEY]` among them). */
export type TransactionQuery = Record<string, string>

/** The shared filters' state: what was typed, and the query parameters it chooses. */
export function useTransactionFilters() {
  const [asset, setAsset] = useState('')
  const [since, setSince] = useState('')
  const [until, setUntil] = useState('')
  const [kind, setKind] = useState('')
  const [metadataKey, setMetadataKey] = useState('')
  const [metadataValue, setMetadataValue] = useState('')
  const query: TransactionQuery = {
    ...(asset.trim() ? { asset: asset.trim() } : {}),
    ...(dayBound(since, false) ? { since: dayBound(since, false) } : {}),
    ...(dayBound(until, true) ? { until: dayBound(until, true) } : {}),
    ...(kind ? { kind } : {}),
    ...(metadataKey.trim() ? { [`metadata[${metadataKey.trim()}]`]: metadataValue } : {}),
  }
  return {
    fields: {
      asset,
      setAsset,
      since,
      setSince,
      until,
      setUntil,
      kind,
      setKind,
      metadataKey,
      setMetadataKey,
      metadataValue,
      setMetadataValue,
    },
    query,
    /** The active filters, each removable. */
    chips: [
      ...(asset.trim() ? [{ label: `Asset: ${asset.trim()}`, clear: () => setAsset('') }] : []),
      ...(dayBound(since, false) ? [{ label: `From ${formatDay(since)}`, clear: () => setSince('') }] : []),
      ...(dayBound(until, true) ? [{ label: `To ${formatDay(until)}`, clear: () => setUntil('') }] : []),
      ...(kind ? [{ label: `Kind: ${KIND_TEXT[kind as keyof typeof KIND_TEXT] ?? kind}`, clear: () => setKind('') }] : []),
      ...(metadataKey.trim()
        ? [{ label: `${metadataKey.trim()} = ${metadataValue}`, clear: () => (setMetadataKey(''), setMetadataValue('')) }]
        : []),
    ] satisfies Chip[],
    /** Changes whenever a filter does (pages start again from the first). */
    key: JSON.stringify([asset.trim(), since, until, kind, metadataKey.trim(), metadataValue]),
    /** Whether anything was typed in a filter (the empty list says "match these filters"). */
    typed: Boolean(asset || since || until || kind || metadataKey),
  }
}

/** The shared filters' fields, in a filter form. */
export function TransactionFilterFields({ fields: f }: { fields: ReturnType<typeof useTransactionFilters>['fields'] }) {
  return (
    <>
      <Field label="Asset" value={f.asset} onValue={f.setAsset} hint="an asset name, or empty for all" autoComplete="off" />
      <Field label="From day" type="date" value={f.since} onValue={f.setSince} />
      <Field label="To day" type="date" value={f.until} onValue={f.setUntil} />
      <Select label="Kind" value={f.kind} onValue={f.setKind} options={KIND_OPTIONS} />
      <Field
        label="Metadata key"
        value={f.metadataKey}
        onValue={f.setMetadataKey}
        hint="e.g. order_id; empty for any"
        autoComplete="off"
        maxLength={40}
      />
      <Field
        label="Metadata value"
        value={f.metadataValue}
        onValue={f.setMetadataValue}
        hint="the exact value of that key"
        autoComplete="off"
        maxLength={500}
      />
    </>
  )
}
