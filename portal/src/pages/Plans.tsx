import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useDeferredValue, useState, type FormEvent } from "react";
import { api, type Schemas } from "../api/client";
import { ErrorNote } from "../components/ErrorNote";
import { confirmed } from "../confirm";
import { when } from "../format";
import { can, useSession } from "../session";
import { useVolumes } from "./Volumes";

type Plan = Schemas["PlanPublic"];
type Draft = Schemas["PlanDraft"];

export function usePlans() {
  return useQuery({
    queryKey: ["plans"],
    queryFn: () => api<Schemas["PlanList"]>("GET", "/v1/plans?limit=1000"),
  });
}

export function Plans() {
  const { data: session } = useSession();
  const [editing, setEditing] = useState(false);
  const plans = usePlans();
  return (
    <section>
      <header className="page-head">
        <h2>Plans</h2>
        {can(session, "plan:create") && !editing && (
          <button type="button" className="primary" onClick={() => setEditing(true)}>
            New plan
          </button>
        )}
      </header>
      {editing && <PlanEditor onDone={() => setEditing(false)} />}
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
              <PlanRow key={plan.id} plan={plan} />
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

function PlanRow({ plan }: { plan: Plan }) {
  const { data: session } = useSession();
  const client = useQueryClient();
  const act = useMutation({
    mutationFn: ({ method, path, body }: { method: string; path: string; body?: unknown }) =>
      api<unknown>(method, path, body),
    onSuccess: () => {
      client.invalidateQueries({ queryKey: ["plans"] });
      client.invalidateQueries({ queryKey: ["jobs"] });
      client.invalidateQueries({ queryKey: ["volumes"] });
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
      <td>{plan.volumes.length}</td>
      <td>{when(plan.next_run_at)}</td>
      <td>{retentionText(plan.retention)}</td>
      <td className="actions">
        {can(session, "plan:run") && (
          <button type="button" disabled={act.isPending} onClick={() => act.mutate({ method: "POST", path: `${base}/run`, body: {} })}>
            Run now
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

const ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";

/** A new plan: the rule in words, the next runs and what the retention keeps are shown as
 * the user types (POST /v1/plans/preview checks the draft exactly as a save would). */
export function PlanEditor({ onDone, volumeIds = [] }: { onDone: () => void; volumeIds?: string[] }) {
  const client = useQueryClient();
  const volumes = useVolumes();
  const [name, setName] = useState("");
  const [cron, setCron] = useState("0 2 * * *");
  const [fullCron, setFullCron] = useState("0 2 * * 0");
  const [timezone, setTimezone] = useState(ZONE);
  const [retention, setRetention] = useState({ keep_last: 0, daily: 7, weekly: 4, monthly: 12, yearly: 0 });
  const [chosen, setChosen] = useState<string[]>(volumeIds);
  const [others, setOthers] = useState("");
  const [filter, setFilter] = useState("");
  const named = [...chosen, ...others.split(",").map((v) => v.trim()).filter(Boolean)];

  const draft: Draft = {
    rules: [
      { cron, kind: "incremental" },
      ...(fullCron.trim() ? [{ cron: fullCron, kind: "full" as const }] : []),
    ],
    timezone,
    retention,
    count: 5,
  };
  const typed = useDeferredValue(JSON.stringify(draft));
  const preview = useQuery({
    queryKey: ["plan-preview", typed],
    queryFn: () => api<Schemas["DraftPreview"]>("POST", "/v1/plans/preview", JSON.parse(typed)),
    retry: false,
    placeholderData: (previous) => previous,
  });
  const create = useMutation({
    mutationFn: () =>
      api<Plan>("POST", "/v1/plans", {
        name,
        volumes: named,
        rules: draft.rules,
        timezone,
        retention,
      }),
    onSuccess: () => {
      client.invalidateQueries({ queryKey: ["plans"] });
      client.invalidateQueries({ queryKey: ["volumes"] });
      onDone();
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate();
  };
  const number = (key: keyof typeof retention) => (
    <label key={key}>
      {key.replace("_", " ")}
      <input
        type="number"
        min={0}
        value={retention[key]}
        onChange={(e) => setRetention({ ...retention, [key]: Number(e.target.value) || 0 })}
      />
    </label>
  );
  return (
    <form className="editor" onSubmit={submit} aria-label="New plan">
      <div className="editor-fields">
        <label>
          Name
          <input value={name} onChange={(e) => setName(e.target.value)} required />
        </label>
        <label>
          Incremental backups (cron)
          <input value={cron} onChange={(e) => setCron(e.target.value)} required />
        </label>
        <label>
          Full backups (cron, optional)
          <input value={fullCron} onChange={(e) => setFullCron(e.target.value)} />
        </label>
        <label>
          Timezone
          <input value={timezone} onChange={(e) => setTimezone(e.target.value)} required />
        </label>
        <fieldset>
          <legend>Retention</legend>
          {(["keep_last", "daily", "weekly", "monthly", "yearly"] as const).map(number)}
        </fieldset>
        <fieldset className="volume-choices">
          <legend>Volumes ({named.length} chosen)</legend>
          <input aria-label="Filter volumes" placeholder="filter by name" value={filter} onChange={(e) => setFilter(e.target.value)} />
          <div className="choices" role="group" tabIndex={0} aria-label="Volumes to protect">
          {(volumes.data?.volumes ?? []).filter((v) => (v.name || v.id).toLowerCase().includes(filter.toLowerCase())).map((v) => (
            <label key={v.id} className="inline">
              <input
                type="checkbox"
                checked={chosen.includes(v.id)}
                onChange={(e) =>
                  setChosen(e.target.checked ? [...chosen, v.id] : chosen.filter((id) => id !== v.id))
                }
              />
              {v.name || v.id}
            </label>
          ))}
          </div>
          <label>
            Other volumes <span className="muted">(Cinder ids, or cluster/pool/image; comma-separated)</span>
            <input value={others} onChange={(e) => setOthers(e.target.value)} />
          </label>
        </fieldset>
        <div className="row">
          <button type="submit" className="primary" disabled={create.isPending || !named.length}>
            {create.isPending ? "Saving…" : "Save plan"}
          </button>
          <button type="button" onClick={onDone}>
            Cancel
          </button>
        </div>
        <ErrorNote error={create.error} />
      </div>
      <aside className={`editor-preview ${preview.isPlaceholderData ? "stale" : ""}`} aria-label="Preview" aria-busy={preview.isPlaceholderData}>
        {preview.error ? (
          <ErrorNote error={preview.error} />
        ) : (
          preview.data && (
            <>
              <h4>Schedule</h4>
              <ul>
                {preview.data.rules.map((text) => (
                  <li key={text}>{text}</li>
                ))}
              </ul>
              <h4>Next runs</h4>
              <ol className="next-runs">
                {preview.data.runs.map((run) => (
                  <li key={run.at}>
                    {when(run.at)} <span className="muted">({run.kind}; {run.local.slice(11, 16)} {run.timezone})</span>
                  </li>
                ))}
              </ol>
              <h4>Retention</h4>
              <p className="retention-summary">
                Of the {preview.data.retention.made} backups this schedule makes in {preview.data.retention.days} days,
                it keeps {preview.data.retention.kept.length}
                {preview.data.retention.kept.length > 0 &&
                  `, the oldest from ${preview.data.retention.kept.at(-1)?.local_date}`}
                .
              </p>
              {/* Focusable: it scrolls, and a keyboard must be able to scroll it too. */}
              <ul className="kept small" tabIndex={0} aria-label="Restore points kept">
                {preview.data.retention.kept.slice(0, 30).map((k) => (
                  <li key={k.at}>
                    {k.local_date} <span className="muted">{k.kind} · {k.kept_by.join(", ")}</span>
                  </li>
                ))}
              </ul>
            </>
          )
        )}
      </aside>
    </form>
  );
}
