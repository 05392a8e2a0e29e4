import { expect, test, type Page } from "@playwright/test";
import { accessible, required, signInKeystone } from "./support";

// Set by tests/integration/openstack/test_portal.py: Keystone users of the test cloud and
// a Cinder volume of project A that project A's member may back up.
const env = (name: string): string => required(name, "test_portal.py");
const PASSWORD = env("CAIRN_E2E_PASSWORD");
const VOLUME = env("CAIRN_E2E_VOLUME");
const SHOTS = env("CAIRN_E2E_SCREENSHOTS");
const VOLUME_IMAGE_PREFIX = "ceph-a/volumes/volume-";

const signIn = (page: Page, user: string) => signInKeystone(page, user, PASSWORD);


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
  // While it runs the row shows the job's progress (this small volume's backup may be over
  // before a look: the job list below checks the bar reached 100 %).
  if (await row.getByRole("progressbar").isVisible()) await page.screenshot({ path: `${SHOTS}/volumes-backing-up.png` });
  await accessible(page, "volumes");
  // Done: the button is back and the row shows the full backup at once, not at the list's
  // next 30 s refresh.
  await expect(row.getByRole("button", { name: "Back up now" })).toBeVisible({ timeout: 120_000 });
  await expect(row).toContainText("full", { timeout: 5_000 });
  await expect(row.locator("td").nth(7)).toHaveText("1");
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
  await expect(preview.getByRole("img", { name: /What the retention keeps over the last 400 days: 12 monthly, \d+ weekly, \d+ daily/ })).toBeVisible();
  // The schedule builder: weekdays and a time...
  const rule = editor.getByRole("group", { name: "Rule 1" });
  await rule.getByLabel("Repeats").selectOption("weekly");
  await rule.getByLabel("Mon", { exact: true }).check();
  await rule.getByLabel("Sun", { exact: true }).uncheck();
  await rule.getByLabel("At", { exact: true }).fill("03:00");
  await expect(preview).toContainText("incremental every Monday at 03:00 (Europe/Berlin)");
  // ... or a cron line or an RRULE of one's own; one the API refuses shows its message (422).
  await rule.getByLabel("Repeats").selectOption("custom");
  await expect(rule.getByLabel("Rule (cron or RRULE)")).toHaveValue("0 3 * * 1");
  await rule.getByLabel("Rule (cron or RRULE)").fill("61 3 * * *");
  await expect(preview.getByRole("alert")).toContainText("cron minute field '61': 61 is outside 0-59");
  await rule.getByLabel("Rule (cron or RRULE)").fill("FREQ=WEEKLY;BYDAY=MO,TH;BYHOUR=4;BYMINUTE=30");
  await expect(preview).toContainText("incremental every week on Monday and Thursday at 04:30 (Europe/Berlin)");
  await rule.getByLabel("Repeats").selectOption("daily");
  await expect(preview).toContainText("incremental every day at 03:00 (Europe/Berlin)");
  await editor.getByLabel("From").fill("22:00");
  await editor.getByLabel("Until").fill("06:00");
  await editor.getByLabel("MiB/s").fill("50");
  // Beside the daily ones, the last 5 whatever their day: both of today's runs below stay.
  await editor.getByRole("group", { name: "Retention" }).getByLabel("keep last", { exact: true }).fill("5");
  await editor.getByLabel("Filter volumes").fill(VOLUME);
  await editor.getByLabel(VOLUME, { exact: true }).check();
  await expect(preview).toHaveAttribute("aria-busy", "false");
  await page.evaluate(() => window.scrollTo(0, 0)); // the preview's top: rules in words, next runs
  await page.screenshot({ path: `${SHOTS}/plan-editor.png` });
  await accessible(page, "plan editor");
  await editor.getByRole("button", { name: "Save plan" }).click();
  const plan = page.locator(`tr[data-plan="${env("CAIRN_E2E_PLAN")}"]`);
  await expect(plan).toContainText("enabled");
  // Saved as built: the rules, the window and the speed limit.
  const saved = (await (await page.request.get("/v1/plans?limit=1000")).json()).plans.find(
    (p: { name: string }) => p.name === env("CAIRN_E2E_PLAN"),
  );
  expect(saved.rules).toEqual([
    { kind: "incremental", cron: "0 3 * * *", rrule: null, timezone: null, start: null },
    { kind: "full", cron: "0 2 * * 0", rrule: null, timezone: null, start: null },
  ]);
  expect(saved.window).toEqual({ start: "22:00", end: "06:00" });
  expect(saved.qos_bytes_per_second).toBe(50 * 1024 * 1024);
  await plan.getByRole("button", { name: "Run now" }).click();

  await nav(page, "Volumes").click();
  await page.getByRole("link", { name: VOLUME, exact: true }).click();
  const backup = page.locator("tr[data-job]").filter({ hasText: "backup" }).first();
  await expect(backup.getByRole("progressbar")).toHaveAttribute("aria-valuenow", "100", { timeout: 120_000 });
  const points = page.locator("tr[data-restore-point]");
  await expect(points).toHaveCount(2, { timeout: 30_000 }); // the one from the list, the plan's
  const newest = points.first();
  await expect(newest).toContainText("plan");
  // The calendar: today (the user's day) has a full backup.
  const today = await page.evaluate(() =>
    new Intl.DateTimeFormat("en-CA", { year: "numeric", month: "2-digit", day: "2-digit" }).format(new Date()),
  );
  await expect(page.locator(`rect[data-date="${today}"]`)).toHaveClass("day-full");
  await expect(page.locator(`rect[data-date="${today}"] title`)).toHaveText(`${today}: 1 full, 1 incremental`);
  await page.screenshot({ path: `${SHOTS}/volume-detail.png` });
  await accessible(page, "volume detail");

  // Rows per page: the choice rides in the address, the list reads pages of that size.
  await page.getByLabel("Per page").selectOption("25");
  await expect(page).toHaveURL(/per_page=25/);
  await expect(points).toHaveCount(2);
  await page.reload();
  await expect(page.getByLabel("Per page")).toHaveValue("25");

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

  // A second run, then the plan's editor: a tighter retention shows which of the plan's own
  // restore points the next prune would delete, before anything is saved.
  await nav(page, "Plans").click();
  await plan.getByRole("button", { name: "Run now" }).click();
  await nav(page, "Volumes").click();
  await page.getByRole("link", { name: VOLUME, exact: true }).click();
  await expect(points).toHaveCount(3, { timeout: 120_000 });
  // Done (only an available restore point offers Restore): the retention judges those.
  await expect(points.first().getByRole("button", { name: "Restore…" })).toBeVisible({ timeout: 120_000 });
  await nav(page, "Plans").click();
  await plan.getByRole("button", { name: "Edit" }).click();
  const edit = page.getByRole("form", { name: `Edit plan ${env("CAIRN_E2E_PLAN")}` });
  await expect(edit.getByRole("group", { name: "Rule 1" }).getByLabel("At", { exact: true })).toHaveValue("03:00");
  const retention = edit.getByRole("group", { name: "Retention" });
  for (const rule of ["daily", "weekly", "monthly"]) await retention.getByLabel(rule, { exact: true }).fill("0");
  await retention.getByLabel("keep last", { exact: true }).fill("1");
  await expect(preview.locator(".existing-summary")).toContainText("keeps 1 and deletes 1 of 2");
  await expect(preview.locator('[data-verdict="pruned"]')).toHaveCount(1);
  await expect(preview.locator('[data-verdict="kept"]')).toContainText("last, newest");
  await accessible(page, "plan editor (existing plan)");
  await edit.getByRole("button", { name: "Cancel" }).click();

  // The Overview: the plan's next runs, nothing behind.
  await nav(page, "Overview").click();
  await expect(page.locator("ol.next-runs")).toContainText(env("CAIRN_E2E_PLAN"));
  await page.screenshot({ path: `${SHOTS}/overview.png` });
  await accessible(page, "overview");
});

