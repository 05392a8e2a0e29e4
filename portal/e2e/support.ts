import AxeBuilder from "@axe-core/playwright";
import { expect, type Page } from "@playwright/test";

// What every browser test does the same way: read what its Python runner set, sign in on
// Keystone, and hold a screen to no serious accessibility violation.

/** A value the test's runner sets (`runner`: the Python test that runs this spec). */
export function required(name: string, runner: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run this through ${runner}`);
  return value;
}

/** Signs in with a Keystone user of the test cloud's Default domain. */
export async function signInKeystone(page: Page, user: string, password: string) {
  await page.goto("/");
  await page.getByLabel("Domain").fill("Default");
  await page.getByLabel("User name").fill(user);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByRole("navigation", { name: "Main" })).toBeVisible();
}

/** No serious or critical accessibility violation (axe-core) on the screen as it is. */
export async function accessible(page: Page, screen: string) {
  const results = await new AxeBuilder({ page }).analyze();
  const bad = results.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${screen}: ${v.id} (${v.impact}) at ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join("; ")}`);
  expect(bad).toEqual([]);
}
