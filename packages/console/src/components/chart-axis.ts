/**
 * Round y-axis ticks, as Grafana draws them (issue 43, item 7; docs/console.md#charts): 1, 2 or 5 × 10^n
 * in the unit's own scale, so a memory axis reads 0, 1, 2, 3, 4 GiB (not 3.7 GiB) and a throughput axis
 * 0, 200, 400 … KiB/s (not 976.6 KiB/s). Bytes scale by 1024 (KiB, MiB, …), everything else by 1000.
 * Plain functions: the chart calls them, a unit test can too.
 */

export interface UnitScale {
  /** Raw units per displayed unit (1024² for MiB). */
  factor: number;
  /** Written after the number, with its space (" MiB/s", " %", "k ops/s"). */
  suffix: string;
}

const BINARY = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
const DECIMAL = ["", "k", "M", "G", "T"];

/** The scale in which `magnitude` (the axis' largest absolute value) reads between 1 and 1023 (or 999). */
export function unitScale(unit: string, magnitude: number): UnitScale {
  const m = Math.abs(magnitude);
  if (unit === "bytes" || unit === "bytes/s") {
    let i = 0;
    while (m >= 1024 ** (i + 1) && i < BINARY.length - 1) i++;
    return { factor: 1024 ** i, suffix: ` ${BINARY[i]}${unit === "bytes/s" ? "/s" : ""}` };
  }
  if (unit === "%") return { factor: 1, suffix: " %" };
  let i = 0;
  while (m >= 1000 ** (i + 1) && i < DECIMAL.length - 1) i++;
  const rest = unit && unit !== "count" ? ` ${unit}` : "";
  return { factor: 1000 ** i, suffix: `${DECIMAL[i]}${rest}` };
}

/** The 1, 2 or 5 × 10^n nearest `raw` (as Grafana and d3 round a step: 2.5 → 2, 3.5 → 5). */
export function niceStep(raw: number): number {
  if (!(raw > 0) || !Number.isFinite(raw)) return 1;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const n = raw / mag;
  return (n < 1.5 ? 1 : n < 3 ? 2 : n < 7 ? 5 : 10) * mag;
}

/** The axis' step in raw units: about `target` intervals across [min, max], round in the unit's scale. */
export function axisStep(unit: string, min: number, max: number, target: number): number {
  const s = unitScale(unit, Math.max(Math.abs(min), Math.abs(max)));
  const span = (max - min) / s.factor;
  return niceStep(span / Math.max(1, target)) * s.factor;
}

/** Tick positions (raw units): every multiple of the step inside [min, max]. */
export function axisTicks(unit: string, min: number, max: number, target: number): number[] {
  if (!(max > min)) return [min];
  const step = axisStep(unit, min, max, target);
  const out: number[] = [];
  const first = Math.ceil(min / step - 1e-9) * step;
  for (let v = first, i = 0; v <= max + step * 1e-9 && i < 100; i++, v = first + i * step) out.push(v);
  return out;
}

/** The axis' upper bound rounded up to its next tick, so the top tick sits at the top. */
export function roundUp(unit: string, min: number, max: number, target: number): number {
  if (!(max > min)) return max;
  // The step of the rounded range may differ from the unrounded one's: settle on one (twice suffices).
  let top = max;
  for (let i = 0; i < 3; i++) {
    const step = axisStep(unit, min, top, target);
    const next = Math.ceil(max / step - 1e-9) * step;
    if (next === top) break;
    top = next;
  }
  return top;
}

/** Formats ticks in one scale with the decimals the step needs ("0.5 GiB", "1 GiB"; never "1.0 GiB"). */
export function formatTicks(unit: string, ticks: number[]): string[] {
  if (ticks.length === 0) return [];
  const s = unitScale(unit, Math.max(...ticks.map(Math.abs)));
  const step = ticks.length > 1 ? Math.abs(ticks[1] - ticks[0]) / s.factor : 1;
  const decimals = step > 0 ? Math.max(0, Math.min(3, Math.ceil(-Math.log10(step) - 1e-9))) : 0;
  const zero = `0${unitScale(unit, 0).suffix}`;
  return ticks.map((t) => {
    const v = t / s.factor;
    if (Math.abs(v) < 1e-12) return zero;
    // "1 MiB/s" beside "0.5 MiB/s", not "1.0 MiB/s".
    const text = decimals > 0 ? v.toFixed(decimals).replace(/\.?0+$/, "") : v.toFixed(0);
    return `${text}${s.suffix}`;
  });
}
