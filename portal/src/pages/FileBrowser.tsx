import { useMemo, useState, type FormEvent } from "react";
import { useFileListing, useFileSearch, usePartitions, useRestorePoint, type FileEntry, type Partition } from "../api/files";
import { ErrorNote } from "../components/ErrorNote";
import { FileVersions } from "../components/FileVersions";
import { PerPage } from "../components/PerPage";
import { ShowMore } from "../components/ShowMore";
import { bytes, volumeLabel, when } from "../format";
import {
  archiveHref,
  ariaSort,
  breadcrumbs,
  browserPath,
  contentHref,
  joinPath,
  nextSort,
  normalPath,
  parentPath,
  permissions,
  sortEntries,
  type Sort,
  type SortKey,
} from "../files";
import { perPage, withParam } from "../paging";
import { Download, Link, useRoute } from "../router";

/** Entries per page unless the address asks otherwise. */
const PAGE = 100;

const COLUMNS: { key: SortKey; title: string }[] = [
  { key: "name", title: "Name" },
  { key: "type", title: "Type" },
  { key: "size", title: "Size" },
  { key: "mtime", title: "Modified" },
];

/** The files of one restore point, browsed in place: the directory, partition and page
 * size ride in the address (a reload or a shared link opens the same directory). */
export function FileBrowser({ pointId }: { pointId: string }) {
  const { path: address, go } = useRoute();
  const query = new URLSearchParams(address.split("?")[1] ?? "");
  const dir = normalPath(query.get("path") ?? "/");
  const asked = query.get("partition");
  const partition = asked !== null && /^\d+$/.test(asked) ? Number(asked) : null;
  const size = perPage(query, PAGE);
  const point = useRestorePoint(pointId);
  const partitions = usePartitions(pointId);
  const [versionsOf, setVersionsOf] = useState<string | null>(null);
  const [pattern, setPattern] = useState("");
  const [searched, setSearched] = useState("");
  const rp = point.data;
  const chosen = partitions.data?.partitions.find((p) => p.index === partition) ?? partitions.data?.partitions.find((p) => p.readable);
  const rootName = chosen ? partitionName(chosen) : "/";
  const open = (to: string, on: number | null = partition) => {
    setVersionsOf(null);
    go(browserPath(pointId, to, on));
  };
  return (
    <section className="files">
      <header className="page-head">
        <h2>
          <Link to="/volumes">Volumes</Link> / {rp ? <Link to={`/volumes/${encodeURIComponent(rp.volume_id)}`}>{volumeLabel(rp)}</Link> : "…"} / Files of the
          restore point of {rp ? when(rp.created_at) : pointId.slice(0, 8)}
        </h2>
        {rp && (
          <span className="muted">
            {rp.kind} · {bytes(rp.size_bytes)} · {rp.status}
          </span>
        )}
      </header>
      <ErrorNote error={point.error ?? partitions.error} />
      {partitions.data && partitions.data.partitions.length > 1 && (
        <PartitionPicker partitions={partitions.data.partitions} value={chosen?.index ?? null} onChange={(index) => open("/", index)} />
      )}
      {partitions.data && !partitions.data.partitions.some((p) => p.readable) && (
        <p className="muted">
          No filesystem of this restore point can be read:{" "}
          {partitions.data.partitions.map((p) => p.reason ?? p.filesystem ?? "unknown content").join("; ")}
        </p>
      )}
      <nav aria-label="Breadcrumb" className="crumbs">
        <ol>
          {breadcrumbs(dir, rootName).map((crumb, i, all) => (
            <li key={crumb.path}>
              {i === all.length - 1 ? (
                <span aria-current="location">{crumb.name}</span>
              ) : (
                <Link exact to={browserPath(pointId, crumb.path, partition)}>
                  {crumb.name}
                </Link>
              )}
            </li>
          ))}
        </ol>
      </nav>
      <form
        role="search"
        aria-label="Search file names"
        className="file-search"
        onSubmit={(event: FormEvent) => {
          event.preventDefault();
          setSearched(pattern.trim());
        }}
      >
        <label>
          Find names under {dir}
          <input type="search" value={pattern} placeholder="*.conf" onChange={(e) => setPattern(e.target.value)} maxLength={255} />
        </label>
        <button type="submit" disabled={!pattern.trim()}>
          Search
        </button>
        {searched && (
          <button
            type="button"
            onClick={() => {
              setPattern("");
              setSearched("");
            }}
          >
            Clear search
          </button>
        )}
      </form>
      {searched ? (
        <SearchResults pointId={pointId} partition={partition} dir={dir} pattern={searched} onOpen={open} onVersions={setVersionsOf} />
      ) : (
        <Listing
          pointId={pointId}
          partition={partition}
          dir={dir}
          size={size}
          onSize={(n) => go(withParam(address, "per_page", String(n)))}
          onOpen={open}
          onVersions={setVersionsOf}
        />
      )}
      {versionsOf && rp && (
        <FileVersions volumeId={rp.volume_id} pointId={pointId} partition={partition} path={versionsOf} onClose={() => setVersionsOf(null)} />
      )}
    </section>
  );
}

