import { describe, expect, it } from "vitest";
import { copyPolicyText, copyTargets, groupRestoreRequest } from "./copies";

const target = (name: string, kind = "rbd", isDefault = false) => ({ name, kind, default: isDefault, max_jobs: 4 });

describe("copyTargets", () => {
  it("offers every target but the restore point's own, the default first", () => {
    const all = [target("s3", "s3"), target("local", "rbd", true), target("dir", "directory"), target("offsite")];
    expect(copyTargets(all, "offsite").map((t) => t.name)).toEqual(["local", "dir", "s3"]);
    expect(copyTargets(all, "local").map((t) => t.name)).toEqual(["dir", "offsite", "s3"]);
  });
  it("offers nothing when the restore point's target is the only one", () => {
    expect(copyTargets([target("local", "rbd", true)], "local")).toEqual([]);
  });
});

describe("copyPolicyText", () => {
  it("says what a plan copies off-site and how often", () => {
    expect(copyPolicyText(null)).toBe("no off-site copy");
    expect(copyPolicyText({ target: "s3" })).toBe("the first restore point of each week copied to s3");
    expect(copyPolicyText({ target: "s3", every: "day" })).toBe("the first restore point of each day copied to s3");
    expect(copyPolicyText({ target: "s3", every: "backup" })).toBe("every restore point copied to s3");
  });
});

describe("groupRestoreRequest", () => {
  it("names exactly one destination, in place always a copy", () => {
    expect(groupRestoreRequest("new_volumes", " restored- ", true)).toEqual({ name_prefix: "restored-", mode: "instant" });
    expect(groupRestoreRequest("images", "volumes/r-", false)).toEqual({ target_prefix: "volumes/r-", mode: "copy" });
    expect(groupRestoreRequest("in_place", "ignored", true)).toEqual({ in_place: true });
  });
});
