// Rows per page of a list. The choice rides in the address (`per_page`), so a reload or a
// shared link keeps it and nothing is stored in the browser.
export const PER_PAGE_CHOICES = [25, 50, 100, 200] as const;

/** The page size the address asks for, when it is one of the choices; else `fallback`. */
export function perPage(query: URLSearchParams, fallback: number): number {
  const asked = Number(query.get("per_page"));
  return (PER_PAGE_CHOICES as readonly number[]).includes(asked) ? asked : fallback;
}

/** `path` with one query parameter set (or removed, for null), the others kept. */
export function withParam(path: string, name: string, value: string | null): string {
  const [base, search = ""] = path.split("?");
  const query = new URLSearchParams(search);
  if (value === null) query.delete(name);
  else query.set(name, value);
  const rest = query.toString().replace(/=(?=&|$)/g, "");
  return rest ? `${base}?${rest}` : (base ?? "");
}
