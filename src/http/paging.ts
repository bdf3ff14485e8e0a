/**
 * The `Link` header pointing to the next page of a list: the route's path with the given query
 * parameters (undefined ones left out).
 */
export function nextPageLink(path: string, params: Record<string, string | number | undefined>): string {
  const query = new URLSearchParams()
  for (const [key, value] of Object.entries(params)) if (value !== undefined) query.set(key, String(value))
  return `<${path}?${query.toString()}>; rel="next"`
}
