import { useState } from "react";
import type { Schemas } from "../api/client";
import { usePlanAction, usePlans, type Plan } from "../api/plans";
import { can, useSession } from "../api/session";
import { ErrorNote } from "../components/ErrorNote";
import { PlanEditor } from "../components/PlanEditor";
import { confirmed } from "../confirm";
import { copyPolicyText } from "../copies";
import { when } from "../format";

export function Plans() {
  const { data: session } = useSession();
  const [editing, setEditing] = useState<Plan | "new" | null>(null);
  const plans = usePlans();
  return (
    <section>
      <header className="page-head">
        <h2>Plans</h2>
        {can(session, "plan:create") && !editing && (
          <button type="button" className="primary" onClick={() => setEditing("new")}>
            New plan
          </button>
        )}
      </header>
      {editing && (
        <PlanEditor key={editing === "new" ? "new" : editing.id} plan={editing === "new" ? undefined : editing} onDone={() => setEditing(null)} />
      )}
      <ErrorNote error={plans.error} />
      {plans.data && plans.data.plans.length === 0 && !editing && (
        <p className="muted">No plans yet: a plan backs its volumes up on a schedule and keeps what its retention says.</p>
      )}
      {plans.data && plans.data.plans.length > 0 && (
        <table>
          <thead>
            <tr>
              <th>Name</th>
              <th>Status</th>
              <th>Volumes</th>
              <th>Next run</th>
              <th>Retention</th>
              <th aria-label="Actions" />
            </tr>
          </thead>
          <tbody>
            {plans.data.plans.map((plan) => (
              <PlanRow key={plan.id} plan={plan} onEdit={() => setEditing(plan)} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

export function retentionText(r: Schemas["Retention"]): string {
  const parts = [
    r.keep_last && `last ${r.keep_last}`,
    r.daily && `${r.daily} daily`,
    r.weekly && `${r.weekly} weekly`,
    r.monthly && `${r.monthly} monthly`,
    r.yearly && `${r.yearly} yearly`,
  ].filter(Boolean);
  return parts.length ? parts.join(", ") : "keep everything";
}

function PlanRow({ plan, onEdit }: { plan: Plan; onEdit: () => void }) {
  const { data: session } = useSession();
  const act = usePlanAction();
  return (
    <tr data-plan={plan.name}>
      <td>
        <strong>{plan.name}</strong>
        <div className="muted small">{plan.timezone}</div>
      </td>
      <td>
        <span className={`tag tag-${plan.status}`}>{plan.status}</span>
      </td>
      <td title={plan.cinder_group ? `The volumes of Cinder group ${plan.cinder_group}` : undefined}>
        {plan.volumes.length}
        {plan.cinder_group && <span className="muted"> (Cinder group)</span>}
      </td>
      <td>{when(plan.next_run_at)}</td>
      <td>
        {retentionText(plan.retention)}
        <div className="muted small">{copyPolicyText(plan.offsite)}</div>
      </td>
      <td className="actions">
        {can(session, "plan:run") && (
          <button type="button" disabled={act.isPending} onClick={() => act.mutate({ plan, action: "run" })}>
            Run now
          </button>
        )}
        {can(session, "plan:update") && (
          <button type="button" onClick={onEdit}>
            Edit
          </button>
        )}
        {can(session, "plan:update") && (
          <button
            type="button"
            disabled={act.isPending}
            onClick={() => act.mutate({ plan, action: plan.status === "paused" ? "resume" : "pause" })}
          >
            {plan.status === "paused" ? "Resume" : "Pause"}
          </button>
        )}
        {can(session, "plan:delete") && (
          <button
            type="button"
            className="danger"
            disabled={act.isPending}
            onClick={() =>
              confirmed(`Delete plan ${plan.name}? Its restore points stay.`) &&
              act.mutate({ plan, action: "delete" })
            }
          >
            Delete
          </button>
        )}
        <ErrorNote error={act.error} />
      </td>
    </tr>
  );
}
