import { describe, expect, it } from "vitest";
import { perPage, withParam } from "./paging";

describe("perPage", () => {
  it("takes a size the list offers and falls back otherwise", () => {
    expect(perPage(new URLSearchParams("per_page=200"), 50)).toBe(200);
    expect(perPage(new URLSearchParams(""), 50)).toBe(50);
    expect(perPage(new URLSearchParams("per_page=100000"), 50)).toBe(50);
    expect(perPage(new URLSearchParams("per_page=abc"), 100)).toBe(100);
  });
});

describe("withParam", () => {
  it("sets one parameter and keeps the others, a flag without its '='", () => {
    expect(withParam("/volumes?unprotected", "per_page", "100")).toBe("/volumes?unprotected&per_page=100");
    expect(withParam("/volumes?per_page=25", "per_page", "50")).toBe("/volumes?per_page=50");
    expect(withParam("/volumes?unprotected&per_page=25", "unprotected", null)).toBe("/volumes?per_page=25");
    expect(withParam("/volumes?unprotected", "unprotected", null)).toBe("/volumes");
  });
});
