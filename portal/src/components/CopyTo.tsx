import { useState } from "react";
import { useJob } from "../api/jobs";
import { useCopy, type RestorePoint } from "../api/restore-points";
import { useTargets } from "../api/targets";
import { copyTargets } from "../copies";
import { ErrorNote } from "./ErrorNote";
import { Progress } from "./Progress";

/** "Copy…" on a restore point's row: choose another target (off-site) and follow the copy.
 * Nothing is read until it is opened (a page of a hundred rows asks nothing). */
export function CopyTo({ point }: { point: RestorePoint }) {
  const [open, setOpen] = useState(false);
  if (!open)
    return (
      <button type="button" onClick={() => setOpen(true)}>
        Copy…
      </button>
    );
  return <CopyForm point={point} onClose={() => setOpen(false)} />;
}

function CopyForm({ point, onClose }: { point: RestorePoint; onClose: () => void }) {
  const targets = useTargets();
  const choices = copyTargets(targets.data?.targets ?? [], point.target);
  const [target, setTarget] = useState("");
  const copy = useCopy(point.id);
  const job = useJob(copy.data?.id);
  const chosen = target || choices[0]?.name || "";
  return (
    <span className="copy-to" role="group" aria-label="Copy to another target">
      {job.data ? (
        <Progress job={job.data} />
      ) : (
        <>
          <select aria-label="Target to copy to" value={chosen} onChange={(e) => setTarget(e.target.value)} disabled={!choices.length}>
            {choices.map((t) => (
              <option key={t.name} value={t.name}>
                {t.name} ({t.kind})
              </option>
            ))}
          </select>
          <button type="button" disabled={!chosen || copy.isPending} onClick={() => copy.mutate({ target: chosen })}>
            {copy.isPending ? "Starting…" : "Copy"}
          </button>
        </>
      )}
      {targets.data && !choices.length && <span className="muted small">No other target to copy to.</span>}
      <button type="button" onClick={onClose}>
        Close
      </button>
      <ErrorNote error={targets.error ?? copy.error} />
    </span>
  );
}
