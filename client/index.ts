/**
 * Coffer's typed client: the types are generated from the service's OpenAPI document
 * (`openapi.d.ts`, `npm run client:generate`), the calls go through openapi-fetch, and every
 * refusal becomes a `CofferError` whose `code` is one of the service's error codes.
 *
 *   const coffer = createCofferClient({ baseUrl: 'http://localhost:8080', token })
 *   const holdings = await call(coffer.GET('/wallet/assets'))
 *   const { holdings_after } = await dryRun(coffer, '/wallet/transactions', { body })   // nothing moves
 *   const { data: page, next } = await callPage(coffer.GET('/wallet/transactions'))   // next: the `before` of the next page
 *   try { await call(coffer.POST('/wallet/transactions', { body, params: { header: { 'idempotency-key': key } } })) }
 *   catch (error) { if (error instanceof CofferError && error.code === 'I002') … }
 */
import createFetchClient, { type Client } from 'openapi-fetch'
import type { paths } from './openapi.d.ts'

export type { paths }
export { followEvents, type WalletEvent, type BalanceEvent, type OtherEvent, type StreamEvent, type FollowOptions } from './events.ts'

type Json<R> = R extends { content: { 'application/json': infer Body } } ? Body : never

/** The body of every error response. */
export type ErrorBody = Json<paths['/wallet/assets']['get']['responses']['500']>
/** Every error code the service answers with. */
export type ErrorCode = ErrorBody['code']
export type Transaction = Json<paths['/wallet/transactions']['post']['responses']['201']>
export type Holding = Json<paths['/wallet/assets']['get']['responses']['200']>[number]
export type Asset = Holding['asset']
export type Monitor = Json<paths['/wallet/monitors']['post']['responses']['201']>

/** The routes that pay and accept `?dry_run=true`. */
export type DryRunPath = '/wallet/transactions' | '/wallet/transactions/batch' | '/wallet/holds' | '/wallet/transactions/{id}/refund'
/**
 * The 200 of a dry run on `P`: `result`, what the request would answer (ids, `created_at`,
 * `position` and `hash` null), and `holdings_after`, the paying wallet's holdings after it.
 */
export type DryRun<P extends DryRunPath = '/wallet/transactions'> = paths[P]['post']['responses'] extends { 200: infer Answer }
  ? Extract<Json<Answer>, { dry_run: true }>
  : never

/** True when an answer is a dry run's (`dryRun`). */
function isDryRun(answer: unknown): boolean {
  return typeof answer === 'object' && answer !== null && (answer as { dry_run?: unknown }).dry_run === true
}

export type CofferClient = Client<paths>

/** A refusal of the service (or, with status 0 and S001, a service that could not be reached). */
export class CofferError extends Error {
  readonly code: ErrorCode
  readonly detail: string | undefined
  readonly requestId: string | undefined

  constructor(
    readonly status: number,
    body: ErrorBody,
  ) {
    super(body.detail ? `${body.code} ${body.message}: ${body.detail}` : `${body.code} ${body.message}`)
    this.name = 'CofferError'
    this.code = body.code
    this.detail = body.detail
    this.requestId = body.request_id || undefined
  }
}

export interface CofferOptions {
  /** Where the service is, e.g. `http://localhost:8080`; a browser page on the service's own origin passes `location.origin`. */
  baseUrl: string
  /** A user session token or a wallet key (`Authorization: Bearer`); without one, a browser sends its cookies. */
  token?: string
  fetch?: (input: Request) => Promise<Response>
}

/** A client for every route of the service, typed from its OpenAPI document. */
export function createCofferClient(options: CofferOptions): CofferClient {
  return createFetchClient<paths>({
    baseUrl: options.baseUrl,
    headers: options.token ? { authorization: `Bearer ${options.token}` } : {},
    credentials: 'same-origin',
    fetch: options.fetch,
  })
}

function isErrorBody(value: unknown): value is ErrorBody {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as ErrorBody).code === 'string' &&
    typeof (value as ErrorBody).message === 'string'
  )
}

/**
 * Waits for a call and returns its data, or throws a `CofferError`: the service's refusal, S001
 * with status 0 when it could not be reached, S000 when it answered something that is no error body.
 */
export async function call<R extends { data?: unknown; error?: unknown; response: Response }>(
  request: Promise<R>,
): Promise<Exclude<R['data'], undefined | { dry_run: true }>> {
  const { data } = await callPage(request)
  // A paying route's typed answer includes its dry run's; `call` answers the request's own.
  if (isDryRun(data)) throw new TypeError('a dry run was answered: send it with dryRun')
  return data as Exclude<R['data'], undefined | { dry_run: true }>
}

type Post<P extends DryRunPath> = paths[P]['post']
type BodyOf<P extends DryRunPath> = Post<P> extends { requestBody?: { content: { 'application/json': infer Body } } } ? Body : never
type PathOf<P extends DryRunPath> = Post<P>['parameters'] extends { path: infer Path } ? Path : never

/** What a dry run sends: the request's body, and for a refund the path's `id`. */
export type DryRunInit<P extends DryRunPath> = { body: BodyOf<P> } & ([PathOf<P>] extends [never] ? object : { path: PathOf<P> })

/**
 * Sends the request to `path` as a dry run (`?dry_run=true`) and returns its answer: `result` what
 * the request would answer (ids, `created_at`, `position` and `hash` null) and `holdings_after` the
 * paying wallet's holdings after it. Refusals throw a `CofferError`, as the request's would.
 *
 *   const { holdings_after } = await dryRun(coffer, '/wallet/transactions', { body: { recipient: 'bob', assets: { gold: 5 } } })
 */
export async function dryRun<P extends DryRunPath>(coffer: CofferClient, path: P, init: DryRunInit<P>): Promise<DryRun<P>> {
  const params = { query: { dry_run: true }, ...('path' in init ? { path: init.path } : {}) }
  // One call for four routes: openapi-fetch types each path's init apart, so it is built here.
  const post = coffer.POST as (path: DryRunPath, init: object) => ReturnType<CofferClient['POST']>
  const { data } = await callPage(post(path, { body: init.body, params }))
  if (!isDryRun(data)) throw new TypeError(`${path} answered no dry run`)
  return data as DryRun<P>
}

/** `call` for a list: its data and the cursor of the next page (`name` in the `Link` header), undefined on the last page. */
export async function callPage<R extends { data?: unknown; error?: unknown; response: Response }>(
  request: Promise<R>,
  name = 'before',
): Promise<{ data: Exclude<R['data'], undefined>; next: number | undefined }> {
  let result: R
  try {
    result = await request
  } catch (error) {
    if (error instanceof CofferError) throw error
    throw new CofferError(0, { code: 'S001', message: 'Service Unavailable', detail: 'the service could not be reached', request_id: '' })
  }
  if (!result.response.ok) {
    const body = result.error
    throw new CofferError(
      result.response.status,
      isErrorBody(body)
        ? body
        : {
            code: 'S000',
            message: 'Unexpected Server Error',
            detail: `status ${result.response.status}`,
            request_id: result.response.headers.get('x-request-id') ?? '',
          },
    )
  }
  return { data: result.data as Exclude<R['data'], undefined>, next: nextCursor(result.response, name) }
}

/** The `before` cursor of the next page, from a list's `Link` header; undefined on the last page. */
export function nextCursor(response: Response, name = 'before'): number | undefined {
  const link = response.headers.get('link')
  const target = link && /<([^>]+)>;\s*rel="next"/.exec(link)?.[1]
  if (!target) return undefined
  const value = new URL(target, 'http://x').searchParams.get(name)
  return value === null ? undefined : Number(value)
}
