import { useRestorePointDays } from "../api/restore-points";
import { calendarCells, localToday } from "../calendar";
import { ErrorNote } from "./ErrorNote";

const ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
const WEEKS = 13;
const SIZE = 13;
const GAP = 3;
const ROWS = ["Mon", "", "Wed", "", "Fri", "", "Sun"];

function words(full: number, incremental: number): string {
  const parts = [full && `${full} full`, incremental && `${incremental} incremental`].filter(Boolean);
  return parts.length ? parts.join(", ") : "no restore point";
}

/** The volume's restore points of the last 13 weeks on a calendar of the user's days: a
 * gap in the backups shows as a gap in the squares, a full backup as a darker one. */
export function PointCalendar({ volumeId }: { volumeId: string }) {
  const days = useRestorePointDays(volumeId, ZONE, WEEKS * 7);
  if (days.error) return <ErrorNote error={days.error} />;
  if (!days.data) return null;
  const cells = calendarCells(days.data.days, localToday(ZONE), WEEKS);
  const covered = cells.filter((c) => c.full + c.incremental > 0).length;
  const width = 30 + WEEKS * (SIZE + GAP);
  return (
    <figure className="calendar">
      <svg
        viewBox={`0 0 ${width} ${7 * (SIZE + GAP)}`}
        width={width}
        role="img"
        aria-label={`Restore points per day over the last ${WEEKS} weeks: ${covered} days with at least one`}
      >
        {ROWS.map((label, row) => (
          <text key={row} x={0} y={row * (SIZE + GAP) + SIZE - 2} className="calendar-label">
            {label}
          </text>
        ))}
        {cells.map((c) => (
          <rect
            key={c.date}
            data-date={c.date}
            x={30 + c.week * (SIZE + GAP)}
            y={c.weekday * (SIZE + GAP)}
            width={SIZE}
            height={SIZE}
            rx={2}
            className={c.future ? "day-future" : c.full ? "day-full" : c.incremental ? "day-incremental" : "day-none"}
          >
            <title>{`${c.date}: ${words(c.full, c.incremental)}`}</title>
          </rect>
        ))}
      </svg>
      <figcaption className="small muted">
        Last {WEEKS} weeks ({ZONE}) · <span className="swatch day-full" /> with a full · <span className="swatch day-incremental" /> incremental only ·{" "}
        <span className="swatch day-none" /> none
      </figcaption>
    </figure>
  );
}
