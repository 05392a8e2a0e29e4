import { useState } from "react";
import type { Schemas, Volume } from "../api/client";
import { useJob } from "../api/jobs";
import { useGroupRestore, useRestorePointGroup } from "../api/restore-points";
import { useSession } from "../api/session";
import { groupRestoreRequest, type GroupWhere } from "../copies";
import { confirmed } from "../confirm";
import { volumeLabel, when } from "../format";
import { ErrorNote } from "./ErrorNote";
import { Progress } from "./Progress";

/** Restore a plan's restore point group (its volumes taken at one instant) all at once:
 * into new Cinder volumes named with a prefix, new RBD images (administrators, or anyone
 * for RBD images), or over the volumes themselves; then follow each member's job. */
export function GroupRestore({ groupId, volume, onClose }: { groupId: string; volume: Volume; onClose: () => void }) {
  const { data: session } = useSession();
  const group = useRestorePointGroup(groupId);
  const cinder = volume.kind === "cinder";
  const [where, setWhere] = useState<GroupWhere>(cinder ? "new_volumes" : "images");
  const [prefix, setPrefix] = useState("restored-");
  const [instant, setInstant] = useState(false);
  const start = useGroupRestore(groupId);
  const members = group.data?.restore_points ?? [];
  const request = (): Schemas["GroupRestoreCreate"] => groupRestoreRequest(where, prefix, instant);
  const go = () => {
    if (where === "in_place" && !confirmed(`Restore all ${members.length} volumes of the group in place? Everything written to them since is lost.`)) return;
    start.mutate(request());
  };
  return (
    <div className="wizard" role="dialog" aria-label="Restore the group">
      <p>
        Group of <strong>{when(group.data?.taken_at ?? group.data?.created_at)}</strong>: {members.length} volumes at the same instant
        {group.data && !group.data.complete && <span className="tag tag-warning">incomplete</span>}
      </p>
      <ErrorNote error={group.error} />
      <ul className="small">
        {members.map((m) => (
          <li key={m.id}>{volumeLabel(m)}</li>
        ))}
      </ul>
      {!start.data && (
        <>
          <fieldset className="choices">
            <legend>Where to</legend>
            {cinder && (
              <label className="inline">
                <input type="radio" name="group-where" checked={where === "new_volumes"} onChange={() => setWhere("new_volumes")} /> New Cinder volumes
              </label>
            )}
            {(session?.cloud_admin || !cinder) && (
              <label className="inline">
                <input type="radio" name="group-where" checked={where === "images"} onChange={() => setWhere("images")} /> New RBD images
              </label>
            )}
            {cinder && (
              <label className="inline">
                <input type="radio" name="group-where" checked={where === "in_place"} onChange={() => setWhere("in_place")} /> Over the volumes themselves
              </label>
            )}
          </fieldset>
          {where !== "in_place" && (
            <>
              <label>
                {where === "new_volumes" ? "Name prefix (each volume: prefix + its id)" : "Image prefix (prefix, pool/prefix or cluster/pool/prefix)"}
                <input value={prefix} onChange={(e) => setPrefix(e.target.value)} />
              </label>
              <label className="inline">
                <input type="checkbox" checked={instant} onChange={(e) => setInstant(e.target.checked)} /> Instant: usable within seconds, copied in the background
              </label>
            </>
          )}
          <div className="row">
            <button type="button" className="primary" disabled={start.isPending || !members.length || (where !== "in_place" && !prefix.trim())} onClick={go}>
              {start.isPending ? "Starting…" : `Restore ${members.length} volumes`}
            </button>
            <button type="button" onClick={onClose}>
              Cancel
            </button>
          </div>
          <ErrorNote error={start.error} />
        </>
      )}
      {start.data && (
        <>
          <ul aria-label="Restores">
            {start.data.jobs.map((j) => (
              <GroupMemberJob key={j.id} jobId={j.id} />
            ))}
          </ul>
          <button type="button" onClick={onClose}>
            Close
          </button>
        </>
      )}
    </div>
  );
}

function GroupMemberJob({ jobId }: { jobId: string }) {
  const job = useJob(jobId);
  if (!job.data) return null;
  return (
    <li>
      {volumeLabel(job.data)} <Progress job={job.data} />
      {job.data.error && <span className="error small"> {job.data.error.message}</span>}
    </li>
  );
}