function partitionName(p: Partition): string {
  return p.label || p.name || `${p.scheme === "disk" ? "disk" : `partition ${p.index}`}`;
}

function PartitionPicker({ partitions, value, onChange }: { partitions: Partition[]; value: number | null; onChange: (index: number) => void }) {
  return (
    <label className="partition-picker">
      Partition
      <select value={value ?? ""} onChange={(e) => onChange(Number(e.target.value))}>
        {partitions.map((p) => (
          <option key={p.index} value={p.index} disabled={!p.readable}>
            {p.index}: {partitionName(p)} · {p.filesystem ?? "unknown"} · {bytes(p.size)}
            {p.readable ? "" : ` (${p.reason ?? "unreadable"})`}
          </option>
        ))}
      </select>
    </label>
  );
}

type ListingProps = {
  pointId: string;
  partition: number | null;
  dir: string;
  size: number;
  onSize: (n: number) => void;
  onOpen: (path: string) => void;
  onVersions: (path: string) => void;
};

function Listing({ pointId, partition, dir, size, onSize, onOpen, onVersions }: ListingProps) {
  const pages = useFileListing(pointId, partition, dir, size);
  const [sort, setSort] = useState<Sort>({ key: "name", descending: false });
  const [selected, setSelected] = useState<ReadonlySet<string>>(new Set());
  const loaded = useMemo(() => pages.data?.pages.flatMap((page) => page.entries) ?? [], [pages.data]);
  const shown = useMemo(() => sortEntries(loaded, sort), [loaded, sort]);
  // A selection belongs to one directory: opening another starts afresh.
  const [selectedIn, setSelectedIn] = useState(dir);
  if (selectedIn !== dir) {
    setSelectedIn(dir);
    setSelected(new Set());
  }
  const toggle = (path: string) =>
    setSelected((now) => {
      const next = new Set(now);
      if (!next.delete(path)) next.add(path);
      return next;
    });
  const all = shown.length > 0 && shown.every((e) => selected.has(joinPath(dir, e.name)));
  const chosen = [...selected];
  return (
    <>
      <div className="section-head">
        <h3>{dir}</h3>
        <PerPage value={size} onChange={onSize} />
      </div>
      <ErrorNote error={pages.error} />
      <div className="selection" role="group" aria-label="Download several">
        {chosen.length > 0 ? (
          <>
            <span>{chosen.length} selected:</span>
            <Download to={archiveHref(pointId, chosen, "tar", partition)}>Download as tar</Download>
            <Download to={archiveHref(pointId, chosen, "zip", partition)}>Download as zip</Download>
            <button type="button" onClick={() => setSelected(new Set())}>
              Clear selection
            </button>
          </>
        ) : (
          <>
            <span className="muted">This directory:</span>
            <Download to={archiveHref(pointId, [dir], "tar", partition)} label={`Download ${dir} as tar`}>
              tar
            </Download>
            <Download to={archiveHref(pointId, [dir], "zip", partition)} label={`Download ${dir} as zip`}>
              zip
            </Download>
          </>
        )}
      </div>
      {pages.isLoading && <p className="muted">Reading {dir}…</p>}
      {pages.data && loaded.length === 0 && <p className="muted">Empty directory.</p>}
      {loaded.length > 0 && (
        <table className="file-table" aria-label={`Contents of ${dir}`}>
          <caption className="muted small">
            {pages.hasNextPage ? `The first ${loaded.length} entries by name, sorted among themselves` : `${loaded.length} entries`}
          </caption>
          <thead>
            <tr>
              <th scope="col">
                <input
                  type="checkbox"
                  aria-label="Select every entry shown"
                  checked={all}
                  onChange={() => setSelected(all ? new Set() : new Set(shown.map((e) => joinPath(dir, e.name))))}
                />
              </th>
              {COLUMNS.map((c) => (
                <th scope="col" key={c.key} aria-sort={ariaSort(sort, c.key)}>
                  <button type="button" className="sort" onClick={() => setSort(nextSort(sort, c.key))}>
                    {c.title}
                    <span aria-hidden="true">{sort.key === c.key ? (sort.descending ? " ▼" : " ▲") : ""}</span>
                  </button>
                </th>
              ))}
              <th scope="col">Mode</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {dir !== "/" && (
              <tr>
                <td />
                <td colSpan={6}>
                  <Link exact to={browserPath(pointId, parentPath(dir), partition)} label="Up to the parent directory">
                    ..
                  </Link>
                </td>
              </tr>
            )}
            {shown.map((e) => (
              <EntryRow
                key={e.name}
                entry={e}
                path={joinPath(dir, e.name)}
                pointId={pointId}
                partition={partition}
                selected={selected.has(joinPath(dir, e.name))}
                onToggle={toggle}
                onOpen={onOpen}
                onVersions={onVersions}
              />
            ))}
          </tbody>
        </table>
      )}
      <ShowMore pages={pages} what={`entries of ${dir}`} />
    </>
  );
}

