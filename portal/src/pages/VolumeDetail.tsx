import { memo, useEffect, useMemo, useState } from "react";
import { useJob, useJobs } from "../api/jobs";
import { keys, useInvalidate } from "../api/keys";
import { useChangeRestorePoint, useRestorePoints, type PointChange, type RestorePoint } from "../api/restore-points";
import { can, useSession } from "../api/session";
import { useVolume } from "../api/volumes";
import { CopyTo } from "../components/CopyTo";
import { ErrorNote } from "../components/ErrorNote";
import { GroupRestore } from "../components/GroupRestore";
import { JobList } from "../components/JobList";
import { PerPage } from "../components/PerPage";
import { PointCalendar } from "../components/PointCalendar";
import { Progress } from "../components/Progress";
import { RestoreWizard } from "../components/RestoreWizard";
import { ShowMore } from "../components/ShowMore";
import { confirmed } from "../confirm";
import { browserPath } from "../files";
import { bytes, volumeSize, when } from "../format";
import { ACTIVE } from "../jobs";
import { perPage, withParam } from "../paging";
import { Link, useRoute } from "../router";

/** Restore points per page unless the address asks otherwise. */
const PAGE = 100;
/** The volume's jobs shown at first. */
const JOB_PAGE = 20;

export function VolumeDetail({ volumeId }: { volumeId: string }) {
  const found = useVolume(volumeId);
  const volume = found.data;
  const { path, go } = useRoute();
  const query = new URLSearchParams(path.split("?")[1] ?? "");
  const size = perPage(query, PAGE);
  // The volume's newest jobs (older ones on "Show more"): enough to see its last nights and
  // whether one runs, without drawing a second table of a hundred rows beside the points.
  const jobFilter = useMemo(() => ({ volume: volumeId, limit: JOB_PAGE }), [volumeId]);
  const jobs = useJobs(jobFilter);
  const live = !!jobs.data?.jobs.some((j) => ACTIVE.has(j.status));
  const points = useRestorePoints(volumeId, size, live);
  // A job just ended: its restore point (or a prune's removals) shows now, not in 30 s.
  const invalidate = useInvalidate();
  const [wasLive, setWasLive] = useState(live);
  useEffect(() => {
    if (wasLive && !live) invalidate(keys.volumeRestorePoints(volumeId), keys.restorePointDays(volumeId));
    if (wasLive !== live) setWasLive(live);
  }, [live, wasLive, invalidate, volumeId]);
  const shown = points.data?.pages.flatMap((page) => page.restore_points) ?? [];
  const [restoring, setRestoring] = useState<RestorePoint | null>(null);
  const [restoringGroup, setRestoringGroup] = useState<string | null>(null);
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
            {volumeSize(volume)} · {volume.attached_to.length ? "in use" : "detached"} ·{" "}
            {volume.plans.map((p) => p.name).join(", ") || "unprotected"}
          </span>
        )}
      </header>
      <ErrorNote error={found.error ?? points.error} />
      {restoring && volume && (
        <RestoreWizard point={restoring} volume={volume} onClose={() => setRestoring(null)} />
      )}
      {restoringGroup && volume && (
        <GroupRestore groupId={restoringGroup} volume={volume} onClose={() => setRestoringGroup(null)} />
      )}
      <div className="section-head">
        <h3>Restore points</h3>
        <PerPage value={size} onChange={(n) => go(withParam(path, "per_page", String(n)))} />
      </div>
      <PointCalendar volumeId={volumeId} />
      {points.data && shown.length === 0 && <p className="muted">None yet.</p>}
      {shown.length > 0 && <PointTable points={shown} onRestore={setRestoring} onRestoreGroup={setRestoringGroup} />}
      <ShowMore pages={points} what="restore points" />
      <h3>Jobs</h3>
      <JobList filter={jobFilter} />
    </section>
  );
}

/** What the user may do to a restore point (from the session, once for the table). */
type Allowed = { restore: boolean; browse: boolean; verify: boolean; update: boolean; remove: boolean; copy: boolean; restoreGroup: boolean };

type Opens = { onRestore: (p: RestorePoint) => void; onRestoreGroup: (groupId: string) => void };

