/// <reference types="vite/client" />
import { describe, expect, it } from "vitest";

// The portal shows text other systems wrote (Cinder's volume names and errors, names saved
// before the API refused control characters): React renders it as text, never as markup,
// as long as no component hands a string to the DOM's HTML parser, builds a link from it
// or evaluates it. This keeps it so.
const SOURCES: Record<string, string> = import.meta.glob(
  ["./**/*.{ts,tsx}", "!./**/*.test.ts", "!./**/*.d.ts"],
  { query: "?raw", import: "default", eager: true },
);
const MARKUP = /dangerouslySetInnerHTML|\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|new Function|\beval\(/;

describe("the portal's components", () => {
  it("are all read", () => {
    expect(Object.keys(SOURCES)).toContain("./pages/Volumes.tsx");
  });
  it("never hand a string to the HTML parser or evaluate one", () => {
    expect(Object.keys(SOURCES).filter((path) => MARKUP.test(SOURCES[path] ?? ""))).toEqual([]);
  });
  it("make links only in the router's Link, from the portal's own paths", () => {
    expect(Object.keys(SOURCES).filter((path) => /\bhref=/.test(SOURCES[path] ?? ""))).toEqual(["./router.tsx"]);
  });
});
