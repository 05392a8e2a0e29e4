import { useDeferredValue, useState, type FormEvent } from "react";
import { useTargets } from "../api/targets";
import { copyPolicyText, copyTargets, type CopyEvery } from "../copies";
import type { Schemas } from "../api/client";
import { usePlanPreview, useSavePlan, type Plan } from "../api/plans";
import { useVolumePages } from "../api/volumes";
import { when } from "../format";
import { blankSpec, ruleOf, specOf, WEEKDAYS, type Repeats, type Spec } from "../schedule";
import { ErrorNote } from "./ErrorNote";
import { RetentionStrip } from "./RetentionStrip";
import { ShowMore } from "./ShowMore";

type Draft = Schemas["PlanDraft"];
type Kind = "incremental" | "full";
type RuleRow = { kind: Kind; spec: Spec; timezone?: string | null; start?: string | null };

const ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
const ZONES: string[] = (Intl as unknown as { supportedValuesOf?: (key: string) => string[] }).supportedValuesOf?.("timeZone") ?? [];
const MiB = 1024 ** 2;
const RETENTION_KEYS = ["keep_last", "daily", "weekly", "monthly", "yearly"] as const;

const NEW_PLAN_RULES: RuleRow[] = [
  { kind: "incremental", spec: blankSpec("daily") },
  { kind: "full", spec: { ...blankSpec("weekly"), weekdays: [0] } },
];

/** Writes a new plan or changes one. Beside the form, as the user types, the API's preview
 * (POST /v1/plans/preview, checked exactly as a save is): each rule in words, the next runs,
 * what the retention keeps of the backups the schedule makes and, for an existing plan, which
 * of its restore points the first prune after saving would keep and which it would delete. */
