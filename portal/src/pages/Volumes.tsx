import { memo, useCallback, useEffect, useState } from "react";
import type { Job, Volume } from "../api/client";
import { useJobs } from "../api/jobs";
import { keys, useInvalidate } from "../api/keys";
import { usePlans, useSetPlanVolumes } from "../api/plans";
import { can, useSession } from "../api/session";
import { useBackUp, useVolumePages, VOLUME_PAGE } from "../api/volumes";
import { ErrorNote } from "../components/ErrorNote";
import { PerPage } from "../components/PerPage";
import { Progress } from "../components/Progress";
import { ShowMore } from "../components/ShowMore";
import { ago, volumeSize, when } from "../format";
import { ACTIVE } from "../jobs";
import { perPage, withParam } from "../paging";
import { Link, useRoute } from "../router";

const NO_JOBS: Job[] = [];
const BACKUPS = { kind: "backup" } as const;

/** The job of this volume still queued or running, if any (a job names the volume's RBD
 * image: a Cinder volume's is `volume-<id>`, an RBD image's is its id). */
function activeBackup(jobs: Job[], volume: Volume): Job | undefined {
  return jobs.find(
    (j) =>
      j.kind === "backup" &&
      ACTIVE.has(j.status) &&
      (volume.kind === "rbd_image" ? j.volume === volume.id : j.volume?.endsWith(`/volume-${volume.id}`)),
  );
}

export function Volumes() {
  const { data: session } = useSession();
  const { path, go } = useRoute();
  const query = new URLSearchParams(path.split("?")[1] ?? "");
  const unprotectedOnly = query.has("unprotected");
  const size = perPage(query, VOLUME_PAGE);
  const volumes = useVolumePages(unprotectedOnly, size);
  const backups = useJobs(BACKUPS);
  const shown = volumes.data?.pages.flatMap((page) => page.volumes) ?? [];
  const [selected, setSelected] = useState<string[]>([]);
  const onSelect = useCallback(
    (id: string, on: boolean) => setSelected((now) => (on ? [...now, id] : now.filter((other) => other !== id))),
    [],
  );
  const mayChangePlans = can(session, "plan:update");

  return (
    <section>
      <header className="page-head">
        <h2>Volumes</h2>
        <label className="inline">
          <input
            type="checkbox"
            checked={unprotectedOnly}
            onChange={(e) => go(withParam(path, "unprotected", e.target.checked ? "" : null))}
          />
          Unprotected only
        </label>
        <PerPage value={size} onChange={(n) => go(withParam(path, "per_page", String(n)))} />
      </header>
      {mayChangePlans && <AddToPlan selected={selected} onDone={() => setSelected([])} />}
      <ErrorNote error={volumes.error} />
      {volumes.isLoading && <p className="muted">Loading volumes…</p>}
      {volumes.data && shown.length === 0 && (
        <p className="muted">{unprotectedOnly ? "Every volume is protected." : "No volumes in this project."}</p>
      )}
      {shown.length > 0 && (
        <table>
          <thead>
            <tr>
              {mayChangePlans && <th aria-label="Select" />}
              <th>Name</th>
              <th>Size</th>
              <th>Attached</th>
              <th>Plans</th>
              <th>Last backup</th>
              <th>Next run</th>
              <th>Restore points</th>
              <th aria-label="Actions" />
            </tr>
          </thead>
          <tbody>
            {shown.map((volume) => (
              <VolumeRow
                key={volume.id}
                volume={volume}
                jobs={backups.data?.jobs ?? NO_JOBS}
                mayBackUp={can(session, "backup:create")}
                mayRestore={can(session, "restore_point:restore")}
                selected={mayChangePlans ? selected.includes(volume.id) : undefined}
                onSelect={onSelect}
              />
            ))}
          </tbody>
        </table>
      )}
      <ShowMore pages={volumes} what="volumes" />
    </section>
  );
}

type RowProps = {
  volume: Volume;
  jobs: Job[];
  mayBackUp: boolean;
  mayRestore: boolean;
  selected?: boolean;
  onSelect: (volumeId: string, on: boolean) => void;
};

