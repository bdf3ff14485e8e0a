import { createCofferClient } from '../../client/index.ts'

/** The console's only way to the service: the typed client, on the page's own origin, with the browser's cookies. */
export const coffer = createCofferClient({ baseUrl: location.origin })

export { call, callPage, CofferError, followEvents, type Asset, type ErrorCode, type paths, type Transaction, type WalletEvent } from '../../client/index.ts'
