/**
 * Child process of the crash test: opens the store, ingests batches from argv[3] on, several
 * commits in flight at once, and prints "ack <k>" once batch k's commit resolved.
 * Usage: node --import tsx crash-child.ts <dir> <firstBatch>
 */
import {
  CRASH_STEP_MS,
  CRASH_T0,
  crashBatch,
  crashOptions,
  crashSeries,
  crashValue,
} from "./crash-workload.ts";
import { openTsdb } from "./index.ts";

const [dir, first] = [process.argv[2], Number(process.argv[3])];
let now = CRASH_T0 + first * CRASH_STEP_MS;
const db = await openTsdb(
  dir,
  crashOptions(() => now),
);
process.stdout.write("ready\n");
const IN_FLIGHT = 4;
for (let k = first; ; k += IN_FLIGHT) {
  now = CRASH_T0 + (k + IN_FLIGHT) * CRASH_STEP_MS;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async (_, j) => {
      const app = db.appender();
      for (const [s, t, v] of crashBatch(k + j)) app.append(crashSeries[s], t, crashValue(v));
      const r = await app.commit();
      const n = crashBatch(k + j).length;
      process.stdout.write(r.accepted === n ? `ack ${k + j}\n` : `bad ${k + j} ${JSON.stringify(r)}\n`);
    }),
  );
}
