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

async function signIn(page: Page, user: string) {
  await page.goto("/");
  await page.getByLabel("Domain").fill("Default");
  await page.getByLabel("User name").fill(user);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByRole("navigation", { name: "Main" })).toBeVisible();
}

function nav(page: Page, name: string) {
  return page.getByRole("navigation", { name: "Main" }).getByRole("link", { name, exact: true });
}

test("a wrong password is refused with the reason", async ({ page }) => {
  await page.goto("/");
  await page.getByLabel("User name").fill(env("CAIRN_E2E_MEMBER"));
  await page.getByLabel("Password").fill("not-the-password");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByRole("alert")).toContainText("user name or password is wrong");
});

test("a member backs a volume up from the list and watches it finish", async ({ page }) => {
  await signIn(page, env("CAIRN_E2E_MEMBER"));
  await page.screenshot({ path: `${SHOTS}/overview.png` });
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
  // Done: the volume shows its full backup and the button is back.
  await expect(row.getByRole("button", { name: "Back up now" })).toBeVisible({ timeout: 120_000 });
  await expect(row).toContainText("full");
  await nav(page, "Jobs").click();
  const job = page.locator("tr[data-job]").filter({ hasText: "backup" }).first();
  await expect(job).toContainText("succeeded");
  await expect(job.getByRole("progressbar")).toHaveAttribute("aria-valuenow", "100");
  await page.screenshot({ path: `${SHOTS}/jobs.png` });
  // A reload keeps the screen (client-side route) and the session (the cookie).
  await page.reload();
  await expect(page.locator("tr[data-job]").first()).toBeVisible();
  // Nothing of the session is readable by a script in the page.
  expect(await page.evaluate(() => document.cookie)).toBe("");
  expect(await page.evaluate(() => JSON.stringify(window.localStorage))).toBe("{}");
});

test("a reader sees the volumes but no button that changes anything", async ({ page }) => {
  await signIn(page, env("CAIRN_E2E_READER"));
  await nav(page, "Volumes").click();
  const row = page.locator(`tr[data-volume="${VOLUME}"]`);
  await expect(row).toBeVisible();
  await expect(page.getByRole("button", { name: "Back up now" })).toHaveCount(0);
});

test("signing out ends the session", async ({ page }) => {
  await signIn(page, env("CAIRN_E2E_MEMBER"));
  await page.getByRole("button", { name: "Sign out" }).click();
  await expect(page.getByRole("button", { name: "Sign in" })).toBeVisible();
  expect((await page.request.get("/v1/session")).status()).toBe(401);
  await page.goto("/volumes");
  await expect(page.getByRole("button", { name: "Sign in" })).toBeVisible();
});
