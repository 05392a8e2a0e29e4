// The portal's screens timed in Debian's Chromium (driven by Playwright, as the browser
// tests are). Run by bench/portal.py, which starts the stack and fills the project; this
// prints one JSON object of timings in milliseconds, each a list with one entry per round.
//
// Every round starts from a fresh page load (nothing cached by TanStack Query), then:
// - overview: first contentful paint of `/`, and the moment its figures are drawn;
// - volumes: from the click on "Volumes" until the first page of rows is drawn; then
//   "Show more" until the second page is;
// - points: from opening the busiest volume until its first page of restore points (and
//   its calendar) is drawn; then "Show more";
// - the longest main-thread task seen during each (the page stays responsive when short);
// - both lists again at twice their default page size.
import { createRequire } from "node:module";

const require = createRequire(`${process.env.CAIRN_PORTAL_DIR}/package.json`);
const { chromium } = require("@playwright/test");

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run bench/portal.py`);
  return value;
};
const URL = env("CAIRN_PORTAL_URL");
const VOLUME_ID = env("CAIRN_BENCH_VOLUME_ID");
const VOLUME_PAGE = Number(env("CAIRN_BENCH_VOLUME_PAGE"));
const POINT_PAGE = Number(env("CAIRN_BENCH_POINT_PAGE"));
const ROUNDS = Number(process.env.CAIRN_BENCH_ROUNDS ?? "5");

/** performance.now() in the page when `selector` matches at least `count` elements, polled
 * every animation frame: the first frame that shows them. */
async function drawn(page, selector, count = 1) {
  const handle = await page.waitForFunction(
    ([s, n]) => (document.querySelectorAll(s).length >= n ? performance.now() : null),
    [selector, count],
    { polling: "raf", timeout: 60_000 },
  );
  return handle.jsonValue();
}

const now = (page) => page.evaluate(() => performance.now());

/** Milliseconds from opening `to` inside the app (as a link does), from a screen without
 * any list, until `count` rows matching `selector` are drawn. */
async function opened(page, to, selector, count) {
  await page.evaluate(() => {
    window.history.pushState(null, "", "/usage");
    window.dispatchEvent(new PopStateEvent("popstate"));
  });
  await page.waitForFunction(() => !document.querySelector("tr[data-volume], tr[data-restore-point], tr[data-job]"));
  const start = await page.evaluate((path) => {
    const t = performance.now();
    window.history.pushState(null, "", path);
    window.dispatchEvent(new PopStateEvent("popstate"));
    return t;
  }, to);
  return (await drawn(page, selector, count)) - start;
}
const clickedAt = (page) => page.evaluate(() => window.__clickedAt);

/** The longest task since the last call (PerformanceObserver of long tasks, ≥ 50 ms). */
async function longestTask(page) {
  return page.evaluate(() => {
    const seen = window.__longTasks ?? [];
    window.__longTasks = [];
    return seen.length ? Math.max(...seen) : 0;
  });
}

const browser = await chromium.launch({
  executablePath: process.env.CAIRN_CHROMIUM ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const context = await browser.newContext({ baseURL: URL, viewport: { width: 1360, height: 820 } });
await context.addInitScript(() => {
  // When the user's click reached the page (Playwright's own checks before it, scrolling
  // the button into view and waiting for it to be still, are not the portal's time).
  document.addEventListener("click", () => (window.__clickedAt = performance.now()), true);
  window.__longTasks = [];
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) window.__longTasks.push(entry.duration);
  }).observe({ type: "longtask", buffered: true });
});
const page = await context.newPage();
await page.goto("/");
await page.getByLabel("Domain").fill("Default");
await page.getByLabel("User name").fill(env("CAIRN_BENCH_USER"));
await page.getByLabel("Password").fill(env("CAIRN_BENCH_PASSWORD"));
await page.getByRole("button", { name: "Sign in" }).click();
await page.getByRole("navigation", { name: "Main" }).waitFor();

const out = {
  overview_first_paint: [], overview_figures: [], overview_longest_task: [],
  volumes_page: [], volumes_next_page: [], volumes_longest_task: [],
  points_page: [], points_next_page: [], points_longest_task: [],
  points_page_cold: [], volumes_page_double: [], points_page_double: [],
  jobs_page: [], jobs_next_page: [],
};
const nav = (name) => page.getByRole("navigation", { name: "Main" }).getByRole("link", { name, exact: true });

for (let round = 0; round < ROUNDS; round++) {
  await page.goto("/", { waitUntil: "commit" });
  // Six figures: the protected and unprotected volumes (Cinder), those behind their plan
  // (the database), and the three job counts.
  out.overview_figures.push(await drawn(page, ".card .figure", 6));
  out.overview_first_paint.push(await page.evaluate(
    () => performance.getEntriesByName("first-contentful-paint")[0]?.startTime ?? -1));
  out.overview_longest_task.push(await longestTask(page));

  await nav("Volumes").click();
  out.volumes_page.push((await drawn(page, "tr[data-volume]", VOLUME_PAGE)) - (await clickedAt(page)));
  out.volumes_longest_task.push(await longestTask(page));
  await page.getByRole("button", { name: "Show more" }).click();
  out.volumes_next_page.push((await drawn(page, "tr[data-volume]", 2 * VOLUME_PAGE)) - (await clickedAt(page)));

  // Opened from inside the app, as a click on the volume's link does.
  const start = await now(page);
  await page.evaluate((to) => {
    window.history.pushState(null, "", to);
    window.dispatchEvent(new PopStateEvent("popstate"));
  }, `/volumes/${VOLUME_ID}`);
  const rows = await drawn(page, "tr[data-restore-point]", POINT_PAGE);
  const calendar = await drawn(page, "rect[data-date]");
  out.points_page.push(Math.max(rows, calendar) - start);
  out.points_longest_task.push(await longestTask(page));
  await page.getByRole("button", { name: "Show more" }).click();
  out.points_next_page.push((await drawn(page, "tr[data-restore-point]", 2 * POINT_PAGE)) - (await clickedAt(page)));

  // A shared link or a reload: the whole app loads before the page's data is asked for.
  await page.goto(`/volumes/${VOLUME_ID}`, { waitUntil: "commit" });
  out.points_page_cold.push(await drawn(page, "tr[data-restore-point]", POINT_PAGE));

  // The project's jobs (as many as restore points): the newest 100, then the next 100.
  out.jobs_page.push(await opened(page, "/jobs", "tr[data-job]", 100));
  await page.getByRole("button", { name: "Show more" }).click();
  out.jobs_next_page.push((await drawn(page, "tr[data-job]", 200)) - (await clickedAt(page)));

  // Both lists at twice their size (`per_page`, the list's own choice).
  out.volumes_page_double.push(await opened(page, `/volumes?per_page=${2 * VOLUME_PAGE}`, "tr[data-volume]", 2 * VOLUME_PAGE));
  out.points_page_double.push(
    await opened(page, `/volumes/${VOLUME_ID}?per_page=${2 * POINT_PAGE}`, "tr[data-restore-point]", 2 * POINT_PAGE),
  );
}
await browser.close();
process.stdout.write(JSON.stringify(out));
