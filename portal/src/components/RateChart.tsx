import { rate } from "../format";

/** Throughput over the job's life as a small line chart (SVG): the samples are the rates
 * the page read while it polled. */
export function RateChart({ samples }: { samples: { t: number; rate: number }[] }) {
  if (samples.length < 2) return <p className="muted small">The chart starts with the next reading.</p>;
  const width = 560;
  const height = 120;
  const t0 = samples[0]?.t ?? 0;
  const span = Math.max(1, (samples.at(-1)?.t ?? t0) - t0);
  const top = Math.max(1, ...samples.map((s) => s.rate));
  const points = samples
    .map((s) => `${(((s.t - t0) / span) * width).toFixed(1)},${(height - (s.rate / top) * (height - 8)).toFixed(1)}`)
    .join(" ");
  return (
    <figure className="chart">
      <svg viewBox={`0 0 ${width} ${height}`} width={width} height={height} role="img" aria-label="Throughput">
        <polyline points={points} fill="none" stroke="currentColor" strokeWidth="2" />
      </svg>
      <figcaption className="muted small">
        throughput, up to {rate(top)} over {Math.round(span / 1000)} s
      </figcaption>
    </figure>
  );
}
