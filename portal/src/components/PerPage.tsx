import { PER_PAGE_CHOICES } from "../paging";

export function PerPage({ value, onChange }: { value: number; onChange: (size: number) => void }) {
  return (
    <label className="inline">
      Per page
      <select value={value} onChange={(e) => onChange(Number(e.target.value))}>
        {PER_PAGE_CHOICES.map((n) => (
          <option key={n} value={n}>
            {n}
          </option>
        ))}
      </select>
    </label>
  );
}
