import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { api, type Schemas } from "../api/client";
import { ErrorNote } from "../components/ErrorNote";
import { confirmed } from "../confirm";
import { when } from "../format";
import { can, useSession } from "../session";
import { PlanEditor } from "./PlanEditor";

type Plan = Schemas["PlanPublic"];

/** The project's plans; `enabled: false` until they are needed (the volume list asks only
 * once volumes are selected to be added to one). */
export function usePlans(enabled = true) {
  return useQuery({
    queryKey: ["plans"],
    queryFn: () => api<Schemas["PlanList"]>("GET", "/v1/plans?limit=1000"),
    enabled,
  });
}

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
  const client = useQueryClient();
  const act = useMutation({
    mutationFn: ({ method, path, body }: { method: string; path: string; body?: unknown }) =>
      api<unknown>(method, path, body),
    onSuccess: () => {
      client.invalidateQueries({ queryKey: ["plans"] });
      client.invalidateQueries({ queryKey: ["jobs"] });
      client.invalidateQueries({ queryKey: ["volumes"] });
      client.invalidateQueries({ queryKey: ["overview"] });
    },
  });
  const base = `/v1/plans/${plan.id}`;
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
      <td>{retentionText(plan.retention)}</td>
      <td className="actions">
        {can(session, "plan:run") && (
          <button type="button" disabled={act.isPending} onClick={() => act.mutate({ method: "POST", path: `${base}/run`, body: {} })}>
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
            onClick={() => act.mutate({ method: "POST", path: `${base}/${plan.status === "paused" ? "resume" : "pause"}` })}
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
              act.mutate({ method: "DELETE", path: base })
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