export function PlanEditor({ plan, volumeIds = [], onDone }: { plan?: Plan; volumeIds?: string[]; onDone: () => void }) {
  const volumes = useVolumePages();
  const listed = volumes.data?.pages.flatMap((page) => page.volumes) ?? [];
  const [name, setName] = useState(plan?.name ?? "");
  const [rules, setRules] = useState<RuleRow[]>(
    // A rule without a kind makes incremental backups: the API's default for the field.
    plan ? plan.rules.map((r) => ({ kind: r.kind ?? "incremental", spec: specOf(r), timezone: r.timezone, start: r.start })) : NEW_PLAN_RULES,
  );
  const [timezone, setTimezone] = useState(plan?.timezone ?? ZONE);
  const [windowStart, setWindowStart] = useState(plan?.window?.start ?? "");
  const [windowEnd, setWindowEnd] = useState(plan?.window?.end ?? "");
  const [qosMiB, setQosMiB] = useState(plan?.qos_bytes_per_second ? String(plan.qos_bytes_per_second / MiB) : "");
  const [qosOps, setQosOps] = useState(plan?.qos_ops_per_second ? String(plan.qos_ops_per_second) : "");
  const [retention, setRetention] = useState<Schemas["Retention"]>(
    plan?.retention ?? { keep_last: 0, daily: 7, weekly: 4, monthly: 12, yearly: 0 },
  );
  const [chosen, setChosen] = useState<string[]>(plan?.volumes ?? volumeIds);
  const [filter, setFilter] = useState("");
  const listedIds = new Set(listed.map((v) => v.id));
  // Volumes the list does not show (RBD images, or not on a loaded page) stay as typed text.
  const [others, setOthers] = useState((plan?.volumes ?? []).filter((v) => !/^[0-9a-f-]{36}$/.test(v)).join(", "));
  const named = [...new Set([...chosen, ...others.split(",").map((v) => v.trim()).filter(Boolean)])];
  // A Cinder group instead of volumes: the plan protects the group's volumes and follows it.
  const [group, setGroup] = useState(plan?.cinder_group ?? "");
  const [copyTarget, setCopyTarget] = useState(plan?.offsite?.target ?? "");
  const [copyEvery, setCopyEvery] = useState<CopyEvery>(plan?.offsite?.every ?? "week");
  const targets = useTargets();
  const followed = group.trim().toLowerCase();

  const window = windowStart && windowEnd ? { start: windowStart, end: windowEnd } : null;
  const draftRules = rules.map((r) => ({
    kind: r.kind,
    ...ruleOf(r.spec),
    ...(r.timezone ? { timezone: r.timezone } : {}),
    ...(r.start && r.spec.repeats === "custom" ? { start: r.start } : {}),
  }));
  const draft: Draft = { rules: draftRules, timezone, window, retention, count: 5, ...(plan ? { plan_id: plan.id } : {}) };
  const typed = useDeferredValue(JSON.stringify(draft));
  const preview = usePlanPreview(typed);
  const qos = {
    qos_bytes_per_second: qosMiB.trim() ? Math.round(Number(qosMiB) * MiB) : null,
    qos_ops_per_second: qosOps.trim() ? Math.round(Number(qosOps)) : null,
  };
  const save = useSavePlan(plan);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const what = followed
      ? followed === plan?.cinder_group
        ? {}
        : { cinder_group: followed }
      : { volumes: named, ...(plan?.cinder_group ? { cinder_group: null } : {}) };
    // The copies' own retention is kept as it was (the API's; the editor does not set it).
    const offsite = copyTarget ? { target: copyTarget, every: copyEvery, retention: plan?.offsite?.retention ?? null } : null;
    save.mutate({ name, ...what, rules: draftRules, timezone, window, retention, ...qos, offsite }, { onSuccess: onDone });
  };
  const setRule = (index: number, change: Partial<RuleRow>) =>
    setRules(rules.map((r, i) => (i === index ? { ...r, ...change } : r)));
  const title = plan ? `Edit plan ${plan.name}` : "New plan";
  return (
    <form className="editor" onSubmit={submit} aria-label={title}>
      <div className="editor-fields">
        <h3>{title}</h3>
        <label>
          Name
          <input value={name} onChange={(e) => setName(e.target.value)} required />
        </label>
        <label>
          Timezone
          <input value={timezone} onChange={(e) => setTimezone(e.target.value)} list="timezones" required />
          <datalist id="timezones">
            {ZONES.map((z) => (
              <option key={z} value={z} />
            ))}
          </datalist>
        </label>
        {rules.map((rule, index) => (
          <RuleFields
            key={index}
            index={index}
            rule={rule}
            onChange={(change) => setRule(index, change)}
            onRemove={rules.length > 1 ? () => setRules(rules.filter((_, i) => i !== index)) : undefined}
          />
        ))}
        <div className="row">
          <button type="button" onClick={() => setRules([...rules, { kind: "full", spec: blankSpec("monthly") }])}>
            Add rule
          </button>
        </div>
        <fieldset>
          <legend>Backup window (optional; jobs start only between)</legend>
          <label>
            From
            <input type="time" value={windowStart} onChange={(e) => setWindowStart(e.target.value)} />
          </label>
          <label>
            Until
            <input type="time" value={windowEnd} onChange={(e) => setWindowEnd(e.target.value)} />
          </label>
        </fieldset>
        <fieldset>
          <legend>Speed limit per job (optional)</legend>
          <label>
            MiB/s
            <input type="number" min={0} step="any" value={qosMiB} onChange={(e) => setQosMiB(e.target.value)} />
          </label>
          <label>
            Operations/s
            <input type="number" min={0} value={qosOps} onChange={(e) => setQosOps(e.target.value)} />
          </label>
        </fieldset>
        <fieldset>
          <legend>Retention</legend>
          {RETENTION_KEYS.map((key) => (
            <label key={key}>
              {key.replace("_", " ")}
              <input
                type="number"
                min={0}
                value={retention[key] ?? 0}
                onChange={(e) => setRetention({ ...retention, [key]: Number(e.target.value) || 0 })}
              />
            </label>
          ))}
        </fieldset>
        <fieldset>
          <legend>Off-site copy (optional)</legend>
          <label>
            Copy to
            <select value={copyTarget} onChange={(e) => setCopyTarget(e.target.value)}>
              <option value="">no off-site copy</option>
              {copyTargets(targets.data?.targets ?? [], plan?.target ?? "").map((t) => (
                <option key={t.name} value={t.name}>
                  {t.name} ({t.kind})
                </option>
              ))}
            </select>
          </label>
          <label>
            Which
            <select value={copyEvery} disabled={!copyTarget} onChange={(e) => setCopyEvery(e.target.value as CopyEvery)}>
              <option value="backup">every restore point</option>
              <option value="day">the first of each day</option>
              <option value="week">the first of each week</option>
              <option value="month">the first of each month</option>
            </select>
          </label>
          <p className="muted small">{copyPolicyText(copyTarget ? { target: copyTarget, every: copyEvery } : null)}</p>
          <ErrorNote error={targets.error} />
        </fieldset>
        <label>
          Cinder group <span className="muted">(instead of volumes: its volumes, followed as they join and leave it)</span>
          <input value={group} onChange={(e) => setGroup(e.target.value)} placeholder="group id" />
        </label>
        <fieldset className="volume-choices" disabled={Boolean(followed)}>
          <legend>{followed ? "Volumes: those of the Cinder group" : `Volumes (${named.length} chosen)`}</legend>
          <input aria-label="Filter volumes" placeholder="filter by name" value={filter} onChange={(e) => setFilter(e.target.value)} />
          <div className="choices" role="group" tabIndex={0} aria-label="Volumes to protect">
            {listed
              .filter((v) => (v.name || v.id).toLowerCase().includes(filter.toLowerCase()))
              .map((v) => (
                <label key={v.id} className="inline">
                  <input
                    type="checkbox"
                    checked={chosen.includes(v.id)}
                    onChange={(e) => setChosen(e.target.checked ? [...chosen, v.id] : chosen.filter((id) => id !== v.id))}
                  />
                  {v.name || v.id}
                </label>
              ))}
            <ShowMore pages={volumes} what="volumes" />
          </div>
          {chosen.some((id) => !listedIds.has(id) && /^[0-9a-f-]{36}$/.test(id)) && (
            <p className="muted small">
              Also chosen, not on the pages shown: {chosen.filter((id) => !listedIds.has(id) && /^[0-9a-f-]{36}$/.test(id)).join(", ")}
            </p>
          )}
          <label>
            Other volumes <span className="muted">(Cinder ids, or cluster/pool/image; comma-separated)</span>
            <input value={others} onChange={(e) => setOthers(e.target.value)} />
          </label>
        </fieldset>
        <div className="row">
          <button type="submit" className="primary" disabled={save.isPending || !(named.length || followed)}>
            {save.isPending ? "Saving…" : "Save plan"}
          </button>
          <button type="button" onClick={onDone}>
            Cancel
          </button>
        </div>
        <ErrorNote error={save.error} />
      </div>
      <aside className={`editor-preview ${preview.isPlaceholderData ? "stale" : ""}`} aria-label="Preview" aria-busy={preview.isPlaceholderData}>
        {preview.error ? <ErrorNote error={preview.error} /> : preview.data && <PreviewPane preview={preview.data} />}
      </aside>
    </form>
  );
}

