import { describe, expect, it } from "vitest";
import { copyPolicyText, copyTargets, groupRestoreRequest } from "./copies";

const target = (name: string, kind = "rbd", isDefault = false) => ({ name, kind, default: isDefault, max_jobs: 4 });

describe("copyTargets", () => {
  it("offers the targets that receive copies, the default first, never the restore point's own", () => {
    const all = [target("s3", "s3"), target("local", "rbd", true), target("dir", "directory"), target("offsite"), target("s3-b", "s3", true)];
    expect(copyTargets(all, "local").map((t) => t.name)).toEqual(["s3-b", "dir", "s3"]);
    expect(copyTargets(all, "s3").map((t) => t.name)).toEqual(["s3-b", "dir"]);
  });
  it("offers nothing where every target is an RBD pool", () => {
    expect(copyTargets([target("local", "rbd", true), target("offsite")], "local")).toEqual([]);
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
