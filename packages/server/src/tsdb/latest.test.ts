import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isStaleMarker, type LatestSamples, type SeriesData, staleNaN } from "../storage/interface.ts";
import { openTsdb } from "./index.ts";
import { L, manualClock, T0, tempDir, trackCleanups } from "./testutil.ts";

const HOUR = 3_600_000;
const track = trackCleanups();

type Row = [string, number, number, boolean];
const byLabels = (rows: Row[]) => rows.sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));

/** select, reduced to each series' newest sample: what selectLatest must equal. */
function newest(data: SeriesData[]): Row[] {
  return byLabels(
    data.map((s) => {
      const i = s.timestamps.length - 1;
      return [JSON.stringify(s.labels), s.timestamps[i], s.values[i], isStaleMarker(s.values, i)];
    }),
  );
}

function rows(l: LatestSamples): Row[] {
  return byLabels(
    l.labels.map((labels, i) => [
      JSON.stringify(labels),
      l.timestamps[i],
      l.values[i],
      isStaleMarker(l.values, i),
    ]),
  );
}

describe("tsdb selectLatest", () => {
  it("equals the newest sample of select, from the head and across blocks, staleness markers kept", async () => {
    const dir = tempDir();
    track(dir.cleanup);
    const clock = manualClock(T0);
    const db = await openTsdb(dir.dir, { now: clock.now, autoCompact: false });
    track(() => db.close());
    const a = L({ __name__: "m", vm: "a" });
    const b = L({ __name__: "m", vm: "b" });
    const c = L({ __name__: "m", vm: "c" });
    for (let t = T0; t <= T0 + 6 * HOUR; t += 30_000) {
      clock.set(t);
      const app = db.appender();
      app.append(a, t, t / 1000);
      if (t < T0 + 5 * HOUR) app.append(b, t, 1);
      if (t === T0 + 5 * HOUR) app.append(b, t, staleNaN());
      if (t < T0 + 2 * HOUR) app.append(c, t, 2);
      await app.commit();
      if ((t - T0) % HOUR === 0) await db.compact();
    }
    // An out-of-order sample older than a's newest must not become "latest".
    const late = db.appender();
    late.append(a, T0 + 6 * HOUR - 45_000, -1);
    assert.equal((await late.commit()).accepted, 1);
    const q = db.querier();
    assert.ok(q.selectLatest);
    const sel = [{ type: "=" as const, name: "__name__", value: "m" }];
    for (const [mint, maxt] of [
      [T0 + 6 * HOUR - 5 * 60_000, T0 + 6 * HOUR], // head only
      [T0 + 5 * HOUR - 60_000, T0 + 5 * HOUR + 60_000], // b's staleness marker is its newest
      [T0 + 6 * HOUR - 50_000, T0 + 6 * HOUR - 40_000], // only the late sample of a is in range
      [T0, T0 + 3 * HOUR], // blocks
    ]) {
      assert.deepEqual(
        rows(q.selectLatest(sel, mint, maxt)),
        newest(q.select(sel, mint, maxt)),
        `${mint - T0}..${maxt - T0}`,
      );
    }
  });
});
