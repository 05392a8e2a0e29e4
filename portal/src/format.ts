// Times in the user's own timezone; sizes in binary units, as Ceph and Cinder show them.
const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return "–";
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${UNITS[unit]}`;
}

export function rate(n: number | null | undefined): string {
  return n ? `${bytes(n)}/s` : "–";
}

// One formatter for every cell: toLocaleString with options builds a new one per call,
// which made a page of 200 restore points measurably slower to draw.
const DATE_TIME = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

export function when(iso: string | null | undefined): string {
  if (!iso) return "–";
  return DATE_TIME.format(new Date(iso));
}

export function ago(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return "never";
  const seconds = Math.round((now - new Date(iso).getTime()) / 1000);
  return `${duration(Math.abs(seconds))} ${seconds >= 0 ? "ago" : "from now"}`;
}

export function duration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return "–";
  // A job of 0.3 s is not "0 s": a tenth of a second below ten, whole seconds above.
  if (seconds < 10) return `${seconds > 0 && seconds < 0.05 ? "< 0.1" : Number(seconds.toFixed(1))} s`;
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  if (seconds < 86400) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} days`;
}

/** A volume as its tenant knows it: its Cinder name where Cairn knows one, else the RBD
 * image Cairn reads (`cluster/pool/image`, the only name an RBD image has). */
export function volumeLabel(of: { volume?: string | null; volume_name?: string | null }): string {
  return of.volume_name || of.volume || "–";
}

/** The RBD image behind a volume, shown beside its Cinder name; nothing when the name
 * already is the image. */
export function volumeDetail(of: { volume?: string | null; volume_name?: string | null }): string | undefined {
  return of.volume_name && of.volume ? of.volume : undefined;
}

/** A volume's size: a Cinder volume's in GiB as Cinder says it, an RBD image's exactly. */
export function volumeSize(volume: { kind: string; size_gb: number; size_bytes: number }): string {
  return volume.kind === "cinder" ? `${volume.size_gb} GiB` : bytes(volume.size_bytes);
}
