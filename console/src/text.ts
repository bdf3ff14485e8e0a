import { CofferError, type ErrorCode, type paths, type Transaction } from './api.ts'
import { parseEvery, wallWords, type Every } from './calendar.ts'
import { formatQuantity } from './format.ts'

/**
 * Every error the service can answer, in words a person understands. Typed by the client's error
 * codes: a code added to the service fails the console's type check until it has a sentence here.
 */
export const ERROR_TEXT: Record<ErrorCode, string> = {
  G000: 'Some of what you entered is not valid. Check the form and try again.',
  G001: 'The link or address of this page is not valid.',
  G002: 'A filter or page setting is not valid. Check the filters and try again.',
  G003: 'This payment attempt was already used for a different request. Nothing was sent twice; fill in the form again.',
  G004: 'This request is still being processed. Wait a moment, then check your history before trying again.',
  G005: 'Too many attempts in a short time. Wait a minute, then try again.',
  G006: 'That part of the service does not exist.',
  S000: 'Something went wrong on the server. Try again; if it keeps happening, tell the operator.',
  S001: 'The service cannot be reached right now. Check your connection and try again.',
  U000: 'That username is taken. Choose another one.',
  U001: 'Wrong username or password.',
  U003: 'There is no user with that username.',
  U004: 'That session no longer exists.',
  W000: 'That wallet does not exist, was deleted, or is not yours to use.',
  W002: 'There is no such wallet or asset.',
  W003: 'That person already has access to this wallet (or owns it).',
  W005: 'That key no longer exists.',
  W006: 'Only the owner of this wallet can do that.',
  W007: 'That person must have access to the wallet first: share it with them, then hand it over.',
  W008: 'A primary wallet cannot be deleted. Make another wallet primary first.',
  W010: 'That webhook address is not allowed: it must be a public http or https address of at most 512 characters.',
  W011: 'That wallet address is taken. Choose another one.',
  W012: 'This wallet is its owner’s primary wallet, so it cannot be handed over. Make another wallet primary first.',
  W013: 'You cannot send to the wallet you are sending from.',
  A000: 'Please sign in.',
  A001: 'Your session has ended. Please sign in again.',
  A003: 'The admin key is wrong, or your operator session has ended.',
  A004: 'The request was refused because it came from another site.',
  I000: 'That asset does not exist (any more).',
  I001: 'There is no asset with that name.',
  I002: 'There is not enough in this wallet for that.',
  I003: 'That amount is too large: a balance would go beyond the largest number Coffer can hold.',
  I004: 'An asset with that name already exists.',
  I005: 'This asset cannot be deleted while any wallet holds some of it. Burn it from every wallet first, then delete it.',
  T000: 'That transaction does not exist, or it cannot be moved back from here: only the wallet that received a transfer or a capture may refund it.',
  T001: 'That cannot be moved back: it is a reversal itself, or more was asked for than what is left of it to move back.',
  H000: 'That hold does not exist, or this wallet is not a side of it.',
  H001: 'That hold is no longer pending: it has already been captured, voided, or it expired.',
  H002: 'You cannot capture more than the hold reserves, or an asset it does not reserve.',
  J000: 'This transaction is not in the signed journal yet. Try again in a few seconds.',
  K000: 'This key is not allowed to do that: its scopes leave it out.',
  K001: 'That goes over a limit of this key.',
  K002: 'This key may not pay that wallet.',
  C000: 'Credit and expiring units do not mix: this asset has units that expire, or a wallet has credit on it.',
  C001: 'This wallet owes on credit. Pay the debt back before deleting it.',
  R000: 'That scheduled payment does not exist, or it belongs to another wallet.',
  R001: 'That scheduled payment has already finished or been cancelled, so it cannot be changed any more.',
  M000: 'That alert does not exist on this wallet.',
  M001: 'A wallet can have at most 20 alerts. Delete one before adding another.',
}

/** The kinds of transaction, as a person reads them. */
export const KIND_TEXT: Record<Transaction['kind'], string> = {
  transfer: 'Transfer',
  issuance: 'Issuance',
  burn: 'Burn',
  sweep: 'Deleted wallet swept',
  capture: 'Capture',
  reversal: 'Refund or correction',
  expiry: 'Expired, back to mint',
}

/** The wallet every issuance comes from and every burn goes to. */
const MINT_WALLET_ID = 1

/**
 * A reversal as a person reads it: a correction when it moves an issuance or a burn back (only the
 * operator can), a refund otherwise (the receiver giving back a transfer or a capture).
 */
export function reversalWord(transaction: Pick<Transaction, 'sending_wallet_id' | 'receiving_wallet_id'>): 'refund' | 'correction' {
  return transaction.sending_wallet_id === MINT_WALLET_ID || transaction.receiving_wallet_id === MINT_WALLET_ID ? 'correction' : 'refund'
}

/** A reversal's own name in a list: "Refund of transaction 12". */
export const REVERSAL_TEXT = { refund: 'Refund', correction: 'Correction' }

/** The mark on a transaction that was moved back, in whole or in part. */
export const MOVED_BACK_TEXT = {
  refund: { all: 'Refunded', part: 'Partly refunded' },
  correction: { all: 'Corrected', part: 'Partly corrected' },
}

/** Transactions in a list, a table and a detail view. */
export const TRANSACTION_TEXT = {
  caption: 'Transactions, newest first',
  column: { when: 'When', transaction: 'Transaction', amount: 'Amount', status: 'Status', details: 'Details' },
  sentTo: (party: string) => `Sent to ${party}`,
  receivedFrom: (party: string) => `Received from ${party}`,
  between: (from: string, to: string) => `From ${from} to ${to}`,
  sent: 'Sent',
  received: 'Received',
  number: (id: number) => `transaction ${id}`,
  details: 'Details',
  hideDetails: 'Hide details',
  ofTransaction: (id: number) => `of transaction ${id}`,
  detailOf: (id: number) => `Transaction ${id}`,
  fact: { kind: 'Kind', when: 'When', from: 'From', to: 'To', assets: 'Assets', memo: 'Memo' },
  none: 'none',
  movedBackHeading: (word: 'refund' | 'correction') => (word === 'refund' ? 'Refunds' : 'Corrections'),
  reversalLine: (name: string, id: number, assets: string, when: string) => `${name}: transaction ${id}, ${assets}, ${when}`,
}

