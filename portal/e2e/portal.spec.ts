import AxeBuilder from "@axe-core/playwright";
import { expect, test, type Page } from "@playwright/test";

// Set by tests/integration/openstack/test_portal.py: Keystone users of the test cloud and
// a Cinder volume of project A that project A's member may back up.
const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run this through test_portal.py`);
  return value;
};
const PASSWORD = env("CAIRN_E2E_PASSWORD");
const VOLUME = env("CAIRN_E2E_VOLUME");
const SHOTS = env("CAIRN_E2E_SCREENSHOTS");
const VOLUME_IMAGE_PREFIX = "ceph-a/volumes/volume-";

async function signIn(page: Page, user: string) {
  await page.goto("/");
  await page.getByLabel("Domain").fill("Default");
  await page.getByLabel("User name").fill(user);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByRole("navigation", { name: "Main" })).toBeVisible();
}

/** No serious or critical accessibility violation (axe-core) on the screen as it is. */
async function accessible(page: Page, screen: string) {
  const results = await new AxeBuilder({ page }).analyze();
  const bad = results.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${screen}: ${v.id} (${v.impact}) at ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join("; ")}`);
  expect(bad).toEqual([]);
}

function nav(page: Page, name: string) {
  return page.getByRole("navigation", { name: "Main" }).getByRole("link", { name, exact: true });
}

test("a wrong password is refused with the reason", async ({ page }) => {
  await page.goto("/");
  await expect(page.getByRole("button", { name: "Sign in" })).toBeVisible();
  await accessible(page, "sign-in");
  await page.getByLabel("User name").fill(env("CAIRN_E2E_MEMBER"));
  await page.getByLabel("Password").fill("not-the-password");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByRole("alert")).toContainText("user name or password is wrong");
});

test("a member backs a volume up from the list and watches it finish", async ({ page }) => {
  await signIn(page, env("CAIRN_E2E_MEMBER"));
  await page.screenshot({ path: `${SHOTS}/overview.png` });
  await accessible(page, "overview");
  await nav(page, "Volumes").click();
  const row = page.locator(`tr[data-volume="${VOLUME}"]`);
  await expect(row).toBeVisible();
  await expect(row).toContainText("never");
  await row.getByLabel("Backup kind").selectOption("full");
  const button = row.getByRole("button", { name: "Back up now" });
  await button.click();
  // From the click until the job is over the button is gone: no second backup.
  await expect(row.getByRole("button", { name: "Back up now" })).toHaveCount(0, { timeout: 5_000 });
  await expect(row.getByRole("progressbar")).toBeVisible();
  await page.screenshot({ path: `${SHOTS}/volumes-backing-up.png` });
  await accessible(page, "volumes");
  // Done: the volume shows its full backup and the button is back.
  await expect(row.getByRole("button", { name: "Back up now" })).toBeVisible({ timeout: 120_000 });
  await expect(row).toContainText("full");
  await nav(page, "Jobs").click();
  const job = page.locator("tr[data-job]").filter({ hasText: "backup" }).first();
  await expect(job).toContainText("succeeded");
  await expect(job.getByRole("progressbar")).toHaveAttribute("aria-valuenow", "100");
  await page.screenshot({ path: `${SHOTS}/jobs.png` });
  await accessible(page, "jobs");
  // A reload keeps the screen (client-side route) and the session (the cookie).
  await page.reload();
  await expect(page.locator("tr[data-job]").first()).toBeVisible();
  // Nothing of the session is readable by a script in the page.
  expect(await page.evaluate(() => document.cookie)).toBe("");
  expect(await page.evaluate(() => JSON.stringify(window.localStorage))).toBe("{}");
  // The job's own page: its facts, and nothing left to cancel.
  await page.locator("tr[data-job]").filter({ hasText: "backup" }).first().getByRole("link", { name: "backup" }).click();
  await expect(page.locator("table.facts")).toContainText(VOLUME_IMAGE_PREFIX);
  await expect(page.getByRole("progressbar")).toHaveAttribute("aria-valuenow", "100");
  await expect(page.getByRole("button", { name: "Cancel" })).toHaveCount(0);
  await accessible(page, "job detail");
});

test("a reader sees the volumes but no button that changes anything", async ({ page }) => {
  await signIn(page, env("CAIRN_E2E_READER"));
  await nav(page, "Volumes").click();
  const row = page.locator(`tr[data-volume="${VOLUME}"]`);
  await expect(row).toBeVisible();
  await expect(page.getByRole("button", { name: "Back up now" })).toHaveCount(0);
  await nav(page, "Usage").click();
  await expect(page.locator("table.facts")).toContainText("restore points of");
  await expect(page.getByRole("button", { name: "Set quota" })).toHaveCount(0);
  await accessible(page, "usage");
});

test("signing out ends the session", async ({ page }) => {
  await signIn(page, env("CAIRN_E2E_MEMBER"));
  await page.getByRole("button", { name: "Sign out" }).click();
  await expect(page.getByRole("button", { name: "Sign in" })).toBeVisible();
  expect((await page.request.get("/v1/session")).status()).toBe(401);
  await page.goto("/volumes");
  await expect(page.getByRole("button", { name: "Sign in" })).toBeVisible();
});

