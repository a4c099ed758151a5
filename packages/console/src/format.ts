/** Display helpers. Missing values render as an em dash, never as 0. */

export const MISSING = "—";

export function fmtTime(unixSeconds: bigint | number | undefined): string {
  const s = Number(unixSeconds ?? 0);
  if (!s) return MISSING;
  return new Date(s * 1000).toLocaleString(undefined, {
    year: "numeric",
    month: "short",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
  });
}

export function fmtAgo(unixSeconds: bigint | number | undefined, nowMs = Date.now()): string {
  const s = Number(unixSeconds ?? 0);
  if (!s) return MISSING;
  const d = Math.round(nowMs / 1000 - s);
  if (d < 0) return `in ${fmtDuration(-d)}`;
  return `${fmtDuration(d)} ago`;
}

export function fmtDuration(seconds: number): string {
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${seconds % 60 ? `${seconds % 60}s` : ""}`.trim();
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
  return `${Math.floor(seconds / 86400)}d ${Math.floor((seconds % 86400) / 3600)}h`;
}

export function fmtNumber(v: number | undefined | null, unit = "", digits = 1): string {
  if (v === undefined || v === null || Number.isNaN(v)) return MISSING;
  return `${v.toFixed(digits)}${unit}`;
}

export function fmtBytes(v: number | undefined | null): string {
  if (v === undefined || v === null || Number.isNaN(v)) return MISSING;
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let x = v;
  while (Math.abs(x) >= 1024 && i < units.length - 1) {
    x /= 1024;
    i++;
  }
  return `${x.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

/** "projects/demo/vms/web-1" → "web-1". */
export function lastSegment(name: string): string {
  return name.slice(name.lastIndexOf("/") + 1);
}

export function newRequestId(): string {
  return crypto.randomUUID();
}

/** The browser's time zone, named as the console shows every time in it: "Europe/Berlin (GMT+1)", "UTC". */
export function timeZoneName(at = new Date()): string {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";
  const offset =
    new Intl.DateTimeFormat("en-US", { timeZoneName: "shortOffset" })
      .formatToParts(at)
      .find((p) => p.type === "timeZoneName")?.value ?? "";
  return zone === "UTC" || !offset || offset === zone ? zone : `${zone} (${offset})`;
}