type RowProps = {
  entry: FileEntry;
  path: string;
  pointId: string;
  partition: number | null;
  selected: boolean;
  onToggle: (path: string) => void;
  onOpen: (path: string) => void;
  onVersions: (path: string) => void;
};

function EntryRow({ entry, path, pointId, partition, selected, onToggle, onOpen, onVersions }: RowProps) {
  return (
    <tr data-entry={entry.name}>
      <td>
        {entry.type !== "other" && <input type="checkbox" aria-label={`Select ${entry.name}`} checked={selected} onChange={() => onToggle(path)} />}
      </td>
      <td className="name">
        {entry.type === "dir" ? (
          <Link exact to={browserPath(pointId, path, partition)}>
            {entry.name}/
          </Link>
        ) : (
          <span>{entry.name}</span>
        )}
        {entry.target && <span className="muted small"> → {entry.target}</span>}
      </td>
      <td>{entry.type}</td>
      <td>{entry.type === "dir" ? "–" : bytes(entry.size)}</td>
      <td title={entry.mtime ?? undefined}>{when(entry.mtime)}</td>
      <td>
        <code>{permissions(entry.mode)}</code>
      </td>
      <td className="actions">
        {entry.type === "file" && (
          <>
            <Download to={contentHref(pointId, path, partition)} label={`Download ${entry.name}`}>
              Download
            </Download>
            <button type="button" aria-label={`Versions of ${entry.name}`} onClick={() => onVersions(path)}>
              Versions
            </button>
          </>
        )}
        {entry.type === "dir" && (
          <button type="button" aria-label={`Open ${entry.name}`} onClick={() => onOpen(path)}>
            Open
          </button>
        )}
      </td>
    </tr>
  );
}

type SearchProps = {
  pointId: string;
  partition: number | null;
  dir: string;
  pattern: string;
  onOpen: (path: string) => void;
  onVersions: (path: string) => void;
};

function SearchResults({ pointId, partition, dir, pattern, onOpen, onVersions }: SearchProps) {
  const found = useFileSearch(pointId, partition, dir, pattern);
  const entries = found.data?.entries ?? [];
  return (
    <section aria-label="Search results" aria-busy={found.isLoading}>
      <h3>
        Names matching {pattern} under {dir}
      </h3>
      <ErrorNote error={found.error} />
      {found.isLoading && <p className="muted">Searching…</p>}
      {found.data && (
        <p className="muted" role="status">
          {entries.length} found{found.data.truncated ? ` (the search stopped after looking at ${found.data.visited} entries: narrow it)` : ""}
        </p>
      )}
      {entries.length > 0 && (
        <table className="file-table" aria-label={`Names matching ${pattern}`}>
          <thead>
            <tr>
              <th scope="col">Path</th>
              <th scope="col">Type</th>
              <th scope="col">Size</th>
              <th scope="col">Modified</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {entries.map((e) => (
              <tr key={e.path} data-entry={e.path}>
                <td className="name">{e.path}</td>
                <td>{e.type}</td>
                <td>{e.type === "dir" ? "–" : bytes(e.size)}</td>
                <td>{when(e.mtime)}</td>
                <td className="actions">
                  {e.type === "file" && (
                    <>
                      <Download to={contentHref(pointId, e.path, partition)} label={`Download ${e.path}`}>
                        Download
                      </Download>
                      <button type="button" aria-label={`Versions of ${e.path}`} onClick={() => onVersions(e.path)}>
                        Versions
                      </button>
                    </>
                  )}
                  <button type="button" aria-label={e.type === "dir" ? `Open ${e.path}` : `Show in directory ${e.path}`} onClick={() => onOpen(e.type === "dir" ? e.path : parentPath(e.path))}>
                    {e.type === "dir" ? "Open" : "Show in directory"}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
