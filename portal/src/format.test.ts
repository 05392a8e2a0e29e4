import { describe, expect, it } from "vitest";
import { ago, bytes, duration, rate } from "./format";

describe("bytes", () => {
  it("uses binary units with one decimal, as Ceph and Cinder show sizes", () => {
    expect(bytes(0)).toBe("0 B");
    expect(bytes(1023)).toBe("1023 B");
    expect(bytes(1024)).toBe("1.0 KiB");
    expect(bytes(9.5 * 1024 * 1024)).toBe("9.5 MiB");
    expect(bytes(1024 ** 3)).toBe("1.0 GiB");
    expect(bytes(5 * 1024 ** 5)).toBe("5.0 PiB");
    expect(bytes(null)).toBe("–");
  });
  it("shows no rate when there is none", () => {
    expect(rate(0)).toBe("–");
    expect(rate(2 * 1024 * 1024)).toBe("2.0 MiB/s");
  });
});

describe("duration and ago", () => {
  it("picks the unit a person would", () => {
    expect(duration(42.4)).toBe("42 s");
    expect(duration(150)).toBe("3 min");
    expect(duration(5400)).toBe("1.5 h");
    expect(duration(3 * 86400)).toBe("3.0 days");
    expect(duration(undefined)).toBe("–");
  });
  it("says how long ago, or from now", () => {
    const now = Date.parse("2026-11-25T12:00:00Z");
    expect(ago("2026-11-25T11:58:00Z", now)).toBe("2 min ago");
    expect(ago("2026-11-25T14:00:00Z", now)).toBe("2.0 h from now");
    expect(ago(null, now)).toBe("never");
  });
});
