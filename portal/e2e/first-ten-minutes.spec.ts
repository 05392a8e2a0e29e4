import { expect, test, type Page } from "@playwright/test";
import { accessible, required } from "./support";

// A newcomer's first ten minutes on `make up`'s default stack (noauth, no Cinder): sign in
// with a project, find the demo volume on the Volumes page, back it up, watch the backup,
// see its restore point in the calendar, restore it into a new RBD image. Run by
// tests/system/test_make_up.py right after a literal `make up` (the last step of
// `make test`); it names the volume (`demo`) and the image to restore into, and checks
// the restored bytes itself.
const NOAUTH_VOLUME = process.env.CAIRN_E2E_NOAUTH_VOLUME;
test.skip(!NOAUTH_VOLUME, "run through tests/system/test_make_up.py (make up's stack)");
const env = (name: string): string => required(name, "tests/system/test_make_up.py");


test("a newcomer protects the demo volume, watches the backup, finds it in the calendar and restores it", async ({ page }) => {
  const volume = env("CAIRN_E2E_NOAUTH_VOLUME");
  const restored = env("CAIRN_E2E_NOAUTH_RESTORED");
  const shots = env("CAIRN_E2E_SCREENSHOTS");

  // Sign in: under noauth, a project name is all there is.
  await page.goto("/");
  await expect(page.getByLabel("User name")).toHaveCount(0);
  await page.getByLabel(/^Project/).fill(env("CAIRN_E2E_NOAUTH_PROJECT"));
  await page.getByRole("button", { name: "Sign in" }).click();
  const nav = page.getByRole("navigation", { name: "Main" });
  await expect(nav).toBeVisible();

  // The Volumes page lists the pool's images, the demo volume first, not protected yet.
  await nav.getByRole("link", { name: "Volumes", exact: true }).click();
  const row = page.locator(`tr[data-volume="${volume}"]`);
  await expect(row).toBeVisible();
  await expect(row).toContainText(`ceph-a/volumes/${volume}`);
  await expect(row).toContainText("unprotected");
  await expect(row).toContainText("never");
  await page.screenshot({ path: `${shots}/first-volumes.png` });
  await accessible(page, "volumes (noauth)");

  // Protect it now: a full backup, followed in the row until it is over.
  await row.getByLabel("Backup kind").selectOption("full");
  await row.getByRole("button", { name: "Back up now" }).click();
  await expect(row.getByRole("button", { name: "Back up now" })).toHaveCount(0, { timeout: 5_000 });
  if (await row.getByRole("progressbar").isVisible()) await page.screenshot({ path: `${shots}/first-backing-up.png` });
  await expect(row.getByRole("button", { name: "Back up now" })).toBeVisible({ timeout: 120_000 });
  await expect(row.locator("td").nth(7)).toHaveText("1");

  // The job, named by the image it read, took a time that is not "0 s".
  await nav.getByRole("link", { name: "Jobs", exact: true }).click();
  const job = page.locator("tr[data-job]").filter({ hasText: "backup" }).first();
  await expect(job).toContainText("succeeded");
  await expect(job).toContainText(`ceph-a/volumes/${volume}`);
  await expect(job.locator("td").nth(6)).not.toHaveText("0 s");

  // The volume's page: today in the calendar, the restore point below it.
  await nav.getByRole("link", { name: "Volumes", exact: true }).click();
  await row.getByRole("link", { name: volume }).click();
  await expect(page).toHaveURL(new RegExp(`/volumes/ceph-a%2Fvolumes%2F${volume}$`));
  await expect(page.getByRole("img", { name: /Restore points per day over the last \d+ weeks: 1 days with at least one/ })).toBeVisible();
  await expect(page.locator("rect.day-full")).toHaveCount(1);
  await page.screenshot({ path: `${shots}/first-calendar.png` });
  await accessible(page, "volume detail (noauth)");

  // Restore it: into a new RBD image (the only place an RBD image's restore goes), named
  // for the newcomer already; the review says what happens; the job is followed to the end.
  await page.getByRole("button", { name: "Restore…" }).first().click();
  const wizard = page.getByRole("dialog", { name: "Restore" });
  await expect(wizard.getByLabel("A new Cinder volume")).toHaveCount(0);
  await expect(wizard.getByLabel("A new RBD image")).toBeChecked();
  await wizard.getByLabel(/^Image/).fill(restored);
  await wizard.getByRole("button", { name: "Next" }).click();
  await expect(wizard).toContainText(`Into a new RBD image ${restored}.`);
  await accessible(page, "restore wizard (noauth)");
  await wizard.getByRole("button", { name: "Restore", exact: true }).click();
  await expect(wizard).toContainText(`Restored into image ceph-a/volumes/${restored}`, { timeout: 120_000 });
  await page.screenshot({ path: `${shots}/first-restored.png` });
});
