// The file browser's pure parts: paths inside a restore point's filesystem, the crumbs that
// lead to one, the order of a listing, and the addresses of the screen and of the API's
// download routes. Paths are absolute and "/"-separated, as the API takes and answers them;
// a name may hold any character but "/" (and "\0"), so nothing here splits on anything else.

/** `dir` and `name` joined: `/etc` + `hosts` is `/etc/hosts`, `/` + `etc` is `/etc`. */
export function joinPath(dir: string, name: string): string {
  return `${dir.replace(/\/+$/, "")}/${name}`;
}

/** The directory holding `path` (`/` for `/` itself and for a top-level name). */
export function parentPath(path: string): string {
  const trimmed = path.replace(/\/+$/, "");
  const cut = trimmed.lastIndexOf("/");
  return cut <= 0 ? "/" : trimmed.slice(0, cut);
}

/** The last name of `path` (`""` for `/`). */
export function baseName(path: string): string {
  const trimmed = path.replace(/\/+$/, "");
  return trimmed.slice(trimmed.lastIndexOf("/") + 1);
}

/** `path` made absolute and without empty or `.` steps, as typed into an address: `etc//x/`
 * is `/etc/x`. A `..` is kept: the API refuses it with its reason, the portal does not guess. */
export function normalPath(path: string): string {
  const steps = path.split("/").filter((step) => step !== "" && step !== ".");
  return `/${steps.join("/")}`;
}

export type Crumb = { name: string; path: string };

/** The crumbs from the root to `path`, each with the path it opens: `/etc/nginx` is
 * `/`, `etc` (`/etc`), `nginx` (`/etc/nginx`). */
export function breadcrumbs(path: string, root = "/"): Crumb[] {
  const crumbs: Crumb[] = [{ name: root, path: "/" }];
  let at = "/";
  for (const step of normalPath(path).split("/").filter(Boolean)) {
    at = joinPath(at, step);
    crumbs.push({ name: step, path: at });
  }
  return crumbs;
}

export type SortKey = "name" | "type" | "size" | "mtime";
export type Sort = { key: SortKey; descending: boolean };

/** What the listing needs of an entry (the API's FileEntry has more). */
export type Sortable = { name: string; type: string; size: number; mtime?: string | null };

// Directories first whatever the key (as file managers do), so a sort by size or date
// never scatters the way down among the files.
const TYPE_ORDER: Record<string, number> = { dir: 0, symlink: 1, file: 2, other: 3 };

/** Compares names by their code points, the order the API pages in (bytewise on UTF-8
 * is the same order), so a sorted page and the next page's marker agree. */
export function byCodePoint(a: string, b: string): number {
  const left = [...a];
  const right = [...b];
  for (let i = 0; i < Math.min(left.length, right.length); i += 1) {
    const diff = (left[i]?.codePointAt(0) ?? 0) - (right[i]?.codePointAt(0) ?? 0);
    if (diff !== 0) return diff;
  }
  return left.length - right.length;
}

/** A new array of `entries` in the order of `sort`: directories first, then by the key
 * (an unknown time last), ties by name ascending whichever way the key runs. */
export function sortEntries<T extends Sortable>(entries: readonly T[], sort: Sort): T[] {
  const sign = sort.descending ? -1 : 1;
  const keyed = (a: T, b: T): number => {
    switch (sort.key) {
      case "name":
        return 0;
      case "type":
        return a.type < b.type ? -1 : a.type > b.type ? 1 : 0;
      case "size":
        return a.size - b.size;
      case "mtime": {
        if (!a.mtime || !b.mtime) return a.mtime ? -sign : b.mtime ? sign : 0;
        return Date.parse(a.mtime) - Date.parse(b.mtime);
      }
    }
  };
  return [...entries].sort((a, b) => {
    const group = (TYPE_ORDER[a.type] ?? 9) - (TYPE_ORDER[b.type] ?? 9);
    if (group !== 0 && sort.key !== "type") return group;
    if (sort.key === "name") return sign * byCodePoint(a.name, b.name);
    return sign * keyed(a, b) || byCodePoint(a.name, b.name);
  });
}

/** The sort after a click on `key`'s heading: the same key turns the order round, another
 * key starts ascending (newest and largest first feel natural for time and size too, but
 * one rule is easier to predict than two). */
export function nextSort(now: Sort, key: SortKey): Sort {
  return now.key === key ? { key, descending: !now.descending } : { key, descending: false };
}

/** `aria-sort` of a heading. */
export function ariaSort(now: Sort, key: SortKey): "ascending" | "descending" | "none" {
  if (now.key !== key) return "none";
  return now.descending ? "descending" : "ascending";
}

/** The file browser's address for a directory (and partition) of a restore point. */
export function browserPath(pointId: string, path: string, partition?: number | null): string {
  const query = new URLSearchParams({ path: normalPath(path) });
  if (partition !== undefined && partition !== null) query.set("partition", String(partition));
  return `/restore-points/${encodeURIComponent(pointId)}/files?${query.toString()}`;
}

/** The API's address of one file's bytes: a plain link to it lets the browser stream the
 * download to disk itself (Content-Disposition names the file), however large. */
export function contentHref(pointId: string, path: string, partition?: number | null): string {
  const query = new URLSearchParams({ path });
  if (partition !== undefined && partition !== null) query.set("partition", String(partition));
  return `/v1/restore-points/${encodeURIComponent(pointId)}/files/content?${query.toString()}`;
}

/** The API's address of an archive of `paths` (tar or zip), streamed as it is made. */
export function archiveHref(pointId: string, paths: readonly string[], format: "tar" | "zip", partition?: number | null): string {
  const query = new URLSearchParams(paths.map((p) => ["path", p]));
  if (partition !== undefined && partition !== null) query.set("partition", String(partition));
  query.set("format", format);
  return `/v1/restore-points/${encodeURIComponent(pointId)}/files/archive?${query.toString()}`;
}

/** The first characters of a SHA-256, enough to tell versions apart at a glance. */
export function shortHash(sha256: string | null | undefined): string {
  return sha256 ? sha256.slice(0, 12) : "–";
}

/** `rwxr-xr-x` of a mode (permission bits only; the type has its own column). */
export function permissions(mode: number): string {
  const bits = "rwxrwxrwx";
  let out = "";
  for (let i = 0; i < 9; i += 1) out += mode & (1 << (8 - i)) ? bits[i] : "-";
  return out;
}

/** What a version needs to be told apart from another. */
export type Versioned = { present: boolean; sha256?: string | null; size?: number | null; mtime?: string | null };

/** For versions listed newest first: whether each differs from the next older one (its
 * content hash, or size and time where no hash was made; appearing or disappearing is a
 * change too). The oldest has nothing to differ from. */
export function changes(versions: readonly Versioned[]): boolean[] {
  return versions.map((v, i) => {
    const older = versions[i + 1];
    if (!older) return false;
    if (v.present !== older.present) return true;
    if (!v.present) return false;
    if (v.sha256 && older.sha256) return v.sha256 !== older.sha256;
    return v.size !== older.size || v.mtime !== older.mtime;
  });
}
