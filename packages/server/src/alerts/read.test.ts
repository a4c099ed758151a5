import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { labelsFromRecord } from "../storage/interface.ts";
import { ruleMetrics } from "./catalog.ts";
import { indexSeries, ruleData } from "./read.ts";

const S = 1000;
const T = 1_800_000_000_000;
const VM = "projects/p/locations/dc-1/vms/vm-1";
type Pair = [number, number];

describe("ruleData(): a ratio", () => {
  // The definition (docs/alerts.md): finite samples of each side, a sample where num and den (or num and
  // avail) were taken together, num ÷ (num + avail) where avail was, num ÷ den where not, never ÷ 0.
  function reference(num: Pair[], den: Pair[], avail: Pair[] | undefined) {
    const fin = (xs: Pair[]) => xs.filter(([, v]) => Number.isFinite(v));
    const d = new Map(fin(den));
    const a = new Map(avail ? fin(avail) : []);
    const t: number[] = [];
    const v: number[] = [];
    for (const [ts, x] of fin(num)) {
      const q = a.has(ts) ? x + (a.get(ts) as number) : (d.get(ts) ?? 0);
      if (q > 0) {
        t.push(ts);
        v.push((100 * x) / q);
      }
    }
    return { t, v };
  }

  it("of one series a side is the definition's, with staleness markers, NaN, zeros and samples taken apart", () => {
    let seed = 11;
    const rnd = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const stale = Number.NaN;
    for (let k = 0; k < 500; k++) {
      const side = (p: number) => {
        const out: Pair[] = [];
        for (let i = 0; i < 40; i++) {
          if (rnd() < p) continue;
          const r = rnd();
          out.push([
            T - (40 - i) * 30 * S,
            r < 0.05 ? stale : r < 0.1 ? 0 : r < 0.12 ? Number.POSITIVE_INFINITY : rnd() * 100,
          ]);
        }
        return out;
      };
      const withAvail = rnd() < 0.5;
      const num = side(0.1);
      const den = side(0.2);
      const avail = withAvail ? side(0.5) : undefined;
      const labels = (name: string) =>
        labelsFromRecord({ __name__: name, vm: VM, source: "guest_agent", mountpoint: "/", fstype: "ext4" });
      const series = (name: string, xs: Pair[]) => ({
        labels: labels(name),
        timestamps: Float64Array.from(xs, ([t]) => t),
        values: Float64Array.from(xs, ([, v]) => v),
      });
      const data = [
        series("svc_vm_filesystem_used_bytes", num),
        series("svc_vm_filesystem_size_bytes", den),
        ...(avail ? [series("svc_vm_filesystem_avail_bytes", avail)] : []),
      ].filter((s) => s.timestamps.length > 0);
      const got = ruleData(
        ruleMetrics.get("filesystem_used_pct")!,
        indexSeries(data),
        undefined,
        T - 3600 * S,
        T,
      );
      const want = reference(num, den, avail);
      const series0 = got.get(`${VM}#/`)?.series ?? { t: [], v: [] };
      assert.deepEqual(series0, want, `case ${k}`);
    }
  });
});