// Memoised: a page appended by "Show more", a ticked box or the list's refresh draws only
// the rows that changed (TanStack Query keeps the objects of unchanged volumes).
const VolumeRow = memo(function VolumeRow({ volume, jobs, mayBackUp, mayRestore, selected, onSelect }: RowProps) {
  const invalidate = useInvalidate();
  const { go } = useRoute();
  const [kind, setKind] = useState<"incremental" | "full">("incremental");
  const backUp = useBackUp();
  const newest = volume.newest_restore_point;
  // Busy from the click until the job is over, even before the next poll lists it:
  // nobody clicks Back up twice.
  const started = backUp.data && (jobs.find((j) => j.id === backUp.data.id) ?? backUp.data);
  const running = activeBackup(jobs, volume) ?? (started && ACTIVE.has(started.status) ? started : undefined);
  const busy = backUp.isPending || !!running;
  // When this row's backup ends, its last backup and restore point count change: read them
  // now rather than at the list's next refresh.
  const runningId = running?.id;
  const [watched, setWatched] = useState<string | undefined>(undefined);
  useEffect(() => {
    if (runningId) setWatched(runningId);
    else if (watched) {
      setWatched(undefined);
      invalidate(keys.volumes, keys.overview, keys.restorePoints);
    }
  }, [runningId, watched, invalidate]);
  return (
    <tr data-volume={volume.name}>
      {selected !== undefined && (
        <td>
          <input type="checkbox" aria-label={`Select ${volume.name || volume.id}`} checked={selected} onChange={(e) => onSelect(volume.id, e.target.checked)} />
        </td>
      )}
      <td>
        <Link to={`/volumes/${encodeURIComponent(volume.id)}`}>
          <strong>{volume.name || volume.id}</strong>
        </Link>
        <div className="muted small">{volume.id}</div>
      </td>
      <td>{volumeSize(volume)}</td>
      <td>{volume.attached_to.length ? "in use" : "detached"}</td>
      <td>
        {volume.plans.length ? (
          volume.plans.map((p) => <span key={p.id} className={`tag tag-${p.status}`}>{p.name}</span>)
        ) : (
          <span className="tag tag-warning">unprotected</span>
        )}
      </td>
      <td>
        <LastBackup volume={volume} />
      </td>
      <td title={volume.next_run_at ? when(volume.next_run_at) : undefined}>
        {volume.next_run_at ? ago(volume.next_run_at) : "–"}
      </td>
      <td>{volume.restore_points}</td>
      <td className="actions">
        {running && <Progress job={running} />}
        {mayBackUp && !running && (
          <span className="backup-now">
            <select
              aria-label="Backup kind"
              value={kind}
              onChange={(e) => setKind(e.target.value as "incremental" | "full")}
            >
              <option value="incremental">incremental</option>
              <option value="full">full</option>
            </select>
            <button type="button" disabled={busy} onClick={() => backUp.mutate({ volume: volume.id, kind })}>
              {backUp.isPending ? "Starting…" : "Back up now"}
            </button>
          </span>
        )}
        {mayRestore && newest && (
          <button type="button" onClick={() => go(`/volumes/${encodeURIComponent(volume.id)}?restore=${newest.id}`)}>
            Restore newest
          </button>
        )}
        <ErrorNote error={backUp.error} />
      </td>
    </tr>
  );
});

/** When the volume was last backed up and how (full or incremental), and the last
 * backup's result when it did not succeed (a failure since, with its reason). */
function LastBackup({ volume }: { volume: Volume }) {
  const newest = volume.newest_restore_point;
  const last = volume.last_backup;
  const failed = last && (last.status === "failed" || last.status === "cancelled");
  return (
    <>
      <span title={when(newest?.created_at)}>{newest ? `${ago(newest.created_at)} · ${newest.kind}` : "never"}</span>
      {failed && (
        <div className="small" title={last.error ?? undefined}>
          <span className={`tag tag-${last.status}`}>{last.status}</span> {ago(last.at)}
          {last.error && <div className="muted small">{last.error}</div>}
        </div>
      )}
    </>
  );
}

/** Adds the selected volumes to a plan at once (the plan keeps the ones it had). */
function AddToPlan({ selected, onDone }: { selected: string[]; onDone: () => void }) {
  const [planId, setPlanId] = useState("");
  const plans = usePlans(selected.length > 0);
  const add = useSetPlanVolumes();
  const addSelected = () => {
    const plan = plans.data?.plans.find((p) => p.id === planId);
    const volumes = [...new Set([...(plan?.volumes ?? []), ...selected])];
    add.mutate({ planId, volumes }, { onSuccess: onDone });
  };
  if (!selected.length) return null;
  return (
    <div className="toolbar">
      <span>{selected.length} selected</span>
      <select aria-label="Plan" value={planId} onChange={(e) => setPlanId(e.target.value)}>
        <option value="">Choose a plan…</option>
        {(plans.data?.plans ?? []).map((p) => (
          <option key={p.id} value={p.id}>
            {p.name}
          </option>
        ))}
      </select>
      <button type="button" disabled={!planId || add.isPending} onClick={addSelected}>
        Add to plan
      </button>
      <ErrorNote error={add.error} />
    </div>
  );
}
