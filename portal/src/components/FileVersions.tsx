import { useEffect, useMemo, useRef } from "react";
import { useFileVersions } from "../api/files";
import { useRestorePoints } from "../api/restore-points";
import { bytes, when } from "../format";
import { baseName, browserPath, changes, contentHref, parentPath, shortHash } from "../files";
import { Download, Link } from "../router";
import { ErrorNote } from "./ErrorNote";

type Props = {
  volumeId: string;
  pointId: string;
  partition: number | null;
  path: string;
  onClose: () => void;
};

/** "Versions of this file": the path in the volume's newest restore points, newest first,
 * as a timeline; each present copy downloadable, a change of content marked, so the last
 * good copy is found at a glance. Focus moves to its heading when it opens. */
export function FileVersions({ volumeId, pointId, partition, path, onClose }: Props) {
  const versions = useFileVersions(volumeId, partition, path, true);
  // The versions name restore points by id; their dates come from the volume's list.
  const points = useRestorePoints(volumeId, 100, false);
  const taken = useMemo(
    () => new Map((points.data?.pages ?? []).flatMap((page) => page.restore_points).map((p) => [p.id, p.created_at])),
    [points.data],
  );
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), [path]);
  const list = versions.data?.versions ?? [];
  const changed = changes(list);
  const name = baseName(path);
  return (
    <section className="versions" aria-labelledby="versions-heading" aria-busy={versions.isLoading}>
      <div className="section-head">
        <h3 id="versions-heading" ref={heading} tabIndex={-1}>
          Versions of {path}
        </h3>
        <button type="button" onClick={onClose}>
          Close versions
        </button>
      </div>
      <ErrorNote error={versions.error} />
      {versions.isLoading && <p className="muted">Reading the volume's restore points…</p>}
      {versions.data && list.length === 0 && <p className="muted">The volume has no restore point to look in.</p>}
      <ol className="timeline">
        {list.map((v, i) => {
          const at = taken.get(v.restore_point_id);
          const here = v.restore_point_id === pointId;
          return (
            <li key={v.restore_point_id} data-version={v.restore_point_id} className={v.present ? "present" : "absent"}>
              <span className="dot" aria-hidden="true" />
              <div className="version-head">
                <strong>{at ? when(at) : `restore point ${v.restore_point_id.slice(0, 8)}`}</strong>
                {here && <span className="tag">this restore point</span>}
                {changed[i] && <span className="tag tag-queued">changed</span>}
              </div>
              {v.present ? (
                <div className="small">
                  {v.type} · {bytes(v.size)} · modified {when(v.mtime)} · SHA-256{" "}
                  <code title={v.sha256 ?? "not computed"}>{shortHash(v.sha256)}</code>
                  {v.type === "file" && (
                    <>
                      {" · "}
                      <Download
                        to={contentHref(v.restore_point_id, path, partition)}
                        label={`Download ${name} from ${at ? when(at) : v.restore_point_id}`}
                      >
                        Download
                      </Download>
                    </>
                  )}
                  {!here && (
                    <>
                      {" · "}
                      <Link to={browserPath(v.restore_point_id, parentPath(path), partition)}>Browse this restore point</Link>
                    </>
                  )}
                </div>
              ) : (
                <div className="small muted">absent{v.reason ? `: ${v.reason}` : ""}</div>
              )}
            </li>
          );
        })}
      </ol>
    </section>
  );
}
