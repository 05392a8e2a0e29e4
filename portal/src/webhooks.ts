// What the webhook screen says of a webhook and its deliveries, as pure functions.
import type { Delivery, Webhook } from "./api/webhooks";

/** The events a webhook may ask for, in the API's order (services/webhooks/events.py;
 * tests/unit/api/test_portal_webhook_events.py keeps the two lists one). */
export const EVENT_TYPES = [
  "backup.create.start",
  "backup.create.end",
  "backup.create.error",
  "backup.restore.start",
  "backup.restore.end",
  "backup.restore.error",
  "restore_point.delete.end",
  "restore_point.delete.error",
  "restore_point.verify.end",
  "restore_point.verify.error",
  "plan.create.end",
  "plan.update.end",
  "plan.delete.end",
  "webhook.test",
] as const;

/** The events a webhook hears, in words: none chosen is every one. */
export function eventsSummary(types: readonly string[]): string {
  if (types.length === 0 || EVENT_TYPES.every((t) => types.includes(t))) return "every event";
  return types.join(", ");
}

/** A webhook's state: enabled, disabled by its owner, or disabled by Cairn after failed
 * deliveries (with Cairn's reason, so the owner knows what to fix before enabling it). */
export function webhookState(webhook: Pick<Webhook, "enabled" | "disabled_reason">): { label: string; tag: string; reason?: string } {
  if (webhook.enabled) return { label: "enabled", tag: "enabled" };
  if (webhook.disabled_reason) return { label: "disabled by Cairn", tag: "failed", reason: webhook.disabled_reason };
  return { label: "disabled", tag: "paused" };
}

/** One delivery's outcome: succeeded (with the receiver's status code), still trying (and
 * when next), or given up, with the last error. */
export function deliveryOutcome(d: Pick<Delivery, "status" | "attempts" | "last_status_code" | "last_error">): string {
  const code = d.last_status_code ? `HTTP ${d.last_status_code}` : undefined;
  const tries = `${d.attempts} attempt${d.attempts === 1 ? "" : "s"}`;
  return [d.status, tries, code, d.status === "succeeded" ? undefined : d.last_error].filter(Boolean).join(" · ");
}