/** Quantities of one asset, in the words the console uses for them everywhere. */
export const HOLDING_TEXT = {
  owned: 'Owned',
  reserved: 'Reserved by holds',
  available: 'Available to spend',
  /** An asset to choose, with what of it may be spent: "gold (930 available)". */
  choice: (name: string, available: string) => `${name} (${available} available)`,
}

/** Units that expire, in words: "12 expire on 3 March". */
export const EXPIRY_TEXT = {
  expire: (quantity: string, day: string) => `${quantity} expire on ${day}`,
  field: 'Expires (optional)',
  hint: 'leave empty for units that never expire; at least a minute and at most 10 years ahead',
  issued: (quantity: string, name: string, address: string, day: string) => `Issued ${quantity} ${name} to ${address}, expiring on ${day}.`,
}

/** Webhook event types as a person reads them. */
export const EVENT_TEXT: Record<string, string> = {
  'transaction.received': 'Money received',
  'transaction.sent': 'Money sent',
}

/** What became of a webhook delivery, shown in its badge. */
export const DELIVERY_STATUS_TEXT = {
  pending: 'Waiting to be delivered',
  delivered: 'Delivered',
  failed: 'Failed (no more attempts)',
  cancelled: 'Cancelled',
} as const

/** A filter's choice of kind: every kind, or one. */
export const KIND_OPTIONS: [string, string][] = [['', 'Every kind'], ...Object.entries(KIND_TEXT)]

export interface ShownError {
  text: string
  detail?: string
  code?: string
}

/** What to show for a failure: the sentence for its code, the service's detail, and the code. */
export function describeError(error: unknown): ShownError {
  if (error instanceof CofferError) return { text: ERROR_TEXT[error.code] ?? error.message, detail: error.detail, code: error.code }
  if (error instanceof Error && error.name === 'InputError') return { text: error.message }
  return { text: ERROR_TEXT.S000 }
}

/** A value the console refused before sending it. */
export class InputError extends Error {
  override name = 'InputError'
}

/** What became of a hold, by what actually moved: "25 gold paid, 15 gold released". */
export function holdOutcome(
  status: 'pending' | 'captured' | 'voided' | 'expired',
  reserved: { quantity: number; asset: { name: string } }[],
  paid: Map<string, number> | undefined,
  format: (quantity: number) => string,
): string {
  if (status === 'pending') return 'Pending'
  const released = reserved
    .map((line) => ({ name: line.asset.name, quantity: line.quantity - (paid?.get(line.asset.name) ?? 0) }))
    .filter((line) => line.quantity > 0)
  const list = (lines: { name: string; quantity: number }[]) => lines.map((line) => `${format(line.quantity)} ${line.name}`).join(', ')
  const paidLines = [...(paid ?? new Map<string, number>())].map(([name, quantity]) => ({ name, quantity }))
  const parts = [
    ...(paidLines.length > 0 ? [`${list(paidLines)} paid`] : []),
    ...(released.length > 0 ? [`${list(released)} released`] : []),
  ]
  const prefix = status === 'captured' ? '' : status === 'voided' ? 'Voided: ' : 'Expired: '
  return prefix + (parts.join(', ') || 'nothing moved')
}

/** The wallet's balances, now and at a date. */
export const BALANCES_TEXT = {
  title: 'Balances',
  asset: 'Asset',
  valueEach: 'Value each',
  /** Around the wallet's address. */
  holds: ['What wallet ', ' holds.'],
  loading: 'balances',
  emptyStart: 'This wallet holds nothing yet. Someone can send to your username ',
  emptyPrimary: ' (it arrives in your primary wallet)',
  emptyAddress: ' or to the address ',
  caption: (address: string) => `Holdings of ${address}`,
  send: 'Send',
  history: 'History',
  at: 'Balances at a date',
  moment: 'Date and time',
  momentHint: 'in your time zone',
  show: 'Show balances then',
  noMoment: 'Choose a date and a time.',
  /** Around the wallet's address and the moment. */
  held: ['What wallet ', ' held on ', ':'],
  nothingThen: 'Nothing then.',
  captionAt: (address: string, when: string) => `Holdings of ${address} on ${when}`,
}

/** Sending one or more assets. */
export const SEND_TEXT = {
  title: 'Send',
  from: 'From wallet ',
  kinds: [
    ['0', 'Username'],
    ['1', 'Wallet address'],
    ['2', 'Wallet id'],
  ] as [string, string][],
  sent: (assets: string, to: string, id: number) => `Sent ${assets} to ${to} (transaction ${id}).`,
  loading: 'balances',
  nothingToSend: 'This wallet holds nothing to send yet.',
  recipient: 'Recipient',
  sendTo: 'Send to a',
  recipientHint: (kind: string) =>
    kind === '0' ? 'arrives in their primary wallet' : kind === '1' ? '3 to 24 lowercase letters' : 'a number',
  what: 'What to send',
  line: (n: number) => `Line ${n}`,
  asset: (n: number) => `Asset ${n}`,
  quantity: (n: number) => `Quantity ${n}`,
  quantityHint: 'a whole number',
  remove: (n: number) => `Remove asset ${n}`,
  addAsset: 'Add another asset',
  memo: 'Memo (optional)',
  memoHint: 'at most 64 characters, seen by both sides',
  sending: 'Sending…',
  send: 'Send',
  noRecipient: 'Enter who receives the payment.',
  noAsset: (n: number) => `Choose the asset of line ${n}.`,
  twice: (asset: string) => `${asset} is on two lines: put its whole quantity on one.`,
  quantityOf: (asset: string) => `The quantity of ${asset}`,
  memoTooLong: 'A memo is at most 64 characters.',
}

