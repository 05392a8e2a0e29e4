import { describe, expect, it } from "vitest";
import { ago, bytes, duration, rate, volumeDetail, volumeLabel } from "./format";

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
    expect(duration(0.3)).toBe("0.3 s");
    expect(duration(1.25)).toBe("1.3 s");
    expect(duration(2)).toBe("2 s");
    expect(duration(9.96)).toBe("10 s");
    expect(duration(0.01)).toBe("< 0.1 s");
    expect(duration(0)).toBe("0 s");
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

describe("volumeLabel", () => {
  it("names a Cinder volume by its name, the RBD image beside it", () => {
    const job = { volume: "ceph-a/volumes/volume-3f0c6a2e", volume_name: "db" };
    expect(volumeLabel(job)).toBe("db");
    expect(volumeDetail(job)).toBe("ceph-a/volumes/volume-3f0c6a2e");
  });
  it("names an RBD image, or a nameless Cinder volume, by its image", () => {
    expect(volumeLabel({ volume: "ceph-a/volumes/demo", volume_name: null })).toBe("ceph-a/volumes/demo");
    expect(volumeDetail({ volume: "ceph-a/volumes/demo", volume_name: null })).toBeUndefined();
    expect(volumeLabel({ volume: null })).toBe("–");
  });
});
