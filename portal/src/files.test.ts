import { describe, expect, it } from "vitest";
import {
  archiveHref,
  ariaSort,
  baseName,
  breadcrumbs,
  changes,
  browserPath,
  byCodePoint,
  contentHref,
  joinPath,
  nextSort,
  normalPath,
  parentPath,
  permissions,
  sortEntries,
} from "./files";

const entry = (name: string, type: string, size: number, mtime: string | null) => ({ name, type, size, mtime });

describe("paths in a restore point", () => {
  it("join, part and name the way the API writes them", () => {
    expect(joinPath("/", "etc")).toBe("/etc");
    expect(joinPath("/etc/", "hosts")).toBe("/etc/hosts");
    expect(joinPath("/etc", "a b?c#d")).toBe("/etc/a b?c#d");
    expect(parentPath("/etc/nginx/nginx.conf")).toBe("/etc/nginx");
    expect(parentPath("/etc")).toBe("/");
    expect(parentPath("/")).toBe("/");
    expect(baseName("/etc/nginx/")).toBe("nginx");
    expect(baseName("/")).toBe("");
  });

  it("are made absolute without empty or dot steps, and keep .. for the API to refuse", () => {
    expect(normalPath("")).toBe("/");
    expect(normalPath("etc//nginx/./")).toBe("/etc/nginx");
    expect(normalPath("/etc/../root")).toBe("/etc/../root");
  });

  it("give one crumb per step, each opening its own directory", () => {
    expect(breadcrumbs("/")).toEqual([{ name: "/", path: "/" }]);
    expect(breadcrumbs("/etc/nginx/conf.d", "vda1")).toEqual([
      { name: "vda1", path: "/" },
      { name: "etc", path: "/etc" },
      { name: "nginx", path: "/etc/nginx" },
      { name: "conf.d", path: "/etc/nginx/conf.d" },
    ]);
  });

  it("ride in the screen's address and the API's download addresses, escaped", () => {
    expect(browserPath("rp 1", "/a&b/c", 2)).toBe("/restore-points/rp%201/files?path=%2Fa%26b%2Fc&partition=2");
    expect(browserPath("rp", "etc/")).toBe("/restore-points/rp/files?path=%2Fetc");
    expect(contentHref("rp", "/etc/x y#1")).toBe("/v1/restore-points/rp/files/content?path=%2Fetc%2Fx+y%231");
    expect(contentHref("rp", "/boot/grub.cfg", 0)).toBe("/v1/restore-points/rp/files/content?path=%2Fboot%2Fgrub.cfg&partition=0");
    expect(archiveHref("rp", ["/etc/hosts", "/home"], "zip", 1)).toBe(
      "/v1/restore-points/rp/files/archive?path=%2Fetc%2Fhosts&path=%2Fhome&partition=1&format=zip",
    );
  });
});

describe("a listing's order", () => {
  const entries = [
    entry("b.txt", "file", 300, "2026-11-20T00:00:00Z"),
    entry("A.txt", "file", 100, null),
    entry("zeta", "dir", 4096, "2026-11-01T00:00:00Z"),
    entry("alpha", "dir", 4096, "2026-11-25T00:00:00Z"),
    entry("c.txt", "file", 200, "2026-11-26T00:00:00Z"),
    entry("link", "symlink", 6, "2026-11-02T00:00:00Z"),
  ];
  const names = (sorted: { name: string }[]) => sorted.map((e) => e.name);

  it("keeps directories first and sorts by name as the API pages (by code point)", () => {
    expect(names(sortEntries(entries, { key: "name", descending: false }))).toEqual(["alpha", "zeta", "link", "A.txt", "b.txt", "c.txt"]);
    expect(names(sortEntries(entries, { key: "name", descending: true }))).toEqual(["zeta", "alpha", "link", "c.txt", "b.txt", "A.txt"]);
    expect(byCodePoint("é", "z")).toBeGreaterThan(0);
    expect(byCodePoint("\u{1F600}", "\uFFFF")).toBeGreaterThan(0); // not UTF-16 order
  });

  it("sorts by size and time, an unknown time last either way", () => {
    expect(names(sortEntries(entries, { key: "size", descending: true }))).toEqual(["alpha", "zeta", "link", "b.txt", "c.txt", "A.txt"]);
    expect(names(sortEntries(entries, { key: "mtime", descending: false }))).toEqual(["zeta", "alpha", "link", "b.txt", "c.txt", "A.txt"]);
    expect(names(sortEntries(entries, { key: "mtime", descending: true }))).toEqual(["alpha", "zeta", "link", "c.txt", "b.txt", "A.txt"]);
  });

  it("by type groups the types, names within", () => {
    expect(names(sortEntries(entries, { key: "type", descending: false }))).toEqual(["alpha", "zeta", "A.txt", "b.txt", "c.txt", "link"]);
  });

  it("does not change the page it was given", () => {
    const before = names(entries);
    sortEntries(entries, { key: "size", descending: false });
    expect(names(entries)).toEqual(before);
  });

  it("turns round on a second click of a heading, starts ascending on another", () => {
    const byName = { key: "name", descending: false } as const;
    expect(nextSort(byName, "name")).toEqual({ key: "name", descending: true });
    expect(nextSort({ key: "name", descending: true }, "size")).toEqual({ key: "size", descending: false });
    expect(ariaSort(byName, "name")).toBe("ascending");
    expect(ariaSort(byName, "size")).toBe("none");
  });
});

describe("a mode", () => {
  it("reads as ls shows its permissions", () => {
    expect(permissions(0o100644)).toBe("rw-r--r--");
    expect(permissions(0o40755)).toBe("rwxr-xr-x");
    expect(permissions(0)).toBe("---------");
  });
});

describe("a file's versions", () => {
  it("are marked where their content changed from the next older one", () => {
    const v = (present: boolean, sha256: string | null, size = 1, mtime = "t") => ({ present, sha256, size, mtime });
    expect(
      changes([v(true, "b"), v(true, "a"), v(true, "a"), v(false, null), v(false, null), v(true, null, 2), v(true, null, 2, "u"), v(true, "x")]),
    ).toEqual([true, false, true, false, true, true, true, false]);
    expect(changes([])).toEqual([]);
  });
});