function PointTable({ points, onRestore, onRestoreGroup }: { points: RestorePoint[] } & Opens) {
  const { data: session } = useSession();
  const allowed = useMemo<Allowed>(
    () => ({
      restore: can(session, "restore_point:restore"),
      // Reading files is a read like listing restore points (the file routes' own rule,
      // if the policy names one, is the API's to enforce).
      browse: can(session, "restore_point:get"),
      verify: can(session, "restore_point:verify"),
      update: can(session, "restore_point:update"),
      remove: can(session, "restore_point:delete"),
      copy: can(session, "restore_point:copy"),
      restoreGroup: can(session, "restore_point_group:restore"),
    }),
    [session],
  );
  // One mutation for the table, not three per row: a page of a hundred rows drew three
  // hundred mutation observers and a hundred job queries before it showed anything.
  // Each row's own state is kept by id, so actions on two rows at once do not share it.
  const [verifyJobs, setVerifyJobs] = useState<Record<string, string>>({});
  const [pending, setPending] = useState<Record<string, true>>({});
  const [errors, setErrors] = useState<Record<string, Error>>({});
  const act = useChangeRestorePoint({
    onMutate: ({ point }) => {
      setPending((now) => ({ ...now, [point.id]: true }));
      setErrors(({ [point.id]: _, ...rest }) => rest);
    },
    onError: (error, { point }) => setErrors((now) => ({ ...now, [point.id]: error })),
    onSettled: ({ point }) => setPending(({ [point.id]: _, ...rest }) => rest),
    onSuccess: (changed, { point }) => {
      if (changed.kind === "verify") setVerifyJobs((jobs) => ({ ...jobs, [point.id]: changed.job.id }));
    },
  });
  const onAction = act.mutate;
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
          <PointRow
            key={p.id}
            point={p}
            allowed={allowed}
            busy={!!pending[p.id]}
            error={errors[p.id] ?? null}
            verifyJobId={verifyJobs[p.id]}
            onAction={onAction}
            onRestore={onRestore}
            onRestoreGroup={onRestoreGroup}
          />
        ))}
      </tbody>
    </table>
  );
}

type PointRowProps = {
  point: RestorePoint;
  allowed: Allowed;
  busy: boolean;
  error: Error | null;
  verifyJobId: string | undefined;
  onAction: (a: PointChange) => void;
} & Opens;

// Memoised: the list re-reads every 5 s and "Show more" appends a page; a row whose restore
// point did not change (TanStack Query keeps its object) is not drawn again.
const PointRow = memo(function PointRow({ point, allowed, busy, error, verifyJobId, onAction, onRestore, onRestoreGroup }: PointRowProps) {
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
        {verifyJobId && <VerifyProgress jobId={verifyJobId} />}
      </td>
      <td>{point.locked_until ? when(point.locked_until) : "–"}</td>
      <td>
        {point.plan_id ? "plan" : "manual"}
        <div className="muted small">
          on {point.target}
          {point.copied_from_restore_point_id && <span className="tag tag-enabled">copy</span>}
          {point.group_id && <span className="tag">group</span>}
        </div>
      </td>
      <td className="actions">
        {available && allowed.restore && (
          <button type="button" className="primary" onClick={() => onRestore(point)}>
            Restore…
          </button>
        )}
        {available && point.group_id && allowed.restoreGroup && (
          <button type="button" onClick={() => point.group_id && onRestoreGroup(point.group_id)}>
            Restore group…
          </button>
        )}
        {available && allowed.copy && <CopyTo point={point} />}
        {available && allowed.browse && (
          <Link to={browserPath(point.id, "/")} className="button-link" label={`Files of the restore point of ${when(point.created_at)}`}>
            Files
          </Link>
        )}
        {available && allowed.verify && (
          <VerifyButton point={point} busy={busy} jobId={verifyJobId} onAction={onAction} />
        )}
        {available && allowed.update && (
          <button
            type="button"
            disabled={busy}
            onClick={() => {
              const date = window.prompt("Lock until (YYYY-MM-DD); empty to unlock", point.locked_until?.slice(0, 10) ?? "");
              if (date === null) return;
              onAction({ point, kind: "lock", until: date ? new Date(`${date}T23:59:59`).toISOString() : null });
            }}
          >
            Lock…
          </button>
        )}
        {allowed.remove && (
          <button
            type="button"
            className="danger"
            disabled={busy}
            onClick={() => confirmed(`Delete the restore point of ${when(point.created_at)}? This cannot be undone.`) && onAction({ point, kind: "delete" })}
          >
            Delete
          </button>
        )}
        <ErrorNote error={error} />
      </td>
    </tr>
  );
});

/** The verify a user started from this row, followed until it ends. */
function VerifyProgress({ jobId }: { jobId: string }) {
  const job = useJob(jobId);
  return job.data && ACTIVE.has(job.data.status) ? <Progress job={job.data} /> : null;
}

type VerifyProps = { point: RestorePoint; busy: boolean; jobId: string | undefined; onAction: (a: PointChange) => void };

/** Verify, off while a verify started here still runs (so nobody starts it twice). Only a
 * row with such a verify follows its job. */
function VerifyButton(props: VerifyProps) {
  return props.jobId ? <VerifyButtonFollowing {...props} jobId={props.jobId} /> : <VerifyButtonIdle {...props} running={false} />;
}

function VerifyButtonFollowing(props: VerifyProps & { jobId: string }) {
  const job = useJob(props.jobId);
  return <VerifyButtonIdle {...props} running={!!job.data && ACTIVE.has(job.data.status)} />;
}

function VerifyButtonIdle({ point, busy, onAction, running }: VerifyProps & { running: boolean }) {
  return (
    <button type="button" disabled={busy || running} onClick={() => onAction({ point, kind: "verify" })}>
      Verify
    </button>
  );
}
