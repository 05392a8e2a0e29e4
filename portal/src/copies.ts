// Off-site copies: where a restore point, or a plan's restore points, may be copied to.

type Target = { name: string; kind: string; default: boolean };

/** Kinds of target a copy can go to: the chunked ones (object storage, a directory), off
 * site; an RBD pool only sends copies (services/targets: `receives_copies`). */
const RECEIVE_COPIES = new Set(["s3", "directory"]);

/** The targets a restore point on `from` can be copied to: every other one that receives
 * copies, the default first, then by name. */
export function copyTargets<T extends Target>(targets: readonly T[], from: string): T[] {
  return targets
    .filter((t) => t.name !== from && RECEIVE_COPIES.has(t.kind))
    .sort((a, b) => Number(b.default) - Number(a.default) || a.name.localeCompare(b.name));
}

export type CopyEvery = "backup" | "day" | "week" | "month";

/** A plan's copy policy in words, as the plan list and the editor say it. */
export function copyPolicyText(policy: { target: string; every?: CopyEvery } | null | undefined): string {
  if (!policy) return "no off-site copy";
  const every = policy.every ?? "week";
  return every === "backup" ? `every restore point copied to ${policy.target}` : `the first restore point of each ${every} copied to ${policy.target}`;
}

export type GroupWhere = "new_volumes" | "images" | "in_place";

/** A group restore's request: exactly one destination, as the API asks; in place is always
 * a copy (an instant restore makes something new). */
export function groupRestoreRequest(where: GroupWhere, prefix: string, instant: boolean) {
  const mode = instant ? ("instant" as const) : ("copy" as const);
  if (where === "in_place") return { in_place: true };
  if (where === "images") return { target_prefix: prefix.trim(), mode };
  return { name_prefix: prefix.trim(), mode };
}
