import { useInfiniteQuery, useMutation, useQueryClient } from "@tanstack/react-query";
import { memo, useEffect, useState } from "react";
import { api, type Job, type Schemas } from "../api/client";
import { ErrorNote } from "../components/ErrorNote";
import { PerPage } from "../components/PerPage";
import { PointCalendar } from "../components/PointCalendar";
import { Progress } from "../components/Progress";
import { confirmed } from "../confirm";
import { bytes, when } from "../format";
import { ACTIVE, useJob, useJobs } from "../jobs";
import { perPage, withParam } from "../paging";
import { Link, useRoute } from "../router";
import { can, useSession } from "../session";
import { JobTable } from "./Jobs";
import { RestoreWizard } from "./RestoreWizard";
import { ShowMore, useVolume } from "./Volumes";

type RestorePoint = Schemas["RestorePointPublic"];

/** Restore points per page unless the address asks otherwise. */
const PAGE = 100;

/** The volume's restore points a page at a time (newest first; `Show more` reads the next
 * page by its marker), so a volume with thousands of them opens as fast as one with ten. */
export function useRestorePoints(volumeId: string, size = PAGE, live = false) {
  return useInfiniteQuery({
    queryKey: ["restore-points", volumeId, size],
    queryFn: ({ pageParam }) =>
      api<Schemas["RestorePointList"]>(
        "GET",
        `/v1/restore-points?${new URLSearchParams({ volume: volumeId, limit: String(size), ...(pageParam ? { marker: pageParam } : {}) })}`,
      ),
    initialPageParam: "",
    getNextPageParam: (last) => last.next_marker ?? undefined,
    // Every loaded page is read again at each refresh: often only while one of the
    // volume's jobs runs (a backup adds one, a prune removes some).
    refetchInterval: live ? 5_000 : 30_000,
  });
}

export function VolumeDetail({ volumeId }: { volumeId: string }) {
  const found = useVolume(volumeId);
  const volume = found.data;
  const { path, go } = useRoute();
  const query = new URLSearchParams(path.split("?")[1] ?? "");
  const size = perPage(query, PAGE);
  const jobs = useJobs({ volume: volumeId });
  const live = !!jobs.data?.jobs.some((j) => ACTIVE.has(j.status));
  const points = useRestorePoints(volumeId, size, live);
  // A job just ended: its restore point (or a prune's removals) shows now, not in 30 s.
  const client = useQueryClient();
  const [wasLive, setWasLive] = useState(live);
  useEffect(() => {
    if (wasLive && !live) {
      client.invalidateQueries({ queryKey: ["restore-points", volumeId] });
      client.invalidateQueries({ queryKey: ["restore-points", "days", volumeId] });
    }
    if (wasLive !== live) setWasLive(live);
  }, [live, wasLive, client, volumeId]);
  const shown = points.data?.pages.flatMap((page) => page.restore_points) ?? [];
  const [restoring, setRestoring] = useState<RestorePoint | null>(null);
  // "Restore newest" in the volume list opens the wizard here, on that restore point.
  const asked = query.get("restore");
  const [opened, setOpened] = useState(false);
  if (asked && !opened && !restoring) {
    const found = shown.find((p) => p.id === asked);
    if (found) {
      setOpened(true);
      setRestoring(found);
    }
  }
  return (
    <section>
      <header className="page-head">
        <h2>
          <Link to="/volumes">Volumes</Link> / {volume?.name || volumeId}
        </h2>
        {volume && (
          <span className="muted">
            {volume.size_gb} GiB · {volume.attached_to.length ? "in use" : "detached"} ·{" "}
            {volume.plans.map((p) => p.name).join(", ") || "unprotected"}
          </span>
        )}
      </header>
      <ErrorNote error={found.error ?? points.error} />
      {restoring && volume && (
        <RestoreWizard point={restoring} volume={volume} onClose={() => setRestoring(null)} />
      )}
      <div className="section-head">
        <h3>Restore points</h3>
        <PerPage value={size} onChange={(n) => go(withParam(path, "per_page", String(n)))} />
      </div>
      <PointCalendar volumeId={volumeId} />
      {points.data && shown.length === 0 && <p className="muted">None yet.</p>}
      {shown.length > 0 && <PointTable points={shown} onRestore={setRestoring} />}
      <ShowMore pages={points} />
      <h3>Jobs</h3>
      {jobs.data && <JobTable jobs={jobs.data.jobs} />}
    </section>
  );
}