/** Holds: placing, the list, capturing and voiding, and one hold's detail. */
export const HOLD_TEXT = {
  title: 'Holds',
  /** Around the wallet's address. */
  intro: [
    'A hold reserves assets of wallet ',
    ' for a recipient now: you capture it later (all or part of it is paid) or void it (nothing is paid). Either side may void it; it is released by itself when it expires.',
  ],
  recipientKinds: [
    ['0', 'Username'],
    ['1', 'Wallet address'],
    ['2', 'Wallet id'],
  ] as [string, string][],
  expiries: [
    ['3600', '1 hour'],
    ['86400', '1 day'],
    ['604800', '7 days'],
    ['2592000', '30 days'],
  ] as [string, string][],
  status: { pending: 'Pending', captured: 'Captured', voided: 'Voided', expired: 'Expired' },
  place: 'Place a hold',
  placed: (id: number, assets: string, to: string, until: string) => `Hold ${id} placed: ${assets} reserved for ${to} until ${until}.`,
  nothingToReserve: 'This wallet holds nothing to reserve yet.',
  holdFor: 'Hold for a',
  recipient: (kind: string) => `Recipient ${kind.toLowerCase()}`,
  recipientHint: (kind: string) =>
    kind === '0' ? 'the hold is for their primary wallet' : kind === '1' ? '3 to 24 lowercase letters' : 'a number',
  asset: 'Asset to hold',
  quantity: 'Quantity to hold',
  quantityHint: 'a whole number',
  expiresAfter: 'Expires after',
  expiresHint: 'then it is released by itself',
  memo: 'Memo (optional)',
  memoHint: 'at most 64 characters, seen by both sides',
  placing: 'Placing…',
  placeButton: 'Place hold',
  noRecipient: 'Enter who the hold is for.',
  noAsset: 'Choose the asset to hold.',
  quantityOf: (asset: string) => `The quantity of ${asset}`,
  memoTooLong: 'A memo is at most 64 characters.',
  atMost: (quantity: string, asset: string) => `At most ${quantity} ${asset} is held.`,
  nothingToCapture: 'Enter how much to capture.',
  capturePart: (id: number) => `Capture part of hold ${id}`,
  toCapture: (asset: string) => `${asset} to capture`,
  toCaptureHint: (quantity: string) => `at most ${quantity}; the rest goes back`,
  captureThese: 'Capture these',
  captureTitle: (id: number) => `Capture hold ${id}?`,
  captureBody: (what: string, to: string, part: boolean) =>
    `${what} go to ${to} as a recorded transaction${part ? '; the rest of the hold goes back to this wallet' : ''}.`,
  captureFinal: 'This cannot be undone; only the recipient can refund it.',
  capture: 'Capture',
  captured: (id: number, assets: string, transaction: number) => `Hold ${id} captured: ${assets} paid (transaction ${transaction}).`,
  voidTitle: (id: number) => `Void hold ${id}?`,
  voidBody: (assets: string, back: string | undefined) =>
    `${assets} ${back === undefined ? 'are released back to this wallet' : `go back to ${back}`}, and the hold can no longer be captured.`,
  final: 'This cannot be undone.',
  void: 'Void',
  voided: (id: number) => `Hold ${id} voided: nothing was paid.`,
  list: 'Holds of this wallet',
  filters: 'Hold filters',
  statusChip: (status: string) => `Status: ${status}`,
  statusLabel: 'Status',
  statuses: [
    ['pending', 'Pending'],
    ['', 'Every status'],
    ['captured', 'Captured'],
    ['voided', 'Voided'],
    ['expired', 'Expired'],
  ] as [string, string][],
  side: 'Side',
  sides: [
    ['', 'Placed and received'],
    ['sent', 'Placed by this wallet'],
    ['received', 'For this wallet'],
  ] as [string, string][],
  placedByThis: 'Placed by this wallet',
  forThis: 'For this wallet',
  loading: 'holds',
  noPending: 'No pending holds.',
  noneMatch: 'No holds match these filters.',
  heldFor: (party: string) => `Held for ${party}`,
  heldForYou: (party: string) => `Held for you by ${party}`,
  number: (id: number) => `hold ${id}`,
  expires: (when: string) => `expires ${when}`,
  settled: (when: string) => `settled ${when}`,
  transaction: (id: number) => `transaction ${id}`,
  captureButton: (id: number) => `Capture hold ${id}`,
  voidButton: (id: number) => `Void hold ${id}`,
  details: 'Details',
  hideDetails: 'Hide details',
  ofHold: (id: number) => `of hold ${id}`,
  detailOf: (id: number) => `Hold ${id}`,
  fact: {
    status: 'Status',
    reserved: 'Reserved',
    paid: 'Paid',
    released: 'Released',
    from: 'Placed by',
    to: 'For',
    placed: 'Placed',
    expires: 'Expires',
    settled: 'Settled',
    capture: 'Capture',
    memo: 'Memo',
  },
  none: 'none',
  stillReserved: 'nothing yet: still reserved',
}

/**
 * A browser and its system, from a user agent: "Chrome on Linux", "Safari on iPhone"; a program
 * that is no browser by its own name ("curl", "curl on Linux").
 */
