import { describe, expect, it } from "vitest";
import { blankSpec, ruleOf, specOf } from "./schedule";

describe("the schedule builder", () => {
  it("writes the common shapes as cron lines", () => {
    expect(ruleOf({ ...blankSpec("daily"), time: "03:15" })).toEqual({ cron: "15 3 * * *" });
    expect(ruleOf({ ...blankSpec("hourly"), minute: 30 })).toEqual({ cron: "30 * * * *" });
    expect(ruleOf({ ...blankSpec("weekly"), time: "22:00", weekdays: [5, 1, 1] })).toEqual({ cron: "0 22 * * 1,5" });
    expect(ruleOf({ ...blankSpec("monthly"), time: "01:05", monthDay: 28 })).toEqual({ cron: "5 1 28 * *" });
  });

  it("keeps a custom text as the cron line or RRULE it is", () => {
    expect(ruleOf({ ...blankSpec("custom"), text: " 0 */6 * * * " })).toEqual({ cron: "0 */6 * * *" });
    expect(ruleOf({ ...blankSpec("custom"), text: "FREQ=WEEKLY;BYDAY=SU;BYHOUR=2" })).toEqual({
      rrule: "FREQ=WEEKLY;BYDAY=SU;BYHOUR=2",
    });
    expect(ruleOf({ ...blankSpec("custom"), text: "INTERVAL=2;FREQ=DAILY" })).toEqual({ rrule: "INTERVAL=2;FREQ=DAILY" });
  });

  it("opens a stored rule in the builder, and writes it back the same", () => {
    for (const cron of ["0 2 * * *", "30 * * * *", "0 22 * * 1,5", "5 1 28 * *", "45 23 * * 0"]) {
      const spec = specOf({ cron });
      expect(spec.repeats).not.toBe("custom");
      expect(ruleOf(spec)).toEqual({ cron });
    }
    expect(specOf({ cron: "0 2 * * 7" }).weekdays).toEqual([0]); // 7 is Sunday too
  });

  it("leaves what it cannot show as custom, unchanged", () => {
    for (const cron of ["0 */6 * * *", "0 2 1-7 * 1", "0 2 * 1 *", "0 2 31 * *", "61 2 * * *", "junk"]) {
      const spec = specOf({ cron });
      expect(spec.repeats).toBe("custom");
      expect(ruleOf(spec)).toEqual({ cron });
    }
    expect(specOf({ rrule: "FREQ=MONTHLY;BYMONTHDAY=1" })).toMatchObject({ repeats: "custom", text: "FREQ=MONTHLY;BYMONTHDAY=1" });
  });
});