function PointTable({ points, onRestore }: { points: RestorePoint[]; onRestore: (p: RestorePoint) => void }) {
  return (
    <table>
      <thead>
        <tr>
          <th>Taken</th>
          <th>Kind</th>
          <th>Size</th>
          <th>Copied</th>
          <th>Verified</th>
          <th>Locked until</th>
          <th>Origin</th>
          <th aria-label="Actions" />
        </tr>
      </thead>
      <tbody>
        {points.map((p) => (
          <PointRow key={p.id} point={p} onRestore={onRestore} />
        ))}
      </tbody>
    </table>
  );
}

// Memoised: the list re-reads every 5 s and "Show more" appends a page; a row whose restore
// point did not change (TanStack Query keeps its object) is not drawn again.
const PointRow = memo(function PointRow({ point, onRestore }: { point: RestorePoint; onRestore: (p: RestorePoint) => void }) {
  const { data: session } = useSession();
  const client = useQueryClient();
  const [verifying, setVerifying] = useState<Job | null>(null);
  const refresh = () => {
    client.invalidateQueries({ queryKey: ["restore-points"] });
    client.invalidateQueries({ queryKey: ["jobs"] });
  };
  const verify = useMutation({
    mutationFn: () => api<Job>("POST", `/v1/restore-points/${point.id}/verify`, {}),
    onSuccess: (job) => {
      setVerifying(job);
      refresh();
    },
  });
  const lock = useMutation({
    mutationFn: (until: string | null) => api<RestorePoint>("PATCH", `/v1/restore-points/${point.id}`, { locked_until: until }),
    onSuccess: refresh,
  });
  const remove = useMutation({
    mutationFn: () => api<void>("DELETE", `/v1/restore-points/${point.id}`),
    onSuccess: refresh,
  });
  const watched = useJob(verifying?.id);
  const v = point.verification;
  const available = point.status === "available";
  return (
    <tr data-restore-point={point.id}>
      <td title={point.created_at}>{when(point.created_at)}</td>
      <td>
        {point.kind}
        {point.base_restore_point_id && <div className="muted small">on {point.base_restore_point_id.slice(0, 8)}</div>}
        {point.status !== "available" && <span className={`tag tag-${point.status}`}>{point.status}</span>}
      </td>
      <td>{bytes(point.size_bytes)}</td>
      <td>{bytes(point.bytes_copied)}</td>
      <td className="verification">
        {v ? (
          <>
            <span className={`tag tag-${v.status === "ok" ? "succeeded" : v.status === "corrupt" ? "failed" : "queued"}`}>{v.status}</span>
            <div className="muted small">
              {v.mode} · {when(v.verified_at)}
            </div>
          </>
        ) : (
          <span className="muted">never</span>
        )}
        {watched.data && ACTIVE.has(watched.data.status) && <Progress job={watched.data} />}
      </td>
      <td>{point.locked_until ? when(point.locked_until) : "–"}</td>
      <td>{point.plan_id ? "plan" : "manual"}</td>
      <td className="actions">
        {available && can(session, "restore_point:restore") && (
          <button type="button" className="primary" onClick={() => onRestore(point)}>
            Restore…
          </button>
        )}
        {available && can(session, "restore_point:verify") && (
          <button type="button" disabled={verify.isPending || (watched.data && ACTIVE.has(watched.data.status))} onClick={() => verify.mutate()}>
            Verify
          </button>
        )}
        {available && can(session, "restore_point:update") && (
          <button
            type="button"
            disabled={lock.isPending}
            onClick={() => {
              const date = window.prompt("Lock until (YYYY-MM-DD); empty to unlock", point.locked_until?.slice(0, 10) ?? "");
              if (date === null) return;
              lock.mutate(date ? new Date(`${date}T23:59:59`).toISOString() : null);
            }}
          >
            Lock…
          </button>
        )}
        {can(session, "restore_point:delete") && (
          <button
            type="button"
            className="danger"
            disabled={remove.isPending}
            onClick={() => confirmed(`Delete the restore point of ${when(point.created_at)}? This cannot be undone.`) && remove.mutate()}
          >
            Delete
          </button>
        )}
        <ErrorNote error={verify.error ?? lock.error ?? remove.error} />
      </td>
    </tr>
  );
});