test("an administrator restores into a new RBD image; an existing name is refused with the API's message", async ({ page }) => {
  await signIn(page, env("CAIRN_E2E_ADMIN"));
  await page.goto(`/volumes/${env("CAIRN_E2E_ADMIN_VOLUME_ID")}`);
  const point = page.locator("tr[data-restore-point]").first();
  await point.getByRole("button", { name: "Restore…" }).click();
  const wizard = page.getByRole("dialog", { name: "Restore" });
  await wizard.getByLabel("A new RBD image").check();
  const image = wizard.getByLabel(/^Image/);
  await image.fill(`ceph-a/volumes/volume-${env("CAIRN_E2E_VOLUME_ID")}`);
  await wizard.getByRole("button", { name: "Next" }).click();
  await wizard.getByRole("button", { name: "Restore", exact: true }).click();
  await expect(wizard.getByRole("alert")).toContainText("already exists; restore into a new image name");
  await wizard.getByRole("button", { name: "Back" }).click();
  await image.fill(env("CAIRN_E2E_ADMIN_IMAGE"));
  await wizard.getByRole("button", { name: "Next" }).click();
  await expect(wizard).toContainText(`Into a new RBD image ${env("CAIRN_E2E_ADMIN_IMAGE")}`);
  await wizard.getByRole("button", { name: "Restore", exact: true }).click();
  await expect(wizard.locator(".done")).toContainText(`Restored into image ${env("CAIRN_E2E_ADMIN_IMAGE")}`, { timeout: 150_000 });
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
