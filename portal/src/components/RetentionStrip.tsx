import type { Schemas } from "../api/client";

type Simulation = Schemas["RetentionSimulation"];

// The longest-lived rule keeping a point names its mark: a monthly one outlives its daily.
const RANK = ["yearly", "monthly", "weekly", "daily", "last", "newest"] as const;

/** Each kept restore point of the simulation as a mark on its day, across the simulated
 * span (oldest left, now right), coloured by the longest rule that keeps it. */
export function stripMarks(simulation: Simulation, now: number): { x: number; rule: string; at: string }[] {
  const span = simulation.days * 86_400_000;
  return simulation.kept.map((k) => ({
    x: Math.min(1, Math.max(0, 1 - (now - new Date(k.at).getTime()) / span)),
    rule: RANK.find((r) => k.kept_by.includes(r)) ?? "other",
    at: k.at,
  }));
}

export function RetentionStrip({ simulation, now = Date.now() }: { simulation: Simulation; now?: number }) {
  const marks = stripMarks(simulation, now);
  const rules = RANK.filter((r) => marks.some((m) => m.rule === r));
  const width = 400;
  return (
    <figure className="retention-strip">
      <svg
        viewBox={`0 0 ${width} 28`}
        width="100%"
        role="img"
        aria-label={`What the retention keeps over the last ${simulation.days} days: ${rules
          .map((r) => `${marks.filter((m) => m.rule === r).length} ${r}`)
          .join(", ")}`}
      >
        <line x1={0} x2={width} y1={20} y2={20} className="axis" />
        {marks.map((m) => (
          <rect key={m.at} x={m.x * (width - 2)} y={m.rule === "yearly" || m.rule === "monthly" ? 2 : m.rule === "weekly" ? 8 : 13} width={2} height={m.rule === "yearly" || m.rule === "monthly" ? 18 : m.rule === "weekly" ? 12 : 7} className={`mark mark-${m.rule}`} />
        ))}
      </svg>
      <figcaption className="small muted">
        {simulation.days} days ago … now ·{" "}
        {rules.map((r) => (
          <span key={r} className="legend">
            <span className={`swatch mark-${r}`} /> {r}
          </span>
        ))}
      </figcaption>
    </figure>
  );
}
