import { describe, expect, it } from "vitest";
import { deliveryOutcome, EVENT_TYPES, eventsSummary, webhookState } from "./webhooks";

describe("eventsSummary", () => {
  it("says every event for none chosen or all of them", () => {
    expect(eventsSummary([])).toBe("every event");
    expect(eventsSummary([...EVENT_TYPES])).toBe("every event");
  });
  it("lists the ones chosen", () => {
    expect(eventsSummary(["backup.create.error", "backup.restore.error"])).toBe("backup.create.error, backup.restore.error");
  });
});

describe("webhookState", () => {
  it("tells a webhook its owner disabled from one Cairn disabled, with Cairn's reason", () => {
    expect(webhookState({ enabled: true, disabled_reason: null }).label).toBe("enabled");
    expect(webhookState({ enabled: false, disabled_reason: null })).toEqual({ label: "disabled", tag: "paused" });
    expect(webhookState({ enabled: false, disabled_reason: "5 deliveries failed in a row" })).toEqual({
      label: "disabled by Cairn",
      tag: "failed",
      reason: "5 deliveries failed in a row",
    });
  });
});

describe("deliveryOutcome", () => {
  it("says what became of a delivery, the error only while it has not succeeded", () => {
    expect(deliveryOutcome({ status: "succeeded", attempts: 1, last_status_code: 204, last_error: null })).toBe("succeeded · 1 attempt · HTTP 204");
    expect(deliveryOutcome({ status: "pending", attempts: 2, last_status_code: 503, last_error: "receiver answered 503" })).toBe(
      "pending · 2 attempts · HTTP 503 · receiver answered 503",
    );
    expect(deliveryOutcome({ status: "failed", attempts: 4, last_status_code: null, last_error: "connection refused" })).toBe(
      "failed · 4 attempts · connection refused",
    );
  });
});