export function deviceName(userAgent: string): string {
  const browser = /Edg\//.test(userAgent)
    ? 'Edge'
    : /Firefox\//.test(userAgent)
      ? 'Firefox'
      : /Chrom(e|ium)\//.test(userAgent)
        ? 'Chrome'
        : /Safari\//.test(userAgent)
          ? 'Safari'
          : /^Mozilla\//.test(userAgent)
            ? 'A browser'
            : (/^[^\s/;()]+/.exec(userAgent)?.[0] ?? 'A program')
  const system = /iPhone/.test(userAgent)
    ? 'iPhone'
    : /iPad/.test(userAgent)
      ? 'iPad'
      : /Android/.test(userAgent)
        ? 'Android'
        : /Windows/.test(userAgent)
          ? 'Windows'
          : /Mac OS X/.test(userAgent)
            ? 'a Mac'
            : /Linux/.test(userAgent)
              ? 'Linux'
              : undefined
  if (system) return `${browser} on ${system}`
  return browser === 'A browser' ? 'A browser on another system' : browser
}

/** The places a person is signed in (Account). */
export const SESSION_TEXT = {
  /** A session's heading: its device, and whether it is this one. */
  title: (device: string | undefined, current: boolean) =>
    current ? `This device: ${device ?? deviceName(navigator.userAgent)}` : (device ?? 'Unnamed device'),
  times: (lastUsed: string, signedIn: string) => `Last used ${lastUsed} · signed in ${signedIn}`,
  end: 'End session',
  /** The end button's name for a screen reader: which session it ends. */
  endLabel: (device: string, lastUsed: string) => `End session: ${device}, last used ${lastUsed}`,
  ended: (device: string) => `Session ended: ${device}.`,
}

/** Signing in and creating an account. */
export const SIGN_IN_TEXT = {
  brand: 'Coffer',
  signIn: 'Sign in',
  register: 'Create an account',
  username: 'Username',
  usernameHint: '2 to 32 letters or digits',
  password: 'Password',
  passwordHint: '8 to 32 characters',
  repeat: 'Repeat the password',
  passwordsDiffer: 'The two passwords differ.',
  createAccount: 'Create account',
  toSignIn: 'I already have an account: sign in',
  toRegister: 'New here? Create an account',
  operator: 'Operator sign-in',
}

/** The live stream of a screen, as its status line says it. */
export const LIVE_TEXT = {
  live: 'Live: new transactions appear by themselves.',
  reconnecting: 'Reconnecting to live updates…',
  connecting: 'Connecting to live updates…',
}

/** A wallet's history. */
export const HISTORY_TEXT = {
  title: 'History',
  intro: 'Transactions of wallet ',
  newestFirst: ', newest first.',
  newReceived: (assets: string, from: string) => `New: received ${assets} from ${from}.`,
  newSent: (assets: string, to: string) => `New: sent ${assets} to ${to}.`,
  filters: 'Filters',
  direction: 'Direction',
  directions: [
    ['', 'Sent and received'],
    ['sent', 'Sent'],
    ['received', 'Received'],
  ] as [string, string][],
  sentOnly: 'Sent only',
  receivedOnly: 'Received only',
  perPage: 'Per page',
  statement: 'Download statement (CSV)',
  statementHint: 'every transaction these filters choose, one row per asset, for a spreadsheet',
  noneYet: 'No transactions yet.',
  noneMatch: 'No transactions match these filters.',
}

/** A refund or a correction of one transaction. */
export const REVERSE_TEXT = {
  summary: (verb: string, id: number) => `${verb} transaction ${id}`,
  tooMuch: (quantity: string, asset: string) => `The transaction moved ${quantity} ${asset}: no more can go back.`,
  memoTooLong: 'A memo is at most 64 characters.',
  everything: 'everything of it not yet moved back',
  confirmTitle: (verb: string, id: number) => `${verb} transaction ${id}?`,
  confirmBody: (to: string, what: string) => `Moves back to ${to}: ${what}, as a new recorded transaction.`,
  final: 'This cannot be undone.',
  done: (assets: string, to: string, id: number) => `${assets} moved back to ${to} (transaction ${id}).`,
  quantity: (asset: string) => `${asset} to move back`,
  quantityHint: (moved: string) => `empty: all of it not yet moved back (it moved ${moved})`,
  memo: 'Memo (optional)',
  memoHint: 'at most 64 characters, seen by both sides',
}

/** The person's account: username, password, sessions. */
export const ACCOUNT_TEXT = {
  title: 'Account',
  username: 'Username',
  newUsername: 'New username',
  usernameHint: (now: string) => `now ${now}; 2 to 32 letters or digits`,
  changeUsername: 'Change username',
  renamed: (username: string) => `Your username is now ${username}.`,
  password: 'Password',
  newPassword: 'New password',
  passwordHint: '8 to 32 characters; other sessions end',
  repeat: 'Repeat the new password',
  passwordsDiffer: 'The two passwords differ.',
  changePassword: 'Change password',
  passwordChanged: 'Your password is changed. You were signed out everywhere else.',
  sessions: 'Where you are signed in',
  loadingSessions: 'sessions',
  everywhereTitle: 'Sign out everywhere?',
  everywhereBody: 'Every session of yours ends, this one included, on every device.',
  everywhere: 'Sign out everywhere',
  signedOutEverywhere: 'You are signed out everywhere.',
  signOutHere: 'Sign out of this session',
}

/** A transaction's place in the signed journal, as checked in the browser, and the operator's latest checkpoint. */
export const JOURNAL_TEXT = {
  proof: 'Proof',
  checking: 'Checking in this browser…',
  checked: (position: string, size: string, signedAt: string) =>
    `Checked in this browser: entry ${position} of the signed journal (checkpoint of ${size} transactions, signed ${signedAt}).`,
  waiting: 'Not in a signed checkpoint yet; checked again in a few seconds.',
  failed: (reason: string) => `Does not check out: ${reason}. Tell the operator; keep this transaction’s number.`,
  unavailable: 'Could not be checked right now.',
  checkpoint: 'Latest signed checkpoint',
  checkpointFacts: { size: 'Transactions covered', root: 'Merkle root', signedAt: 'Signed', signature: 'Signature' },
  signatureGood: 'Checked in this browser with the journal’s public key',
  signatureBad: 'Does not match the journal’s public key',
  noCheckpoint: 'No checkpoint is signed yet: the first comes a few seconds after the first transaction.',
}

