// Off-site copies: where a restore point, or a plan's restore points, may be copied to.

type Target = { name: string; kind: string; default: boolean };

/** The targets a restore point on `from` can be copied to: every other one, the default
 * first, then by name. */
export function copyTargets<T extends Target>(targets: readonly T[], from: string): T[] {
  return targets
    .filter((t) => t.name !== from)
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
