// The project's Cinder volumes as Cairn sees them (plans, last backup, restore points), and
// backing one up now.
import {
  type InfiniteData,
  type QueryClient,
  useInfiniteQuery,
  useMutation,
  useQuery,
  useQueryClient,
} from "@tanstack/react-query";
import { answer, api, type Schemas, type Volume } from "./client";
import { keys, useInvalidate } from "./keys";

/** Volumes per page unless the address asks otherwise: Cinder takes most of a page's
 * time (about 0.75 ms a volume on top of 85 ms, bench/README.md). */
export const VOLUME_PAGE = 50;

/** The project's volumes a page at a time, newest first, as Cinder lists them (`Show more`
 * reads the next page by its marker); `unprotected` asks the API for those alone. */
export function useVolumePages(unprotected = false, size = VOLUME_PAGE) {
  return useInfiniteQuery({
    queryKey: keys.volumePages(unprotected, size),
    queryFn: ({ pageParam }) =>
      answer(
        api.GET("/v1/volumes", {
          params: {
            query: { limit: size, ...(unprotected ? { unprotected: true } : {}), ...(pageParam ? { marker: pageParam } : {}) },
          },
        }),
      ),
    initialPageParam: "",
    getNextPageParam: (last) => last.next_marker ?? undefined,
    refetchInterval: 30_000,
  });
}

/** One volume. Opened from the volume list, its row there is shown at once and Cinder is
 * not asked again until the row is as old as the list's refresh interval (each ask costs
 * Cinder a full volume show, on the same cores the restore points are read from). */
export function useVolume(volumeId: string) {
  const client = useQueryClient();
  return useQuery({
    queryKey: keys.volume(volumeId),
    queryFn: () => answer(api.GET("/v1/volumes/{volume_id}", { params: { path: { volume_id: volumeId } } })),
    initialData: () => listedVolume(client, volumeId)?.volume,
    initialDataUpdatedAt: () => listedVolume(client, volumeId)?.at,
    staleTime: 30_000,
    refetchInterval: 30_000,
  });
}

/** The volume's row in any volume list page already read, and when that page was read. */
function listedVolume(client: QueryClient, volumeId: string): { volume: Volume; at: number } | undefined {
  for (const [key, data] of client.getQueriesData<InfiniteData<Schemas["VolumeList"]>>({ queryKey: keys.volumeLists })) {
    const volume = data?.pages.flatMap((page) => page.volumes).find((v) => v.id === volumeId);
    if (volume) return { volume, at: client.getQueryState(key)?.dataUpdatedAt ?? 0 };
  }
  return undefined;
}

/** Backs a volume up now (`kind`: incremental or full); the job lists show it at once. */
export function useBackUp() {
  const invalidate = useInvalidate();
  return useMutation({
    mutationFn: (backup: Schemas["BackupCreate"]) => answer(api.POST("/v1/backups", { body: backup })),
    onSuccess: () => invalidate(keys.jobs),
  });
}
