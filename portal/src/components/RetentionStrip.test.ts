import { describe, expect, it } from "vitest";
import { stripMarks } from "./RetentionStrip";

const NOW = Date.parse("2026-11-25T12:00:00Z");
const DAY = 86_400_000;
/** A simulated restore point `daysAgo` days before NOW, kept by `rules`. */
const point = (daysAgo: number, ...rules: string[]) => {
  const at = new Date(NOW - daysAgo * DAY).toISOString();
  return { at, kept_by: rules, kind: "incremental" as const, local_date: at.slice(0, 10) };
};

describe("stripMarks", () => {
  it("places each kept restore point on its day, the oldest left and now right", () => {
    const marks = stripMarks(
      { days: 100, made: 3, kept: [point(0, "daily"), point(50, "weekly"), point(100, "monthly")] },
      NOW,
    );
    expect(marks.map((m) => m.x)).toEqual([1, 0.5, 0]);
  });
  it("names a mark by the longest-lived rule that keeps it", () => {
    const marks = stripMarks(
      { days: 30, made: 2, kept: [point(1, "daily", "monthly", "weekly"), point(2, "last", "daily")] },
      NOW,
    );
    expect(marks.map((m) => m.rule)).toEqual(["monthly", "daily"]);
  });
  it("keeps a point older than the span (or in the future) on the strip's edge", () => {
    const marks = stripMarks(
      { days: 10, made: 2, kept: [point(40, "yearly"), point(-1, "last")] },
      NOW,
    );
    expect(marks.map((m) => m.x)).toEqual([0, 1]);
  });
});
