import { describe, expect, it } from "vitest";
import { retentionText } from "./Plans";

describe("retentionText", () => {
  it("names each rule that keeps something", () => {
    expect(retentionText({ keep_last: 0, daily: 7, weekly: 4, monthly: 12, yearly: 0 })).toBe(
      "7 daily, 4 weekly, 12 monthly",
    );
    expect(retentionText({ keep_last: 3, daily: 0, weekly: 0, monthly: 0, yearly: 2 })).toBe("last 3, 2 yearly");
  });
  it("says that a retention of zeros keeps everything", () => {
    expect(retentionText({ keep_last: 0, daily: 0, weekly: 0, monthly: 0, yearly: 0 })).toBe("keep everything");
  });
});
