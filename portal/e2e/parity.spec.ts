import { expect, test, type Page } from "@playwright/test";
import { accessible, required } from "./support";

// What the API offers, done in the portal: webhooks, an off-site copy and an instant
// restore of a restore point, a plan's copy policy, a group restore. Run by
// tests/integration/api/test_portal_noauth.py on the noauth test stack, which made the
// restore points (a plan with consistency group over two images, run once) and runs a
// webhook receiver; it checks afterwards what the browser did (the copy, the images'
// bytes, the plan's policy, the webhook gone).
test.skip(!process.env.CAIRN_E2E_PARITY_VOLUME, "run through tests/integration/api/test_portal_noauth.py (a noauth stack)");
const env = (name: string): string => required(name, "test_portal_noauth.py");

async function signIn(page: Page) {
  await page.goto("/");
  await page.getByLabel(/^Project/).fill(env("CAIRN_E2E_PARITY_PROJECT"));
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByRole("navigation", { name: "Main" })).toBeVisible();
}


const volumePage = (ref: string) => `/volumes/${encodeURIComponent(ref)}`;

test("webhooks: made with its secret shown once, tested, its delivery seen, disabled, deleted", async ({ page }) => {
  await signIn(page);
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Webhooks", exact: true }).click();
  const form = page.getByRole("form", { name: "New webhook" });
  await form.getByLabel("URL").fill(env("CAIRN_E2E_WEBHOOK_URL"));
  await form.getByLabel(/^Description/).fill("ops pager");
  await form.getByLabel("backup.create.error").check();
  await form.getByLabel("webhook.test").check();
  await form.getByRole("button", { name: "Create webhook" }).click();
  await expect(page.getByRole("status")).toContainText("signing secret is shown this once");
  const row = page.locator("tr[data-webhook]").filter({ hasText: "ops pager" });
  await expect(row).toContainText("backup.create.error, webhook.test");
  await expect(row).toContainText("enabled");
  await accessible(page, "webhooks");
  await row.getByRole("button", { name: "Send test" }).click();
  await row.getByRole("button", { name: "Deliveries of ops pager" }).click();
  await expect(row.getByRole("button", { name: "Deliveries of ops pager" })).toHaveAttribute("aria-expanded", "true");
  const delivery = page.getByRole("table", { name: "Deliveries" }).locator('tr[data-delivery="webhook.test"]');
  await expect(delivery).toContainText("succeeded", { timeout: 30_000 });
  await page.screenshot({ path: `${env("CAIRN_E2E_SCREENSHOTS")}/webhooks.png` });
  await row.getByRole("button", { name: "Disable" }).click();
  await expect(row).toContainText("disabled");
  await expect(row.getByRole("button", { name: "Send test" })).toBeDisabled();
  page.once("dialog", (dialog) => void dialog.accept());
  await row.getByRole("button", { name: "Delete" }).click();
  await expect(page.locator("tr[data-webhook]").filter({ hasText: "ops pager" })).toHaveCount(0);
});

test("a restore point is copied off-site, then restored instantly into a new image", async ({ page }) => {
  await signIn(page);
  await page.goto(volumePage(env("CAIRN_E2E_PARITY_VOLUME")));
  // The backup's own restore point (its copy, once made, is the newest row).
  const point = page.locator("tr[data-restore-point]").filter({ hasText: "on local" }).first();
  await point.getByRole("button", { name: "Copy…" }).click();
  const copy = point.getByRole("group", { name: "Copy to another target" });
  await copy.getByLabel("Target to copy to").selectOption(env("CAIRN_E2E_COPY_TARGET"));
  await copy.getByRole("button", { name: "Copy", exact: true }).click();
  await expect(copy.getByRole("progressbar")).toHaveAttribute("aria-valuenow", "100", { timeout: 120_000 });
  await copy.getByRole("button", { name: "Close" }).click();
  // The copy is a restore point of its own, on the other target.
  const copied = page.locator("tr[data-restore-point]").filter({ hasText: `on ${env("CAIRN_E2E_COPY_TARGET")}` });
  await expect(copied).toContainText("copy", { timeout: 30_000 });
  await accessible(page, "volume detail with a copy");

  await point.getByRole("button", { name: "Restore…" }).click();
  const wizard = page.getByRole("dialog", { name: "Restore" });
  await wizard.getByLabel(/^Image/).fill(env("CAIRN_E2E_INSTANT_IMAGE"));
  await wizard.getByRole("checkbox", { name: /^Instant/ }).check();
  await wizard.getByRole("button", { name: "Next" }).click();
  await expect(wizard).toContainText("Instantly: usable within seconds");
  await wizard.getByRole("button", { name: "Restore", exact: true }).click();
  await expect(wizard).toContainText(`Restored into image ceph-a/volumes/${env("CAIRN_E2E_INSTANT_IMAGE")}`, { timeout: 120_000 });
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Jobs", exact: true }).click();
  const restore = page.locator("tr[data-job]").filter({ hasText: "restore" }).first();
  await restore.getByRole("link", { name: "restore" }).click();
  await expect(page.locator("table.facts")).toContainText("Usable");
});

test("a plan gets an off-site copy policy", async ({ page }) => {
  await signIn(page);
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Plans", exact: true }).click();
  const plan = page.locator(`tr[data-plan="${env("CAIRN_E2E_PARITY_PLAN")}"]`);
  await expect(plan).toContainText("no off-site copy");
  await plan.getByRole("button", { name: "Edit" }).click();
  const editor = page.getByRole("form", { name: `Edit plan ${env("CAIRN_E2E_PARITY_PLAN")}` });
  await editor.getByLabel("Copy to").selectOption(env("CAIRN_E2E_COPY_TARGET"));
  await editor.getByLabel("Which").selectOption("day");
  await expect(editor).toContainText(`the first restore point of each day copied to ${env("CAIRN_E2E_COPY_TARGET")}`);
  await accessible(page, "plan editor with a copy policy");
  await editor.getByRole("button", { name: "Save plan" }).click();
  await expect(plan).toContainText(`the first restore point of each day copied to ${env("CAIRN_E2E_COPY_TARGET")}`);
});

test("a group of restore points is restored into new images at once", async ({ page }) => {
  await signIn(page);
  await page.goto(volumePage(env("CAIRN_E2E_GROUP_VOLUME")));
  const point = page.locator("tr[data-restore-point]").first();
  await expect(point).toContainText("group");
  await point.getByRole("button", { name: "Restore group…" }).click();
  const wizard = page.getByRole("dialog", { name: "Restore the group" });
  await expect(wizard).toContainText("2 volumes at the same instant");
  await expect(wizard.getByLabel("New RBD images")).toBeChecked();
  await wizard.getByLabel(/^Image prefix/).fill(env("CAIRN_E2E_GROUP_PREFIX"));
  await accessible(page, "group restore");
  await wizard.getByRole("button", { name: "Restore 2 volumes" }).click();
  const restores = wizard.getByRole("list", { name: "Restores" }).getByRole("progressbar");
  await expect(restores).toHaveCount(2);
  for (const bar of await restores.all()) await expect(bar).toHaveAttribute("aria-valuenow", "100", { timeout: 120_000 });
  await page.screenshot({ path: `${env("CAIRN_E2E_SCREENSHOTS")}/group-restore.png` });
});