test("a member protects a volume with a plan, restores it into a new volume and verifies it", async ({ page }) => {
  await signIn(page, env("CAIRN_E2E_MEMBER"));
  await nav(page, "Plans").click();
  await page.getByRole("button", { name: "New plan" }).click();
  const editor = page.getByRole("form", { name: "New plan" });
  await editor.getByLabel("Name").fill(env("CAIRN_E2E_PLAN"));
  await editor.getByLabel("Timezone").fill("Europe/Berlin");
  // The preview follows what is typed: rules in words, next runs, what retention keeps.
  const preview = page.getByRole("complementary", { name: "Preview" });
  await expect(preview).toContainText("incremental every day at 02:00 (Europe/Berlin)");
  await expect(preview).toContainText("full every Sunday at 02:00 (Europe/Berlin)");
  await expect(preview.locator("ol.next-runs li")).toHaveCount(5);
  await expect(preview.locator(".retention-summary")).toContainText("it keeps");
  await editor.getByLabel("Incremental backups (cron)").fill("0 3 * * 1");
  await expect(preview).toContainText("incremental every Monday at 03:00 (Europe/Berlin)");
  // A rule the API refuses shows the API's message (422) instead of a preview.
  await editor.getByLabel("Incremental backups (cron)").fill("61 3 * * *");
  await expect(preview.getByRole("alert")).toContainText("cron minute field '61': 61 is outside 0-59");
  await editor.getByLabel("Incremental backups (cron)").fill("0 3 * * *");
  await editor.getByLabel("Filter volumes").fill(VOLUME);
  await editor.getByLabel(VOLUME, { exact: true }).check();
  await expect(preview).toContainText("incremental every day at 03:00 (Europe/Berlin)");
  await expect(preview).toHaveAttribute("aria-busy", "false");
  await page.screenshot({ path: `${SHOTS}/plan-editor.png` });
  await accessible(page, "plan editor");
  await editor.getByRole("button", { name: "Save plan" }).click();
  const plan = page.locator(`tr[data-plan="${env("CAIRN_E2E_PLAN")}"]`);
  await expect(plan).toContainText("enabled");
  await plan.getByRole("button", { name: "Run now" }).click();

  await nav(page, "Volumes").click();
  await page.getByRole("link", { name: VOLUME, exact: true }).click();
  const backup = page.locator("tr[data-job]").filter({ hasText: "backup" }).first();
  await expect(backup.getByRole("progressbar")).toHaveAttribute("aria-valuenow", "100", { timeout: 120_000 });
  const points = page.locator("tr[data-restore-point]");
  await expect(points).toHaveCount(2, { timeout: 30_000 }); // the one from the list, the plan's
  const newest = points.first();
  await expect(newest).toContainText("plan");
  await page.screenshot({ path: `${SHOTS}/volume-detail.png` });
  await accessible(page, "volume detail");

  await newest.getByRole("button", { name: "Restore…" }).click();
  const wizard = page.getByRole("dialog", { name: "Restore" });
  await wizard.getByLabel("Name").fill(`${VOLUME}-restored`);
  await wizard.getByRole("button", { name: "Next" }).click();
  await expect(wizard).toContainText(`Into a new Cinder volume "${VOLUME}-restored"`);
  await page.screenshot({ path: `${SHOTS}/restore-wizard.png` });
  await accessible(page, "restore wizard");
  await wizard.getByRole("button", { name: "Restore", exact: true }).click();
  await expect(wizard.locator(".done")).toContainText("Restored into volume", { timeout: 150_000 });
  await expect(wizard.getByRole("progressbar")).toHaveAttribute("aria-valuenow", "100");
  await wizard.getByRole("button", { name: "Close" }).click();

  await newest.getByRole("button", { name: "Verify" }).click();
  await expect(newest.locator(".verification")).toContainText("ok", { timeout: 60_000 });

  // A refusal (409) shows the API's message: a locked restore point cannot be deleted.
  const older = points.nth(1);
  page.once("dialog", (dialog) => dialog.accept("2099-01-01"));
  await older.getByRole("button", { name: "Lock…" }).click();
  await expect(older).toContainText("2099");
  page.once("dialog", (dialog) => dialog.accept());
  await older.getByRole("button", { name: "Delete" }).click();
  await expect(older.getByRole("alert")).toContainText("locked until 2099");
});

test("another project's member sees nothing of project A", async ({ page }) => {
  await signIn(page, env("CAIRN_E2E_OTHER"));
  await nav(page, "Volumes").click();
  await expect(page.locator("h2")).toContainText("Volumes");
  await expect(page.locator(`tr[data-volume="${VOLUME}"]`)).toHaveCount(0);
  await nav(page, "Jobs").click();
  await expect(page.getByText(env("CAIRN_E2E_VOLUME_ID"))).toHaveCount(0);
  await nav(page, "Plans").click();
  await expect(page.locator(`tr[data-plan="${env("CAIRN_E2E_PLAN")}"]`)).toHaveCount(0);
  // Even by its address: A's volume page lists no restore point for B.
  await page.goto(`/volumes/${env("CAIRN_E2E_VOLUME_ID")}`);
  await expect(page.locator("h2")).toBeVisible();
  await expect(page.locator("tr[data-restore-point]")).toHaveCount(0);
  await expect(page.locator("tr[data-job]")).toHaveCount(0);
});
