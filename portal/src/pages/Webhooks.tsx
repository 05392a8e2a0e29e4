import { useState, type FormEvent } from "react";
import { can, useSession } from "../api/session";
import { useChangeWebhook, useCreateWebhook, useDeliveries, useWebhooks, type Webhook } from "../api/webhooks";
import { confirmed } from "../confirm";
import { ErrorNote } from "../components/ErrorNote";
import { when } from "../format";
import { deliveryOutcome, EVENT_TYPES, eventsSummary, webhookState } from "../webhooks";

/** The project's webhooks: what each hears and whether it works (its deliveries), and
 * making, enabling, disabling, testing and deleting one. */
export function Webhooks() {
  const { data: session } = useSession();
  const webhooks = useWebhooks();
  const mayChange = can(session, "webhook:create");
  const list = webhooks.data?.webhooks ?? [];
  return (
    <section>
      <header className="page-head">
        <h2>Webhooks</h2>
      </header>
      <p className="muted">
        Cairn POSTs a signed CloudEvent to each webhook when a backup, restore, verify or delete ends, and when a plan changes.
      </p>
      {mayChange && <NewWebhook />}
      <ErrorNote error={webhooks.error} />
      {webhooks.isLoading && <p className="muted">Loading webhooks…</p>}
      {webhooks.data && list.length === 0 && <p className="muted">No webhooks in this project.</p>}
      {list.length > 0 && (
        <table>
          <thead>
            <tr>
              <th>Receiver</th>
              <th>Events</th>
              <th>State</th>
              <th>Failed deliveries</th>
              <th aria-label="Actions" />
            </tr>
          </thead>
          <tbody>
            {list.map((w) => (
              <WebhookRow key={w.id} webhook={w} mayChange={mayChange} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function NewWebhook() {
  const create = useCreateWebhook();
  const [url, setUrl] = useState("");
  const [description, setDescription] = useState("");
  const [events, setEvents] = useState<string[]>([]);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate(
      { url, description: description || null, event_types: events },
      {
        onSuccess: () => {
          setUrl("");
          setDescription("");
          setEvents([]);
        },
      },
    );
  };
  return (
    <form className="card" onSubmit={submit} aria-label="New webhook">
      <label>
        URL
        <input type="url" value={url} onChange={(e) => setUrl(e.target.value)} required placeholder="https://example.net/cairn" />
      </label>
      <label>
        Description <span className="muted">(optional)</span>
        <input value={description} onChange={(e) => setDescription(e.target.value)} />
      </label>
      <fieldset className="choices">
        <legend>Events (none chosen: every event)</legend>
        {EVENT_TYPES.map((t) => (
          <label key={t} className="inline">
            <input
              type="checkbox"
              checked={events.includes(t)}
              onChange={(e) => setEvents((now) => (e.target.checked ? [...now, t] : now.filter((o) => o !== t)))}
            />{" "}
            {t}
          </label>
        ))}
      </fieldset>
      <button type="submit" className="primary" disabled={create.isPending || url.trim() === ""}>
        {create.isPending ? "Creating…" : "Create webhook"}
      </button>
      <ErrorNote error={create.error} />
      {create.data && (
        <p role="status" className="done">
          Webhook created. Its signing secret is shown this once; keep it where the receiver checks signatures:{" "}
          <code>{create.data.secret}</code>
        </p>
      )}
    </form>
  );
}

function WebhookRow({ webhook, mayChange }: { webhook: Webhook; mayChange: boolean }) {
  const change = useChangeWebhook();
  const [open, setOpen] = useState(false);
  const state = webhookState(webhook);
  const name = webhook.description || webhook.url_host;
  return (
    <>
      <tr data-webhook={webhook.url_host}>
        <td>
          <strong>{name}</strong>
          <div className="muted small">{webhook.url ?? webhook.url_host}</div>
        </td>
        <td className="small">{eventsSummary(webhook.event_types)}</td>
        <td>
          <span className={`tag tag-${state.tag}`}>{state.label}</span>
          {state.reason && <div className="muted small">{state.reason}</div>}
        </td>
        <td>{webhook.failed_deliveries}</td>
        <td className="actions">
          <button type="button" aria-expanded={open} onClick={() => setOpen(!open)} aria-label={`Deliveries of ${name}`}>
            Deliveries
          </button>
          {mayChange && (
            <>
              <button type="button" disabled={change.isPending} onClick={() => change.mutate({ webhook, kind: webhook.enabled ? "disable" : "enable" })}>
                {webhook.enabled ? "Disable" : "Enable"}
              </button>
              <button type="button" disabled={change.isPending || !webhook.enabled} onClick={() => change.mutate({ webhook, kind: "test" })}>
                Send test
              </button>
              <button
                type="button"
                className="danger"
                disabled={change.isPending}
                onClick={() => confirmed(`Delete the webhook to ${webhook.url_host}?`) && change.mutate({ webhook, kind: "delete" })}
              >
                Delete
              </button>
            </>
          )}
          <ErrorNote error={change.error} />
        </td>
      </tr>
      {open && (
        <tr>
          <td colSpan={5}>
            <Deliveries webhookId={webhook.id} />
          </td>
        </tr>
      )}
    </>
  );
}

function Deliveries({ webhookId }: { webhookId: string }) {
  const deliveries = useDeliveries(webhookId);
  const list = deliveries.data?.deliveries ?? [];
  return (
    <div aria-live="polite">
      <ErrorNote error={deliveries.error} />
      {deliveries.data && list.length === 0 && <p className="muted small">Nothing delivered yet.</p>}
      {list.length > 0 && (
        <table className="small" aria-label="Deliveries">
          <thead>
            <tr>
              <th>Event</th>
              <th>At</th>
              <th>Outcome</th>
            </tr>
          </thead>
          <tbody>
            {list.map((d) => (
              <tr key={d.id} data-delivery={d.event_type}>
                <td>{d.event_type}</td>
                <td>{when(d.delivered_at ?? d.created_at)}</td>
                <td>
                  <span className={`tag tag-${d.status}`}>{d.status}</span> {deliveryOutcome(d)}
                  {d.next_attempt_at && d.status === "pending" && <span className="muted"> · next try {when(d.next_attempt_at)}</span>}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
