/** `used` of `limit` as a bar (none when there is no limit) and in words. */
export function Meter({ used, limit, unit }: { used: number; limit: number | null | undefined; unit: string }) {
  const share = limit ? Math.min(100, (used / limit) * 100) : 0;
  return (
    <div className="meter-cell">
      <div className="progress" role="meter" aria-valuemin={0} aria-valuemax={limit ?? undefined} aria-valuenow={used} aria-label={unit}>
        <div className={`bar ${share >= 90 ? "full" : ""}`} style={{ width: `${share}%` }} />
      </div>
      <span className="small">
        {Number.isInteger(used) ? used : used.toFixed(2)} {unit} of {limit ?? "no limit"}
      </span>
    </div>
  );
}
