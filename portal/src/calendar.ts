// The restore point calendar's layout: the last weeks as columns of seven days (Monday on
// top, today in the last column), each day with its counts from /v1/restore-points/days.

export type DayCount = { date: string; full: number; incremental: number };
export type Cell = { date: string; week: number; weekday: number; full: number; incremental: number; future: boolean };

/** `weeks` columns ending with the week of `today` (a YYYY-MM-DD on the user's wall clock). */
export function calendarCells(days: DayCount[], today: string, weeks: number): Cell[] {
  const counts = new Map(days.map((d) => [d.date, d]));
  const end = new Date(`${today}T00:00:00Z`);
  const mondayOffset = (end.getUTCDay() + 6) % 7; // 0 on Monday
  const first = new Date(end.getTime() - ((weeks - 1) * 7 + mondayOffset) * 86_400_000);
  const cells: Cell[] = [];
  for (let i = 0; i < weeks * 7; i++) {
    const day = new Date(first.getTime() + i * 86_400_000);
    const date = day.toISOString().slice(0, 10);
    const found = counts.get(date);
    cells.push({
      date,
      week: Math.floor(i / 7),
      weekday: i % 7,
      full: found?.full ?? 0,
      incremental: found?.incremental ?? 0,
      future: date > today,
    });
  }
  return cells;
}

/** Today's date on the user's wall clock, YYYY-MM-DD. */
export function localToday(zone: string, now = new Date()): string {
  return new Intl.DateTimeFormat("en-CA", { timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit" }).format(now);
}
