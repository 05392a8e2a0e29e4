// The plan editor's schedule builder: the common shapes a tenant picks from (every hour,
// every day, on some weekdays, on a day of the month, each at a time) and their cron line,
// both ways, so an existing plan opens in the builder; anything else stays as the cron line
// or RRULE it is ("custom"). The API turns each rule into words and checks it.

export type Repeats = "hourly" | "daily" | "weekly" | "monthly" | "custom";

export type Spec = {
  repeats: Repeats;
  time: string; // HH:MM, the plan's wall clock
  minute: number; // hourly: the minute of each hour
  weekdays: number[]; // weekly: 0 = Sunday .. 6 = Saturday
  monthDay: number; // monthly: 1..28
  text: string; // custom: a cron line or an RRULE
};

export type Rule = { cron?: string | null; rrule?: string | null };

export const WEEKDAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

export function blankSpec(repeats: Repeats = "daily"): Spec {
  return { repeats, time: "02:00", minute: 0, weekdays: [0], monthDay: 1, text: "" };
}

const number = (text: string) => (/^\d+$/.test(text) ? Number(text) : NaN);

/** The rule a spec stands for: a cron line, or an RRULE when a custom text says FREQ=. */
export function ruleOf(spec: Spec): Rule {
  const [hour, minute] = spec.time.split(":").map(Number);
  switch (spec.repeats) {
    case "hourly":
      return { cron: `${spec.minute} * * * *` };
    case "daily":
      return { cron: `${minute} ${hour} * * *` };
    case "weekly":
      return { cron: `${minute} ${hour} * * ${[...new Set(spec.weekdays)].sort((a, b) => a - b).join(",") || "0"}` };
    case "monthly":
      return { cron: `${minute} ${hour} ${spec.monthDay} * *` };
    case "custom": {
      const text = spec.text.trim();
      return /(^|;)\s*FREQ=/i.test(text) ? { rrule: text } : { cron: text };
    }
  }
}

/** The builder's view of a stored rule: one of the common shapes, else custom. */
export function specOf(rule: Rule): Spec {
  if (rule.rrule) return { ...blankSpec("custom"), text: rule.rrule };
  const text = (rule.cron ?? "").trim();
  const custom = { ...blankSpec("custom"), text };
  const fields = text.split(/\s+/);
  if (fields.length !== 5) return custom;
  const [m = "", h = "", dom = "", month = "", dow = ""] = fields;
  const minute = number(m);
  if (Number.isNaN(minute) || minute > 59 || month !== "*") return custom;
  if (h === "*" && dom === "*" && dow === "*") return { ...blankSpec("hourly"), minute };
  const hour = number(h);
  if (Number.isNaN(hour) || hour > 23) return custom;
  const time = `${String(hour).padStart(2, "0")}:${String(minute).padStart(2, "0")}`;
  if (dom === "*" && dow === "*") return { ...blankSpec("daily"), time };
  if (dom === "*") {
    const days = dow.split(",").map(number);
    if (days.some((d) => Number.isNaN(d) || d > 7)) return custom;
    return { ...blankSpec("weekly"), time, weekdays: [...new Set(days.map((d) => d % 7))].sort((a, b) => a - b) };
  }
  const day = number(dom);
  if (dow === "*" && !Number.isNaN(day) && day >= 1 && day <= 28) return { ...blankSpec("monthly"), time, monthDay: day };
  return custom;
}
