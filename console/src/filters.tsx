import { useState } from 'preact/hooks'
import { dayBound, formatDay } from './format.ts'
import { KIND_OPTIONS, KIND_TEXT, FILTER_TEXT as T } from './text.ts'
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
      ...(asset.trim() ? [{ label: T.assetChip(asset.trim()), clear: () => setAsset('') }] : []),
      ...(dayBound(since, false) ? [{ label: T.fromChip(formatDay(since)), clear: () => setSince('') }] : []),
      ...(dayBound(until, true) ? [{ label: T.toChip(formatDay(until)), clear: () => setUntil('') }] : []),
      ...(kind ? [{ label: T.kindChip(KIND_TEXT[kind as keyof typeof KIND_TEXT] ?? kind), clear: () => setKind('') }] : []),
      ...(metadataKey.trim()
        ? [{ label: T.metadataChip(metadataKey.trim(), metadataValue), clear: () => (setMetadataKey(''), setMetadataValue('')) }]
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
      <Field label={T.asset} value={f.asset} onValue={f.setAsset} hint={T.assetHint} autoComplete="off" />
      <Field label={T.since} type="date" value={f.since} onValue={f.setSince} />
      <Field label={T.until} type="date" value={f.until} onValue={f.setUntil} />
      <Select label={T.kind} value={f.kind} onValue={f.setKind} options={KIND_OPTIONS} />
      <Field
        label={T.metadataKey}
        value={f.metadataKey}
        onValue={f.setMetadataKey}
        hint={T.metadataKeyHint}
        autoComplete="off"
        maxLength={40}
      />
      <Field
        label={T.metadataValue}
        value={f.metadataValue}
        onValue={f.setMetadataValue}
        hint={T.metadataValueHint}
        autoComplete="off"
        maxLength={500}
      />
    </>
  )
}