function RuleFields({ index, rule, onChange, onRemove }: { index: number; rule: RuleRow; onChange: (change: Partial<RuleRow>) => void; onRemove?: () => void }) {
  const spec = rule.spec;
  const set = (change: Partial<Spec>) => onChange({ spec: { ...spec, ...change } });
  return (
    <fieldset className="rule" aria-label={`Rule ${index + 1}`}>
      <legend>Rule {index + 1}</legend>
      <label>
        Makes
        <select value={rule.kind} onChange={(e) => onChange({ kind: e.target.value as Kind })}>
          <option value="incremental">incremental backups</option>
          <option value="full">full backups</option>
        </select>
      </label>
      <label>
        Repeats
        <select
          value={spec.repeats}
          onChange={(e) => {
            const repeats = e.target.value as Repeats;
            // Switching to custom starts from the rule as it is, to be edited.
            set(repeats === "custom" ? { repeats, text: ruleOf(spec).cron ?? ruleOf(spec).rrule ?? "" } : { repeats });
          }}
        >
          <option value="hourly">every hour</option>
          <option value="daily">every day</option>
          <option value="weekly">on weekdays…</option>
          <option value="monthly">on a day of the month</option>
          <option value="custom">custom (cron or RRULE)</option>
        </select>
      </label>
      {spec.repeats === "hourly" && (
        <label>
          At minute
          <input type="number" min={0} max={59} value={spec.minute} onChange={(e) => set({ minute: Number(e.target.value) || 0 })} />
        </label>
      )}
      {["daily", "weekly", "monthly"].includes(spec.repeats) && (
        <label>
          At
          <input type="time" value={spec.time} onChange={(e) => e.target.value && set({ time: e.target.value })} required />
        </label>
      )}
      {spec.repeats === "monthly" && (
        <label>
          Day
          <input type="number" min={1} max={28} value={spec.monthDay} onChange={(e) => set({ monthDay: Number(e.target.value) || 1 })} />
        </label>
      )}
      {spec.repeats === "weekly" && (
        <div className="weekdays" role="group" aria-label="Weekdays">
          {WEEKDAYS.map((day, d) => (
            <label key={day} className="inline">
              <input
                type="checkbox"
                checked={spec.weekdays.includes(d)}
                onChange={(e) => set({ weekdays: e.target.checked ? [...spec.weekdays, d] : spec.weekdays.filter((x) => x !== d) })}
              />
              {day.slice(0, 3)}
            </label>
          ))}
        </div>
      )}
      {spec.repeats === "custom" && (
        <label className="wide">
          Rule (cron or RRULE)
          <input value={spec.text} onChange={(e) => set({ text: e.target.value })} placeholder="0 2 * * *  or  FREQ=WEEKLY;BYDAY=SU;BYHOUR=2" required />
        </label>
      )}
      {onRemove && (
        <button type="button" className="danger" onClick={onRemove}>
          Remove rule
        </button>
      )}
    </fieldset>
  );
}