// Scheduled payments and balance alerts.

/** "1st", "2nd", "23rd", "31st": a day of the month as English says it. */
function ordinal(day: number): string {
  const ones = day % 10
  const tens = Math.floor(day / 10) % 10
  return `${day}${tens === 1 ? 'th' : ones === 1 ? 'st' : ones === 2 ? 'nd' : ones === 3 ? 'rd' : 'th'}`
}

const UNIT_WORDS: Record<Every['unit'], [one: string, many: string]> = {
  day: ['day', 'days'],
  week: ['week', 'weeks'],
  month: ['month', 'months'],
  year: ['year', 'years'],
}

/** "every month", "every 2 weeks" */
function everyWords(every: Every): string {
  const [one, many] = UNIT_WORDS[every.unit]
  return every.count === 1 ? `every ${one}` : `every ${every.count} ${many}`
}

/** A schedule's calendar as the fields of the service say it. */
export interface CalendarFields {
  start_at: string
  every: string | null
  count: number | null
  end_at: string | null
  time_zone: string
}

/**
 * A schedule's calendar in a sentence: "Every month on the 1st at 09:00 AM, Europe/Paris, from
 * December 1, 2026, 12 times". Read in the schedule's own time zone, as it runs.
 */
export function describeCalendar(calendar: CalendarFields): string {
  const zone = calendar.time_zone
  const start = wallWords(calendar.start_at, zone)
  const every = parseEvery(calendar.every)
  if (!every) return `Once, on ${start.date} at ${start.time}, ${zone}`
  const when =
    every.unit === 'day'
      ? `at ${start.time}`
      : every.unit === 'week'
        ? `on ${start.weekday} at ${start.time}`
        : every.unit === 'month'
          ? `on the ${ordinal(start.day)}${start.day > 28 ? ' (the last day in shorter months)' : ''} at ${start.time}`
          : `on ${start.dayOfYear} at ${start.time}`
  const ends =
    calendar.count !== null
      ? `, ${calendar.count === 1 ? 'once' : `${formatQuantity(calendar.count)} times`}`
      : calendar.end_at !== null
        ? `, until ${wallWords(calendar.end_at, zone).date}`
        : ''
  const sentence = `${everyWords(every)} ${when}, ${zone}, from ${start.date}${ends}`
  return sentence[0].toUpperCase() + sentence.slice(1)
}

/** Who a schedule pays, by the kind of recipient it names. */
export function scheduleRecipient(recipient: string | number, type: number): string {
  return type === 2 ? `wallet ${recipient}` : String(recipient)
}

/** What becomes of a schedule, in its badge. */
export const SCHEDULE_STATUS_TEXT = {
  active: 'Active',
  paused: 'Paused',
  finished: 'Finished',
  cancelled: 'Cancelled',
} as const

