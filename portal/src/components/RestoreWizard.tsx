import { useState } from "react";
import type { Schemas, Volume } from "../api/client";
import { useJob } from "../api/jobs";
import { useRestore, type RestorePoint } from "../api/restore-points";
import { useSession } from "../api/session";
import { bytes, when } from "../format";
import { ErrorNote } from "./ErrorNote";
import { Progress } from "./Progress";

type Where = "new_volume" | "image" | "in_place";
const GiB = 1024 ** 3;

/** Pick where to, review, then follow the job: a new Cinder volume (at least the restore
 * point's size), a new RBD image (administrators, or anyone for a volume that is an RBD
 * image), or in place over a Cinder volume, which must be detached and whose name the user
 * types to confirm. A restore into something new may be instant: usable within seconds (a
 * clone of the backup), copied in the background. */
export function RestoreWizard({ point, volume, onClose }: { point: RestorePoint; volume: Volume; onClose: () => void }) {
  const { data: session } = useSession();
  const minGb = Math.max(1, Math.ceil((point.size_bytes ?? GiB) / GiB));
  const [step, setStep] = useState<"where" | "review" | "follow">("where");
  const cinder = volume.kind === "cinder";
  const [where, setWhere] = useState<Where>(cinder ? "new_volume" : "image");
  const [instant, setInstant] = useState(false);
  const [name, setName] = useState(`${volume.name || "volume"}-restored`);
  const [sizeGb, setSizeGb] = useState(minGb);
  const [image, setImage] = useState(cinder ? "" : `${volume.name}-restored`);
  const [typedName, setTypedName] = useState("");
  const attached = volume.attached_to.length > 0;
  const mode = instant && where !== "in_place" ? "instant" : "copy";
  const request = (): Schemas["RestoreCreate"] => {
    if (where === "new_volume") return { new_volume: { name, size_gb: sizeGb }, mode };
    if (where === "image") return { target: image, mode };
    return { volume_id: volume.id };
  };
  const start = useRestore(point.id);
  const job = useJob(start.data?.id);
  const ready =
    where === "new_volume" ? name.trim() !== "" && sizeGb >= minGb : where === "image" ? image.trim() !== "" : !attached && typedName === (volume.name || volume.id);
  return (
    <div className="wizard" role="dialog" aria-label="Restore">
      <div className="steps">
        <span className={step === "where" ? "current" : ""}>1. Where to</span>
        <span className={step === "review" ? "current" : ""}>2. Review</span>
        <span className={step === "follow" ? "current" : ""}>3. Restore</span>
      </div>
      <p>
        Restore point of <strong>{when(point.created_at)}</strong> ({point.kind}, {bytes(point.size_bytes)})
      </p>
      {step === "where" && (
        <>
          <fieldset className="choices">
            <legend>Where to</legend>
            {cinder && (
              <label className="inline">
                <input type="radio" name="where" checked={where === "new_volume"} onChange={() => setWhere("new_volume")} /> A new Cinder volume
              </label>
            )}
            {(session?.cloud_admin || !cinder) && (
              <label className="inline">
                <input type="radio" name="where" checked={where === "image"} onChange={() => setWhere("image")} /> A new RBD image
              </label>
            )}
            {cinder && (
              <label className="inline">
                <input type="radio" name="where" checked={where === "in_place"} disabled={attached} onChange={() => setWhere("in_place")} /> Over this volume
                {attached && <span className="muted small"> (detach it first)</span>}
              </label>
            )}
          </fieldset>
          {where !== "in_place" && (
            <label className="inline">
              <input type="checkbox" checked={instant} onChange={(e) => setInstant(e.target.checked)} /> Instant: usable within seconds (a clone of
              the backup), copied in the background
            </label>
          )}
          {where === "new_volume" && (
            <>
              <label>
                Name
                <input value={name} onChange={(e) => setName(e.target.value)} />
              </label>
              <label>
                Size (GiB, at least {minGb})
                <input type="number" min={minGb} value={sizeGb} onChange={(e) => setSizeGb(Number(e.target.value))} />
              </label>
            </>
          )}
          {where === "image" && (
            <label>
              Image (image, pool/image or cluster/pool/image)
              <input value={image} onChange={(e) => setImage(e.target.value)} />
            </label>
          )}
          {where === "in_place" && (
            <label>
              Everything on {volume.name || volume.id} since then is lost. Type its name to confirm
              <input value={typedName} onChange={(e) => setTypedName(e.target.value)} aria-label="Volume name to confirm" />
            </label>
          )}
          <div className="row">
            <button type="button" className="primary" disabled={!ready} onClick={() => setStep("review")}>
              Next
            </button>
            <button type="button" onClick={onClose}>
              Cancel
            </button>
          </div>
        </>
      )}
      {step === "review" && (
        <>
          <p className="review">
            {where === "new_volume" && `Into a new Cinder volume "${name}" of ${sizeGb} GiB.`}
            {where === "image" && `Into a new RBD image ${image}.`}
            {mode === "instant" && " Instantly: usable within seconds, copied in the background; until then the restore point cannot be deleted."}
            {where === "in_place" && `Over ${volume.name || volume.id}, replacing everything on it.`}
          </p>
          <div className="row">
            <button type="button" className="primary" disabled={start.isPending} onClick={() => start.mutate(request(), { onSuccess: () => setStep("follow") })}>
              {start.isPending ? "Starting…" : "Restore"}
            </button>
            <button type="button" onClick={() => setStep("where")}>
              Back
            </button>
          </div>
          <ErrorNote error={start.error} />
        </>
      )}
      {step === "follow" && job.data && (
        <>
          <Progress job={job.data} />
          {job.data.restore_method === "instant" && job.data.timings.ready_at && job.data.status !== "succeeded" && (
            <p className="done">Usable since {when(job.data.timings.ready_at)}; copying the rest in the background.</p>
          )}
          {job.data.status === "succeeded" && (
            <p className="done">
              Restored
              {job.data.restore_volume_id
                ? ` into volume ${job.data.restore_volume_id}`
                : job.data.restore_target
                  ? ` into image ${job.data.restore_target}`
                  : ""}
              .
            </p>
          )}
          {job.data.error && <p className="error">{job.data.error.message}</p>}
          <button type="button" onClick={onClose}>
            Close
          </button>
        </>
      )}
    </div>
  );
}