function PreviewPane({ preview }: { preview: Schemas["DraftPreview"] }) {
  const simulated = preview.retention;
  const existing = preview.existing;
  return (
    <>
      <h4>Schedule</h4>
      <ul>
        {preview.rules.map((text) => (
          <li key={text}>{text}</li>
        ))}
      </ul>
      <h4>Next runs</h4>
      <ol className="next-runs">
        {preview.runs.map((run) => (
          <li key={run.at}>
            {when(run.at)}{" "}
            <span className="muted">
              ({run.kind}; {run.local.slice(11, 16)} {run.timezone}
              {run.starts_at !== run.at && `; starts ${when(run.starts_at)}, when the window opens`})
            </span>
          </li>
        ))}
      </ol>
      {existing && (
        <>
          <h4>This plan's restore points</h4>
          <p className="existing-summary">
            Saved like this, the next prune keeps {existing.kept} and deletes {existing.pruned} of {existing.kept + existing.pruned}.
          </p>
          <ul className="kept small" tabIndex={0} aria-label="This plan's restore points, kept or deleted">
            {existing.restore_points.slice(0, 60).map((item) => (
              <li key={item.restore_point_id} data-verdict={item.keep ? "kept" : "pruned"}>
                {when(item.created_at)}{" "}
                <span className={`tag tag-${item.keep ? "succeeded" : "failed"}`}>{item.keep ? "kept" : "deleted"}</span>
                <span className="muted">
                  {item.kind}
                  {item.kept_by.length > 0 && ` · ${item.kept_by.join(", ")}`}
                </span>
              </li>
            ))}
          </ul>
        </>
      )}
      <h4>Retention</h4>
      <p className="retention-summary">
        Of the {simulated.made} backups this schedule makes in {simulated.days} days, it keeps {simulated.kept.length}
        {simulated.kept.length > 0 && `, the oldest from ${simulated.kept.at(-1)?.local_date}`}.
      </p>
      <RetentionStrip simulation={simulated} />
      {/* Focusable: it scrolls, and a keyboard must be able to scroll it too. */}
      <ul className="kept small" tabIndex={0} aria-label="Restore points kept">
        {simulated.kept.slice(0, 30).map((k) => (
          <li key={k.at}>
            {k.local_date} <span className="muted">{k.kind} · {k.kept_by.join(", ")}</span>
          </li>
        ))}
      </ul>
    </>
  );
}
