/// <reference types="vite/client" />
import { describe, expect, it } from "vitest";

// A page is a screen and nothing else: App routes to it, and what two screens share (a
// component in components/, a hook in api/) lives outside pages/. So no page imports
// another page (they once imported each other's hooks and tables, in a circle), and
// nothing but App and a page's own test imports a page.
const SOURCES: Record<string, string> = import.meta.glob(["./**/*.{ts,tsx}", "!./**/*.d.ts"], {
  query: "?raw",
  import: "default",
  eager: true,
});

/** The modules `source` (at `path`, relative to src/) imports by a relative path, as paths
 * relative to src/ without their extension. */
function relativeImports(path: string, source: string): string[] {
  const found = [...source.matchAll(/(?:\bfrom|\bimport)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)];
  return found.map(([, spec]) => {
    const parts = path.split("/").slice(0, -1);
    for (const step of (spec ?? "").split("/")) {
      if (step === "..") parts.pop();
      else if (step !== ".") parts.push(step);
    }
    return parts.join("/").replace(/\.(tsx?|css)$/, "");
  });
}

const isPage = (module: string) => module.startsWith("./pages/");
const withoutExtension = (path: string) => path.replace(/\.(test\.)?tsx?$/, "");

describe("pages", () => {
  it("are all read", () => {
    expect(Object.keys(SOURCES)).toContain("./pages/Volumes.tsx");
    expect(relativeImports("./App.tsx", SOURCES["./App.tsx"] ?? "")).toContain("./pages/Volumes");
  });

  it("import no other page, and only App and a page's own test import one", () => {
    const wrong = Object.entries(SOURCES).flatMap(([path, source]) =>
      relativeImports(path, source)
        .filter(isPage)
        .filter((module) => path !== "./App.tsx" && module !== withoutExtension(path))
        .map((module) => `${path} imports ${module}`),
    );
    expect(wrong).toEqual([]);
  });
});
