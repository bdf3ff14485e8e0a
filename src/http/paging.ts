/** The `Link` header to the next page: the path with the defined query parameters. */
export function nextPageLink(path: string, params: Record<string, string | number | undefined>): string {
  const query = new URLSearchParams()
  for (const [key, value] of Object.entries(params)) if (value !== undefined) query.set(key, String(value))
  return `<${path}?${query.toString()}>; rel="next"`
}
