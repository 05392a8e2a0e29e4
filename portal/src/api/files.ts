// The files inside a restore point (issue 34): its partitions, a directory a page at a time,
// a search by name, a file across the volume's restore points. A restore point never
// changes once made, so what it holds is read once and kept (staleTime Infinity); only the
// versions of a file follow the volume's restore points as backups come and go.
import { useInfiniteQuery, useQuery } from "@tanstack/react-query";
import { answer, api, type Schemas } from "./client";
import { keys } from "./keys";

export type FileEntry = Schemas["FileEntry"];
export type FilePathEntry = Schemas["FilePathEntry"];
export type Partition = Schemas["FilePartition"];
export type FileVersion = Schemas["FileVersion"];

const point = (pointId: string) => ({ restore_point_id: pointId });
/** The API's default partition (the first readable filesystem) is asked for by leaving
 * the parameter out. */
const onPartition = (partition: number | null) => (partition === null ? {} : { partition });

/** One restore point (for its volume and date on the file browser). */
export function useRestorePoint(pointId: string) {
  return useQuery({
    queryKey: keys.restorePoint(pointId),
    queryFn: () => answer(api.GET("/v1/restore-points/{restore_point_id}", { params: { path: point(pointId) } })),
  });
}

export function usePartitions(pointId: string) {
  return useQuery({
    queryKey: keys.partitions(pointId),
    queryFn: () => answer(api.GET("/v1/restore-points/{restore_point_id}/partitions", { params: { path: point(pointId) } })),
    staleTime: Infinity,
  });
}

/** A directory `size` entries at a time, by name (`Show more` reads the next page by its
 * marker, the last name of the page before). */
export function useFileListing(pointId: string, partition: number | null, path: string, size: number) {
  return useInfiniteQuery({
    queryKey: keys.fileListing(pointId, partition, path, size),
    queryFn: ({ pageParam }) =>
      answer(
        api.GET("/v1/restore-points/{restore_point_id}/files", {
          params: {
            path: point(pointId),
            query: { path, limit: size, ...onPartition(partition), ...(pageParam ? { marker: pageParam } : {}) },
          },
        }),
      ),
    initialPageParam: "",
    getNextPageParam: (last) => last.next_marker ?? undefined,
    staleTime: Infinity,
  });
}

/** Paths under `path` whose name matches `pattern` (shell-style); nothing is asked while
 * the pattern is empty. */
export function useFileSearch(pointId: string, partition: number | null, path: string, pattern: string) {
  return useQuery({
    queryKey: keys.fileSearch(pointId, partition, path, pattern),
    queryFn: () =>
      answer(
        api.GET("/v1/restore-points/{restore_point_id}/files/search", {
          params: { path: point(pointId), query: { pattern, path, limit: 200, ...onPartition(partition) } },
        }),
      ),
    enabled: pattern !== "",
    staleTime: Infinity,
  });
}

/** `path` in the volume's newest restore points (at most `limit`), newest first: present
 * or not, size, time, SHA-256; asked for only while `enabled` (the timeline is open). */
export function useFileVersions(volumeId: string, partition: number | null, path: string, enabled: boolean, limit = 30) {
  return useQuery({
    queryKey: keys.fileVersions(volumeId, partition, path),
    queryFn: () =>
      answer(
        api.GET("/v1/volumes/{volume_id}/file-versions", {
          params: { path: { volume_id: volumeId }, query: { path, limit, ...onPartition(partition) } },
        }),
      ),
    enabled,
  });
}
