// Every query's key, and the one way a change marks queries stale. A key starts with what
// its query holds; invalidating a key refreshes every query whose key starts with it
// (`keys.jobs` covers the newest jobs of every filter and their older pages).
import { type QueryKey, useQueryClient } from "@tanstack/react-query";
import { useCallback } from "react";

export const keys = {
  session: ["session"],
  /** What the last sign-out said when it could not end everything (Keystone kept the
   * tokens, or not every Cairn process heard of it): the sign-in page shows it. */
  signedOutNote: ["signed-out-note"],
  signInOptions: ["sign-in-options"],
  overview: ["overview"],
  usage: ["usage"],
  quota: (projectId: string) => ["quota", projectId],
  jobs: ["jobs"],
  newestJobs: (filter: Record<string, unknown>) => ["jobs", filter],
  olderJobs: (filter: Record<string, unknown>, anchor: string | null) => ["jobs", "older", filter, anchor],
  /** One job, followed on its own (a list's refresh does not refresh it). */
  job: (jobId: string | undefined) => ["job", jobId],
  volumes: ["volumes"],
  volumeLists: ["volumes", "pages"],
  volumePages: (unprotected: boolean, size: number) => ["volumes", "pages", unprotected, size],
  volume: (volumeId: string) => ["volumes", "one", volumeId],
  restorePoints: ["restore-points"],
  /** Every page of one volume's restore points, whatever their size. */
  volumeRestorePoints: (volumeId: string) => ["restore-points", volumeId],
  restorePointPages: (volumeId: string, size: number) => ["restore-points", volumeId, size],
  restorePointDays: (volumeId: string) => ["restore-points", "days", volumeId],
  restorePoint: (pointId: string) => ["restore-points", "one", pointId],
  /** A file across a volume's restore points: under `restorePoints`, so a backup or a
   * deletion that changes which restore points there are reads it again. */
  fileVersions: (volumeId: string, partition: number | null, path: string) => ["restore-points", "file-versions", volumeId, partition, path],
  /** What a restore point holds never changes: these are read once and kept. */
  partitions: (pointId: string) => ["files", pointId, "partitions"],
  fileListing: (pointId: string, partition: number | null, path: string, size: number) => ["files", pointId, "list", partition, path, size],
  fileSearch: (pointId: string, partition: number | null, path: string, pattern: string) => ["files", pointId, "search", partition, path, pattern],
  /** A plan's restore point group: what it holds never changes but its members' status. */
  restorePointGroup: (groupId: string) => ["restore-points", "group", groupId],
  targets: ["targets"],
  webhooks: ["webhooks"],
  deliveries: (webhookId: string) => ["webhooks", "deliveries", webhookId],
  plans: ["plans"],
  planPreview: (draft: string) => ["plan-preview", draft],
} as const satisfies Record<string, QueryKey | ((...args: never[]) => QueryKey)>;

/** What to call after a change, with the keys it made stale: the queries under each are
 * read again, at once if on screen, else when next shown. The same function every render. */
export function useInvalidate(): (...stale: QueryKey[]) => void {
  const client = useQueryClient();
  return useCallback(
    (...stale: QueryKey[]) => {
      for (const queryKey of stale) void client.invalidateQueries({ queryKey });
    },
    [client],
  );
}
