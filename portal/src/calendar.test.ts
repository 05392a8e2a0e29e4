import { describe, expect, it } from "vitest";
import { calendarCells, localToday } from "./calendar";

describe("the restore point calendar", () => {
  it("ends with today's week, Monday on top, and counts each day", () => {
    // 2026-11-25 is a Wednesday.
    const cells = calendarCells([{ date: "2026-11-23", full: 1, incremental: 2 }, { date: "2026-11-08", full: 0, incremental: 1 }, { date: "2026-10-31", full: 5, incremental: 0 }], "2026-11-25", 4);
    expect(cells).toHaveLength(28);
    expect(cells[0]).toMatchObject({ date: "2026-11-02", week: 0, weekday: 0 }); // a Monday
    expect(cells.some((c) => c.full === 5)).toBe(false); // before the first week
    expect(cells.find((c) => c.date === "2026-11-23")).toMatchObject({ full: 1, incremental: 2, week: 3, weekday: 0 });
    expect(cells.find((c) => c.date === "2026-11-08")).toMatchObject({ incremental: 1, week: 0, weekday: 6 });
    expect(cells.find((c) => c.date === "2026-11-25")).toMatchObject({ future: false, weekday: 2 });
    expect(cells.filter((c) => c.future).map((c) => c.date)).toEqual(["2026-11-26", "2026-11-27", "2026-11-28", "2026-11-29"]);
  });

  it("takes today from the user's zone", () => {
    const instant = new Date("2026-11-25T23:30:00Z");
    expect(localToday("UTC", instant)).toBe("2026-11-25");
    expect(localToday("Asia/Tokyo", instant)).toBe("2026-11-26");
    expect(localToday("America/Los_Angeles", instant)).toBe("2026-11-25");
  });
});
