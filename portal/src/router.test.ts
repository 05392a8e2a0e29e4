import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { archiveHref, contentHref } from "./files";
import { Download } from "./router";

const drawn = (to: string) => renderToStaticMarkup(createElement(Download, { to, label: "Download x", children: "Download" }));

// A download is the one link the portal makes to something not its own screen: the API's
// file routes, on the same origin. Nothing else becomes a link, whatever a path holds.
describe("a download link", () => {
  it("points at the API's file routes as files.ts builds them", () => {
    expect(drawn(contentHref("rp", "/etc/a\"b<c>.conf"))).toBe(
      '<a href="/v1/restore-points/rp/files/content?path=%2Fetc%2Fa%22b%3Cc%3E.conf" download="" aria-label="Download x" class="download">Download</a>',
    );
    expect(drawn(archiveHref("rp", ["/etc", "/home"], "zip"))).toContain('href="/v1/restore-points/rp/files/archive?path=%2Fetc&amp;path=%2Fhome&amp;format=zip"');
  });

  it("is no link at all for anything else", () => {
    for (const to of ["javascript:alert(1)", "https://evil.example/v1/restore-points/rp/files/content?path=%2F", "//evil.example/v1/x", "/v1/restore-points/rp/restore?x", "/v1/restore-points/a/b/files/content?path=%2F"]) {
      expect(drawn(to)).toBe("<span>Download</span>");
    }
  });
});
