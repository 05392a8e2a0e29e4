import { defineConfig } from "@playwright/test";

// Run by tests/integration/openstack/test_portal.py against a real Cairn, Keystone, Cinder
// and Ceph; the browser is Debian's Chromium (Playwright is pinned to the release built for
// its major version), never a downloaded one.
export default defineConfig({
  testDir: "e2e",
  timeout: 180_000,
  expect: { timeout: 30_000 },
  retries: 0,
  workers: 1,
  reporter: [["list"]],
  outputDir: process.env.CAIRN_E2E_OUTPUT ?? "test-results",
  use: {
    baseURL: process.env.CAIRN_PORTAL_URL,
    screenshot: "only-on-failure",
    trace: "off",
    viewport: { width: 1360, height: 820 },
    launchOptions: {
      executablePath: process.env.CAIRN_CHROMIUM ?? "/usr/bin/chromium",
      // This machine has no network: Chromium's background services would only fail.
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    },
  },
});
