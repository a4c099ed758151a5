/**
 * A server whose metrics store has damaged files still starts and reports ready; the damage is in
 * its log at error level and on /metrics (docs/operations.md "Damaged store files").
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import pino from "pino";
import { testDialects } from "../../testing/dialects.ts";
import { ADMIN_TOKEN, startTestApp } from "../../testing/harness.ts";
import { openTsdb } from "../tsdb/index.ts";

const HOUR = 3_600_000;

it("starts and reports ready on a store with a damaged block index and checkpoint record, and says so", async () => {
  const [{ dialect }] = await testDialects();
  const dataDir = mkdtempSync(join(tmpdir(), "svc-damaged-"));
  const tsdbDir = join(dataDir, "tsdb");
  const t0 = Date.UTC(2025, 0, 1);
  let now = t0;
  const db = await openTsdb(tsdbDir, { now: () => now, autoCompact: false });
  for (let t = t0; t < t0 + 8 * HOUR; t += 60_000) {
    now = t;
    const app = db.appender();
    for (let i = 0; i < 5; i++)
      app.append(
        [
          { name: "__name__", value: "m" },
          { name: "vm", value: `v${i}` },
        ],
        t,
        i,
      );
    await app.commit();
  }
  await db.compact();
  await db.close();
  const flip = (file: string, at: number) => {
    const b = readFileSync(file);
    b[at] ^= 0xff;
    writeFileSync(file, b);
  };
  const block = readdirSync(join(tsdbDir, "blocks"))[0];
  flip(join(tsdbDir, "blocks", block, "index"), 30);
  const wal = join(tsdbDir, "wal");
  const cp = readdirSync(wal).find((e) => e.startsWith("checkpoint.")) as string;
  const cpFile = join(wal, cp, "00000000");
  flip(cpFile, readFileSync(cpFile).length - 20); // inside the last sample record

  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: "info" }, { write: (s: string) => lines.push(JSON.parse(s)) });
  const t = await startTestApp(dialect, { dataDir }, { logger });
  try {
    const ready = await fetch(`${t.baseUrl}/readyz`);
    assert.equal(ready.status, 200, await ready.text());
    const errors = lines.filter((l) => l.level === 50 && l.component === "tsdb");
    assert.deepEqual(errors.map((l) => [l.kind, l.file]).sort(), [
      ["block", join(tsdbDir, "blocks", block)],
      ["checkpoint_record", cpFile],
    ]);
    for (const l of errors) assert.equal(typeof l.offset, "number");
    const metrics = await (
      await fetch(`${t.baseUrl}/metrics`, { headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } })
    ).text();
    assert.match(metrics, /^svc_tsdb_wal_corruptions_total\{kind="block"\} 1$/m);
    assert.match(metrics, /^svc_tsdb_wal_corruptions_total\{kind="checkpoint_record"\} 1$/m);
    assert.match(metrics, /^svc_tsdb_corrupt_dropped_samples_total\{kind="block"\} [1-9]\d*$/m);
  } finally {
    await t.close();
  }
});
