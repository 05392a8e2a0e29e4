// Calls the typed client must refuse. `tsc --noEmit` (npm run typecheck, and the build)
// compiles this file and nothing runs it: each line under `@ts-expect-error` must be a type
// error, and tsc fails the build if one of them ever compiles (an unused directive is an
// error itself), for instance if `api` stopped checking calls against schema.d.ts.
import { answer, api, type Job, type Schemas } from "./client";

const job = { params: { path: { job_id: "j" } } };
const point = { params: { path: { restore_point_id: "r" } } };

export async function refused(): Promise<void> {
  // A path the API does not have.
  // @ts-expect-error
  await api.GET("/v1/job/{job_id}", job);

  // A method the path does not take.
  // @ts-expect-error
  await api.DELETE("/v1/overview", {});

  // A path parameter the path does not name.
  // @ts-expect-error
  await api.GET("/v1/jobs/{job_id}", { params: { path: { id: "j" } } });

  // A query parameter the operation needs, missing.
  // @ts-expect-error
  await api.GET("/v1/restore-points/days", { params: { query: { days: 91 } } });

  // A body the operation does not take: a backup's kind is incremental or full.
  // @ts-expect-error
  await api.POST("/v1/backups", { body: { volume: "v", kind: "weekly" } });

  // An answer taken for what it is not: deleting a restore point answers with its job
  // (the hand-typed client once said nothing), and the job list is not the plan list.
  // @ts-expect-error
  const nothing: undefined = await answer(api.DELETE("/v1/restore-points/{restore_point_id}", point));
  // @ts-expect-error
  const plans: Schemas["PlanList"] = await answer(api.GET("/v1/jobs"));
  // @ts-expect-error
  const jobs: Job[] = (await answer(api.GET("/v1/jobs"))).items;
  void [nothing, plans, jobs];

  // The right calls, for contrast: these compile.
  const deleting: Job = await answer(api.DELETE("/v1/restore-points/{restore_point_id}", point));
  const listed: Job[] = (await answer(api.GET("/v1/jobs", { params: { query: { kind: "backup", limit: 100 } } }))).jobs;
  void [deleting, listed];
}