/** The holder's scheduled payments: the list, the form that makes one, one schedule's page. */
export const SCHEDULE_TEXT = {
  title: 'Scheduled payments',
  intro: (address: string) =>
    `Payments from wallet ${address} that run by themselves: once at a time you choose, or again and again on a calendar.`,
  newTitle: 'Schedule a payment',
  listTitle: 'Scheduled payments of this wallet',
  caption: 'Scheduled payments, newest first',
  loading: 'scheduled payments',
  none: 'No scheduled payments yet.',
  noneMatch: 'No scheduled payments match this filter.',
  column: { payment: 'Payment', calendar: 'When', next: 'Next run', status: 'Status', runs: 'Runs' },
  filters: 'Schedule filters',
  statusFilter: 'Status',
  statusChip: (status: string) => `Status: ${status}`,
  everyStatus: 'Every status',
  what: (assets: string, to: string) => `${assets} to ${to}`,
  next: (when: string) => `Next run ${when}`,
  noNext: 'No next run',
  runs: (runs: number, failures: number) =>
    runs === 0
      ? 'Not run yet'
      : `${formatQuantity(runs)} ${runs === 1 ? 'run' : 'runs'}: ${formatQuantity(runs - failures)} paid, ${formatQuantity(failures)} refused`,
  open: (id: number) => `Scheduled payment ${id}`,
  // The form.
  nothingToPay: 'This wallet holds nothing to pay with yet.',
  recipient: 'Recipient',
  payTo: 'Pay to a',
  kinds: [
    ['0', 'Username'],
    ['1', 'Wallet address'],
    ['2', 'Wallet id'],
  ] as [string, string][],
  recipientHint: (kind: string) =>
    kind === '0' ? 'arrives in their primary wallet' : kind === '1' ? '3 to 24 lowercase letters' : 'a number',
  whatToPay: 'What to pay',
  asset: 'Asset',
  quantity: 'Quantity',
  quantityHint: 'a whole number, paid at each run',
  quantityOf: (asset: string) => `The quantity of ${asset}`,
  memo: 'Memo (optional)',
  memoHint: 'at most 64 characters, seen by both sides',
  when: 'When',
  repeats: 'Repeats',
  repeatOptions: [
    ['once', 'Only once'],
    ['day', 'Every day'],
    ['week', 'Every week'],
    ['month', 'Every month'],
    ['year', 'Every year'],
  ] as [string, string][],
  interval: (unit: string) => `Every how many ${UNIT_WORDS[unit as Every['unit']]?.[1] ?? 'days'}`,
  intervalHint: (unit: string, most: number) =>
    `1 for every ${UNIT_WORDS[unit as Every['unit']]?.[0] ?? 'day'}, 2 for every other; at most ${most}`,
  first: 'First payment',
  firstHint: 'date and time, in the time zone below; now or later',
  timeZone: 'Time zone',
  timeZoneHint: 'the calendar keeps this zone’s wall-clock time, summer and winter',
  ends: 'Ends',
  endOptions: [
    ['never', 'Never (until cancelled)'],
    ['count', 'After a number of payments'],
    ['date', 'On a date'],
  ] as [string, string][],
  count: 'Number of payments',
  countHint: '1 to 10,000, the first one included',
  endDate: 'Last day',
  endDateHint: 'no payment after this day ends, in the time zone above',
  preview: 'Runs',
  create: 'Schedule payment',
  creating: 'Scheduling…',
  created: (id: number, what: string, calendar: string) => `Scheduled payment ${id}: ${what}. ${calendar}.`,
  // What the console refuses before sending.
  needRecipient: 'Enter who receives the payment.',
  needAsset: 'Choose the asset to pay.',
  memoTooLong: 'A memo is at most 64 characters.',
  needFirst: 'Choose the date and time of the first payment.',
  firstPast: 'The first payment is in the past: choose now or a later time.',
  firstTooFar: 'The first payment can be at most 10 years ahead.',
  badInterval: (most: number) => `“Every how many” is a whole number from 1 to ${most}.`,
  badCount: 'The number of payments is a whole number from 1 to 10,000.',
  needEndDate: 'Choose the last day.',
  endBeforeFirst: 'The last day is before the first payment.',
  // One schedule's page.
  back: 'All scheduled payments',
  fact: {
    to: 'To',
    amount: 'Amount',
    memo: 'Memo',
    calendar: 'When',
    status: 'Status',
    runs: 'Runs',
    created: 'Created',
  },
  noMemo: 'none',
  upcoming: 'Next runs',
  upcomingCaption: (zone: string) => `in ${zone} time`,
  noUpcoming: 'No runs ahead: it is not active.',
  history: 'Runs so far',
  historyIntro: 'Each run is an ordinary payment from this wallet. A refused run moves nothing; three in a row pause the schedule.',
  paidRun: (what: string, id: number) => `paid ${what} (transaction ${id}).`,
  noRuns: 'It has not run yet.',
  ranLate: (due: string, ran: string) => `${due} (run late, ${ran})`,
  refusedRun: (when: string) => `${when}: refused, nothing moved:`,
  refusedCount: (failures: number) =>
    failures === 1 ? '1 run was refused in all.' : `${formatQuantity(failures)} runs were refused in all.`,
  pausedAfterRefusals: 'Paused after its runs were refused. Make sure the wallet holds enough, then resume it.',
  pause: 'Pause',
  resume: 'Resume',
  cancel: 'Cancel schedule',
  paused: (id: number) => `Scheduled payment ${id} is paused: nothing runs until you resume it.`,
  resumed: (id: number, next: string) => `Scheduled payment ${id} is active again; next run ${next}.`,
  cancelTitle: (id: number) => `Cancel scheduled payment ${id}?`,
  cancelBody: 'It never runs again. Payments it already made stay as they are.',
  cancelled: (id: number) => `Scheduled payment ${id} is cancelled.`,
  loadingOne: 'the scheduled payment',
}

/** A refused run's error, in words: the sentence for its code and the service's detail. */
export function runRefusal(error: { code: ErrorCode; message: string; detail?: string }): ShownError {
  return { text: ERROR_TEXT[error.code] ?? error.message, detail: error.detail, code: error.code }
}

/** Balance alerts (the service's monitors). */
export const ALERT_TEXT = {
  title: 'Balance alerts',
  intro: (address: string) =>
    `An alert tells you when what wallet ${address} can spend of an asset drops below, or rises above, a line you choose: once when it crosses, again when it is back. It reaches your webhook and the live event stream, and shows here while this screen is open.`,
  newTitle: 'Add an alert',
  noAssets: 'There are no assets to watch yet.',
  listTitle: 'Alerts of this wallet',
  loading: 'alerts',
  none: 'No alerts yet.',
  asset: 'Tell me when what I can spend of',
  direction: 'Goes',
  directions: [
    ['below', 'below'],
    ['above', 'above'],
  ] as [string, string][],
  threshold: 'The line',
  thresholdHint: 'a whole number, 0 or more',
  badThreshold: 'The line is a whole number of 0 or more.',
  needAsset: 'Choose the asset to watch.',
  add: 'Add alert',
  adding: 'Adding…',
  most: 'A wallet has at most 20 alerts.',
  /** "Tell me when gold drops below 100" */
  sentence: (asset: string, below: number | null, above: number | null) =>
    below !== null
      ? `Tell me when ${asset} drops below ${formatQuantity(below)}`
      : `Tell me when ${asset} rises above ${formatQuantity(above ?? 0)}`,
  added: (sentence: string) => `Alert added: ${sentence.charAt(0).toLowerCase()}${sentence.slice(1)}.`,
  /** Where things stand, in the badge. */
  state: (state: 'normal' | 'crossed', below: number | null, above: number | null) =>
    below !== null
      ? state === 'crossed'
        ? `Below ${formatQuantity(below)} now`
        : `At or above ${formatQuantity(below)}`
      : state === 'crossed'
        ? `Above ${formatQuantity(above ?? 0)} now`
        : `At or below ${formatQuantity(above ?? 0)}`,
  available: (quantity: string) => `${quantity} available to spend`,
  since: (when: string) => `added ${when}`,
  remove: 'Delete alert',
  removeLabel: (sentence: string) => `Delete alert: ${sentence}`,
  removed: (sentence: string) => `Alert deleted: ${sentence.charAt(0).toLowerCase()}${sentence.slice(1)}.`,
  crossed: (asset: string, below: number | null, above: number | null, available: string) =>
    below !== null
      ? `Alert: ${asset} dropped below ${formatQuantity(below)} (${available} available to spend).`
      : `Alert: ${asset} rose above ${formatQuantity(above ?? 0)} (${available} available to spend).`,
  restored: (asset: string, below: number | null, above: number | null, available: string) =>
    below !== null
      ? `${asset} is back at or above ${formatQuantity(below)} (${available} available to spend).`
      : `${asset} is back at or below ${formatQuantity(above ?? 0)} (${available} available to spend).`,
}

