import { InputError, VALIDATE_TEXT as T } from './text.ts'

/** The service's rules, checked before a request is sent (the service checks them again). */

const USERNAME = /^[A-Za-z0-9]{2,32}$/
const ADDRESS = /^[a-z]{3,24}$/
export const ASSET_NAME = /^[A-Za-z0-9_-]{1,32}$/

export function check(condition: boolean, message: string): void {
  if (!condition) throw new InputError(message)
}

export function checkUsername(value: string): string {
  check(USERNAME.test(value), T.username)
  return value
}

export function checkPassword(value: string): string {
  check(value.length >= 8 && value.length <= 32, T.password)
  return value
}

export function checkAddress(value: string): string {
  check(ADDRESS.test(value), T.address)
  return value
}

/**
 * A quantity typed by a person: a whole number of at least 1, digits only (spaces allowed). A
 * separator is refused rather than guessed: "1.500" is fifteen hundred in some locales, 1.5 in others.
 */
export function parseQuantity(value: string, what = T.aQuantity): number {
  const digits = value.replace(/\s/g, '')
  check(/^[0-9]+$/.test(digits), T.wholeNumber(what))
  const quantity = Number(digits)
  check(quantity >= 1, T.wholeNumber(what))
  check(Number.isSafeInteger(quantity), T.tooLarge(what))
  return quantity
}

export function parseId(value: string, what = T.aWalletId): number {
  check(/^[1-9][0-9]{0,15}$/.test(value.trim()) && Number.isSafeInteger(Number(value.trim())), T.wholeNumber(what))
  return Number(value.trim())
}

export function parseAssetValue(value: string): number {
  const number = Number(value.trim().replace(',', '.'))
  check(value.trim() !== '' && Number.isFinite(number) && number >= 0, T.value)
  return number
}

/**
 * The quantities typed per asset for part of a transaction or a hold (a capture, a refund, a
 * reversal): empty fields are left out, each at most what the line holds (`tooMuch` says so).
 */
export function parsePart(
  lines: { quantity: number; asset: { name: string } }[],
  typed: Record<string, string>,
  tooMuch: (line: { quantity: number; asset: { name: string } }) => string,
): Record<string, number> {
  const assets: Record<string, number> = {}
  for (const line of lines) {
    const value = (typed[line.asset.name] ?? '').trim()
    if (value === '') continue
    const quantity = parseQuantity(value, T.quantityOf(line.asset.name))
    check(quantity <= line.quantity, tooMuch(line))
    assets[line.asset.name] = quantity
  }
  return assets
}
