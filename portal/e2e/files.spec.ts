import { expect, test, type Download, type Page } from "@playwright/test";
import { accessible, required, signInKeystone } from "./support";
import { readFile } from "node:fs/promises";

// Set by tests/integration/openstack/test_portal.py: a Cinder volume of project A holding
// an ext4 filesystem (no partition table), backed up twice: /etc/app.conf changed between
// the two, /etc/hosts did not. CAIRN_E2E_FILES_TEXT is app.conf in the newer one.
const env = (name: string): string => required(name, "test_portal.py");
const PASSWORD = env("CAIRN_E2E_PASSWORD");
const SHOTS = env("CAIRN_E2E_SCREENSHOTS");
const VOLUME_ID = env("CAIRN_E2E_FILES_VOLUME_ID");
const NEWER = env("CAIRN_E2E_FILES_POINT");
const OLDER = env("CAIRN_E2E_FILES_OLDER_POINT");
const TEXT = env("CAIRN_E2E_FILES_TEXT");

const signIn = (page: Page, user: string) => signInKeystone(page, user, PASSWORD);


async function bytesOf(download: Download): Promise<Buffer> {
  return readFile(await download.path());
}

test("a member browses a restore point's files, downloads one and finds its versions", async ({ page }) => {
  await signIn(page, env("CAIRN_E2E_MEMBER"));
  // From the volume's page: each available restore point links to its files.
  await page.goto(`/volumes/${VOLUME_ID}`);
  await page.locator(`tr[data-restore-point="${NEWER}"]`).getByRole("link", { name: /^Files of the restore point of / }).click();
  await expect(page).toHaveURL(new RegExp(`/restore-points/${NEWER}/files\\?path=%2F$`));
  const crumbs = page.getByRole("navigation", { name: "Breadcrumb" });
  const listing = page.getByRole("table", { name: "Contents of /", exact: true });
  await expect(listing.locator("tr[data-entry]")).not.toHaveCount(0);

  // Keyboard only: the directory's link, reached by Tab, opens with Enter.
  const etc = listing.getByRole("link", { name: "etc/", exact: true });
  await etc.focus();
  await page.keyboard.press("Enter");
  await expect(page).toHaveURL(/path=%2Fetc$/);
  await expect(crumbs.locator('[aria-current="location"]')).toHaveText("etc");
  const rows = page.getByRole("table", { name: "Contents of /etc", exact: true }).locator("tr[data-entry]");
  await expect(rows.filter({ hasText: "app.conf" })).toHaveCount(1);

  // Sortable headings say their order to a screen reader.
  const size = page.getByRole("columnheader", { name: "Size" });
  await size.getByRole("button").click();
  await expect(size).toHaveAttribute("aria-sort", "ascending");
  await size.getByRole("button").click();
  await expect(size).toHaveAttribute("aria-sort", "descending");
  await page.screenshot({ path: `${SHOTS}/file-browser.png` });
  await accessible(page, "file browser");

  // One file: the browser streams it from the API's content route; its bytes are the file's.
  const app = page.locator('tr[data-entry="app.conf"]');
  const [file] = await Promise.all([page.waitForEvent("download"), app.getByRole("link", { name: "Download app.conf" }).click()]);
  expect(file.suggestedFilename()).toBe("app.conf");
  expect((await bytesOf(file)).toString("utf8")).toBe(TEXT);

  // Two selected: one zip archive holding both.
  await page.getByRole("checkbox", { name: "Select app.conf" }).check();
  await page.getByRole("checkbox", { name: "Select hosts" }).check();
  const selection = page.getByRole("group", { name: "Download several" });
  await expect(selection).toContainText("2 selected");
  const [zip] = await Promise.all([page.waitForEvent("download"), selection.getByRole("link", { name: "Download as zip" }).click()]);
  const archive = await bytesOf(zip);
  expect(archive.subarray(0, 4).toString("latin1")).toBe("PK\u0003\u0004");
  expect(archive.includes(Buffer.from("app.conf"))).toBe(true);
  expect(archive.includes(Buffer.from("hosts"))).toBe(true);

  // The versions of app.conf: both restore points, the newer changed, each downloadable.
  await app.getByRole("button", { name: "Versions of app.conf" }).click();
  const heading = page.getByRole("heading", { name: "Versions of /etc/app.conf" });
  await expect(heading).toBeFocused();
  const versions = page.locator("[data-version]");
  await expect(versions.first()).toHaveAttribute("data-version", NEWER);
  await expect(page.locator(`[data-version="${OLDER}"]`)).toContainText("file");
  await expect(versions.first()).toContainText("this restore point");
  await expect(versions.first()).toContainText("changed");
  await page.locator(`[data-version="${NEWER}"]`).scrollIntoViewIfNeeded();
  await page.screenshot({ path: `${SHOTS}/file-versions.png`, fullPage: true });
  await accessible(page, "file versions");
  const [old] = await Promise.all([
    page.waitForEvent("download"),
    page.locator(`[data-version="${OLDER}"]`).getByRole("link", { name: /^Download app.conf from / }).click(),
  ]);
  expect((await bytesOf(old)).toString("utf8")).not.toBe(TEXT);
  await page.getByRole("button", { name: "Close versions" }).click();

  // A search by name, from the search box: Enter submits it.
  const search = page.getByRole("search", { name: "Search file names" });
  await search.getByRole("searchbox").fill("*.conf");
  await search.getByRole("searchbox").press("Enter");
  const found = page.getByRole("table", { name: "Names matching *.conf" });
  await expect(found.locator('tr[data-entry="/etc/app.conf"]')).toBeVisible();
  await accessible(page, "file search");

  // A crumb leads back up; a path that is not there says so (the API's 404 message).
  await search.getByRole("button", { name: "Clear search" }).click();
  await crumbs.getByRole("link").first().click();
  await expect(page.getByRole("table", { name: "Contents of /", exact: true })).toBeVisible();
  await page.goto(`/restore-points/${NEWER}/files?path=%2Fno-such-dir`);
  await expect(page.getByRole("alert")).toBeVisible();
});