/** The operator's list of schedules in trouble. */
export const OPERATOR_SCHEDULE_TEXT = {
  title: 'Schedules in trouble',
  intro: 'Every scheduled payment, of any wallet, that is paused or had a run refused, latest change first. Cancelled ones are left out.',
  loading: 'schedules',
  none: 'No schedule is paused or has had a run refused.',
  wallet: (id: number) => `Wallet ${id}`,
  lastRefused: (when: string) => `Last refused run, ${when}:`,
  schedule: (id: number) => `schedule ${id}`,
}

// Wallet keys with scopes and limits, and credit.

/** What each scope lets a key do, as a person reads it. */
const SCOPE_WORDS: Record<KeyScope, string> = {
  read: 'see balances, history and holds',
  send: 'send and refund',
  hold: 'place, capture and void holds',
  schedule: 'schedule payments',
  monitor: 'set balance alerts',
}

export type KeyScope = paths['/wallet/sessions']['get']['responses']['200']['content']['application/json'][number]['scopes'][number]

/** "a, b and c" */
function listWords(words: string[]): string {
  return words.length <= 1 ? (words[0] ?? '') : `${words.slice(0, -1).join(', ')} and ${words[words.length - 1]}`
}

/** The wallet keys screen: the presets, the custom choice, each key's scopes and limits in words. */
export const KEY_TEXT = {
  title: 'Keys',
  /** Around the wallet's address. */
  intro: ['A key lets a bot or an app use wallet ', ' without your password, and only as far as you allow it.'],
  newKey: 'New key',
  name: 'Key name',
  nameHint: 'what will use it, at most 32 characters',
  nameTooLong: 'A key name is at most 32 characters.',
  what: 'What may this key do?',
  presets: {
    read: 'Read only',
    daily: 'Can send up to an amount a day',
    recipients: 'Can pay only these wallets',
    custom: 'Choose what it may do and its limits',
  },
  presetHints: {
    read: 'sees balances, history and holds; moves nothing',
    daily: 'sends only the assets below, each up to its amount in any 24 hours',
    recipients: 'sends to the wallets below and nobody else',
    custom: 'any of the scopes, with caps per asset and the wallets it may pay',
  },
  dailyAsset: (n: number) => `Asset it may send ${n}`,
  dailyQuantity: (n: number) => `Most in 24 hours ${n}`,
  dailyHint: 'a whole number; counted over any 24 hours, not by calendar day',
  line: (n: number) => `Limit ${n}`,
  addAsset: 'Add another asset',
  removeLine: (n: number) => `Remove limit ${n}`,
  recipients: 'Wallet ids it may pay',
  recipientsHint: 'wallet ids like 12, separated by commas or spaces; 1 to 100 wallets',
  recipientsOptional: 'Only pay these wallet ids (optional)',
  recipientsOptionalHint: 'empty: it may pay anyone; otherwise wallet ids like 12, separated by commas or spaces, at most 100',
  scopes: 'It may',
  scopeOption: (scope: KeyScope) => `${SCOPE_WORDS[scope].charAt(0).toUpperCase()}${SCOPE_WORDS[scope].slice(1)}`,
  caps: 'Caps per asset (optional)',
  capsHint: 'an asset without a cap is not limited',
  capAsset: (n: number) => `Asset of cap ${n}`,
  perTransfer: (n: number) => `Most per transfer ${n}`,
  perDay: (n: number) => `Most in 24 hours ${n}`,
  capHint: 'a whole number, 0 or more; empty: no cap',
  addCap: 'Add a cap',
  removeCap: (n: number) => `Remove cap ${n}`,
  create: 'Create key',
  creating: 'Creating…',
  created: (name: string) => `“${name || 'unnamed'}” is shown only now: copy it into the program that will use it.`,
  // What the console refuses before sending.
  noScope: 'Tick at least one thing the key may do.',
  noAsset: (n: number) => `Choose the asset of line ${n}.`,
  twice: (asset: string) => `${asset} is on two lines: put it on one.`,
  badCap: (what: string, asset: string) => `${what} of ${asset} is a whole number, 0 or more.`,
  capTooLarge: (asset: string) => `A cap of ${asset} is too large.`,
  noCapOnLine: (n: number) => `Line ${n} has no cap: enter the most per transfer, the most in 24 hours, or both.`,
  dailyNeeded: (asset: string) => `Enter the most it may send of ${asset} in 24 hours.`,
  noRecipients: 'Enter at least one wallet id it may pay.',
  badRecipient: (value: string) => `“${value}” is not a wallet id: wallet ids are whole numbers like 12.`,
  tooManyRecipients: 'A key may pay at most 100 wallets.',
  nothingToLimit: 'There are no assets yet to set a limit on.',
  /** The service's refusals of a new key, where they mean more here than anywhere else. */
  refused: {
    G000: 'The key’s scopes or limits are not valid. Check them and try again; no key was created.',
    I001: 'A limit names an asset that does not exist (any more). No key was created.',
    W000: 'A wallet it may pay does not exist or was deleted: check the wallet ids. No key was created.',
  } as Partial<Record<ErrorCode, string>>,
  // The list.
  list: 'Keys of this wallet',
  loading: 'keys',
  none: 'This wallet has no keys.',
  unnamed: (id: number) => `Key ${id}`,
  label: (name: string, id: number) => (name ? `key “${name}”` : `key ${id}`),
  times: (created: string, lastUsed: string | undefined) => `Created ${created} · ${lastUsed ? `last used ${lastUsed}` : 'never used'}`,
  /** "Can see balances, history and holds · send and refund" */
  can: (scopes: KeyScope[]) =>
    scopes.length === 5 ? 'Can do everything a key can' : `Can ${scopes.map((scope) => SCOPE_WORDS[scope]).join(' · ')}`,
  noLimits: 'No limits: it may move anything the wallet can spend, to anyone.',
  perTransferLine: (quantity: string, asset: string) => `At most ${quantity} ${asset} per transfer`,
  perDayLine: (quantity: string, asset: string) => `At most ${quantity} ${asset} in any 24 hours`,
  notAtAll: (assets: string[]) => `May not send ${listWords(assets)}`,
  used: (used: string, cap: string, asset: string) => `used ${used} of ${cap} ${asset} in the last 24 hours`,
  usedLabel: (asset: string) => `${asset} used in the last 24 hours`,
  payOnly: (ids: number[]) => (ids.length === 1 ? `Pays only wallet ${ids[0]}` : `Pays only wallets ${listWords(ids.map(String))}`),
  revoke: 'Revoke',
  revokeLabel: (label: string) => `Revoke ${label}`,
  revokeTitle: (label: string) => `Revoke ${label}?`,
  revokeBody: (address: string) => `Whatever uses this key loses access to wallet ${address} at once. This cannot be undone.`,
  revokeAction: 'Revoke key',
  revoked: (label: string) => `${label.charAt(0).toUpperCase()}${label.slice(1)} revoked.`,
  revokeAll: 'Revoke all keys',
  revokeAllTitle: 'Revoke every key of this wallet?',
  revokeAllBody: (address: string) => `Every bot and app using a key of wallet ${address} loses access at once. This cannot be undone.`,
  revokedAll: 'Every key of this wallet is revoked.',
  secret: 'Key',
}

