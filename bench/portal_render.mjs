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

/** performance.now() of the first frame in which every [selector, count] of `wanted` is
 * drawn; each is watched from the start, in the page, so that one drawn early is not timed
 * late by a second round trip from here (that cost 60-170 ms per check on 2 busy cores). */
async function drawnAll(page, wanted) {
  const handle = await page.waitForFunction(
    (w) => {
      const seen = (window.__drawnAt ??= {});
      for (const [s, n] of w) if (seen[s] === undefined && document.querySelectorAll(s).length >= n) seen[s] = performance.now();
      if (!w.every(([s]) => seen[s] !== undefined)) return null;
      window.__drawnAt = undefined;
      return Math.max(...w.map(([s]) => seen[s]));
    },
    wanted,
    { polling: "raf", timeout: 60_000 },
  );
  return handle.jsonValue();
}

const now = (page) => page.evaluate(() => performance.now());

/** With CAIRN_BENCH_TRACE set: the API calls a screen made, to stderr (when each started,
 * waited for its first byte and ended, in ms from the screen's start). */
async function traceCalls(page, screen, since, shown) {
  if (!process.env.CAIRN_BENCH_TRACE) return;
  const calls = await page.evaluate((t0) => performance.getEntriesByType("resource")
    .filter((e) => e.startTime >= t0 && e.name.includes("/v1/"))
    .map((e) => `${e.name.split("/v1/")[1].slice(0, 40)} start ${Math.round(e.startTime - t0)} wait ${Math.round(e.responseStart - e.requestStart)} end ${Math.round(e.responseEnd - t0)}`), since);
  process.stderr.write(`${screen} drawn ${Math.round(shown - since)}\n  ${calls.join("\n  ")}\n`);
}

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
  const volumesShown = await drawn(page, "tr[data-volume]", VOLUME_PAGE);
  out.volumes_page.push(volumesShown - (await clickedAt(page)));
  await traceCalls(page, "volumes", await clickedAt(page), volumesShown);
  out.volumes_longest_task.push(await longestTask(page));
  await page.getByRole("button", { name: "Show more volumes" }).click();
  out.volumes_next_page.push((await drawn(page, "tr[data-volume]", 2 * VOLUME_PAGE)) - (await clickedAt(page)));

  // Opened from inside the app, as a click on the volume's link does.
  const start = await now(page);
  await page.evaluate((to) => {
    window.history.pushState(null, "", to);
    window.dispatchEvent(new PopStateEvent("popstate"));
  }, `/volumes/${VOLUME_ID}`);
  const tracing = process.env.CAIRN_BENCH_PROFILE && round === ROUNDS - 1;
  if (tracing) await browser.startTracing(page, { path: process.env.CAIRN_BENCH_PROFILE, categories: ["devtools.timeline", "blink", "v8"] });
  const shown = await drawnAll(page, [["tr[data-restore-point]", POINT_PAGE], ["rect[data-date]", 1]]);
  if (tracing) await browser.stopTracing();
  out.points_page.push(shown - start);
  await traceCalls(page, "points", start, shown);
  out.points_longest_task.push(await longestTask(page));
  await page.getByRole("button", { name: "Show more restore points" }).click();
  out.points_next_page.push((await drawn(page, "tr[data-restore-point]", 2 * POINT_PAGE)) - (await clickedAt(page)));

  // A shared link or a reload: the whole app loads before the page's data is asked for.
  await page.goto(`/volumes/${VOLUME_ID}`, { waitUntil: "commit" });
  out.points_page_cold.push(await drawn(page, "tr[data-restore-point]", POINT_PAGE));

  // The project's jobs (as many as restore points): the newest 100, then the next 100.
  out.jobs_page.push(await opened(page, "/jobs", "tr[data-job]", 100));
  await page.getByRole("button", { name: "Show more jobs" }).click();
  out.jobs_next_page.push((await drawn(page, "tr[data-job]", 200)) - (await clickedAt(page)));

  // Both lists at twice their size (`per_page`, the list's own choice).
  out.volumes_page_double.push(await opened(page, `/volumes?per_page=${2 * VOLUME_PAGE}`, "tr[data-volume]", 2 * VOLUME_PAGE));
  out.points_page_double.push(
    await opened(page, `/volumes/${VOLUME_ID}?per_page=${2 * POINT_PAGE}`, "tr[data-restore-point]", 2 * POINT_PAGE),
  );
}
await browser.close();
process.stdout.write(JSON.stringify(out));