/** Credit: what a wallet owes, and up to how much it may owe. */
export const CREDIT_TEXT = {
  /** "owes 30 gold" */
  owes: (quantity: string, asset: string) => `owes ${quantity} ${asset}`,
  /** "can owe up to 100" */
  canOwe: (limit: string) => `can owe up to ${limit}`,
  /** Under the balances: "This wallet owes 30 gold; it can owe up to 100." */
  owesSentence: (quantity: string, asset: string, limit: number, owes: number) =>
    owes <= limit
      ? `This wallet owes ${quantity} ${asset}; it can owe up to ${formatQuantity(limit)}.`
      : limit === 0
        ? `This wallet owes ${quantity} ${asset} and has no credit on it any more: it can spend no ${asset} until the debt is paid.`
        : `This wallet owes ${quantity} ${asset}, more than the ${formatQuantity(limit)} it may owe now: it can spend no ${asset} until it owes less.`,
  /** In a table's Owned column. */
  owesCell: (quantity: string) => `owes ${quantity}`,
  /** An asset to choose while the wallet owes some of it: "gold (owes 30, 70 available)". */
  choice: (name: string, owes: string, available: string) => `${name} (owes ${owes}, ${available} available)`,
  // The operator's wallet page.
  title: 'Credit',
  intro: 'A credit limit lets this wallet spend an asset below zero, down to minus the limit; what it receives then pays the debt back.',
  none: 'No credit on any asset.',
  asset: 'Asset to give credit on',
  limit: 'Credit limit',
  limitHint: 'a whole number: the most it may owe; 0 removes the credit',
  set: 'Set credit limit',
  badLimit: 'A credit limit is a whole number, 0 or more.',
  limitTooLarge: 'That credit limit is too large.',
  noAsset: 'Choose the asset.',
  noAssets: 'There are no assets yet.',
  setDone: (address: string, limit: string, asset: string) => `Credit set: ${address} can owe up to ${limit} ${asset}.`,
  removedDone: (address: string, asset: string) => `Credit of ${asset} removed from ${address}.`,
  current: (limit: string, asset: string) => `Can owe up to ${limit} ${asset}`,
  remove: 'Remove credit',
  removeLabel: (asset: string) => `Remove credit of ${asset}`,
  removeTitle: (asset: string) => `Remove the credit of ${asset}?`,
  removeBody: (address: string, asset: string, owes: string | undefined) =>
    owes === undefined
      ? `${address} can then spend only the ${asset} it owns.`
      : `${address} owes ${owes} ${asset}: it keeps the debt, and can spend no ${asset} until the debt is paid.`,
  lowerTitle: (asset: string) => `Lower the credit of ${asset} below what is owed?`,
  lowerBody: (address: string, asset: string, owes: string, limit: string) =>
    `${address} owes ${owes} ${asset}, more than the new limit of ${limit}: it keeps the debt, and can spend no ${asset} until it owes less than ${limit}.`,
  lower: 'Lower the limit',
  /** The service's refusals of a limit, where they mean more here. */
  expiring: (asset: string) =>
    `${asset} has been issued with an expiry date, and credit and expiring units do not mix: no wallet can have credit on it. Nothing changed.`,
  gone: 'That wallet or asset no longer exists (a wallet can also not be the mint). Nothing changed.',
}

/** Send's preview: what the wallet will hold after the transfer, from a dry run of it. */
export const SEND_PREVIEW_TEXT = {
  title: 'After this you will hold',
  intro: (address: string) =>
    `What wallet ${address} will hold once this is sent, as things stand now. Nothing moves until you press Send.`,
  checking: 'Working out what you will hold…',
  refused: 'As things stand, this would be refused:',
  caption: (address: string) => `What ${address} holds now and after this transfer`,
  asset: 'Asset',
  now: 'Now',
  after: 'After',
}
