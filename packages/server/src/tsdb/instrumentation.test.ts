import assert from "node:assert/strict";
import { describe, it } from "node:test";
import pino from "pino";
import { createRegistry } from "../instrument.ts";
import { TsdbClosedError } from "./errors.ts";
import { createTsdbMetrics, damageReporter, measured } from "./instrumentation.ts";

async function value(
  registry: ReturnType<typeof createRegistry>,
  name: string,
  labels: Record<string, string>,
) {
  const f = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return f?.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value;
}

describe("tsdb instrumentation", () => {
  it("measured counts a step by outcome; a step the closing store stopped is neither", async () => {
    const registry = createRegistry();
    const m = createTsdbMetrics(registry, () => undefined);
    assert.equal(await measured(m, Promise.resolve(true), "checkpoints"), true);
    assert.equal(await measured(m, Promise.resolve(false), "checkpoints"), false);
    await assert.rejects(measured(m, Promise.reject(new Error("EIO")), "checkpoints"), /EIO/);
    await assert.rejects(measured(m, Promise.reject(new TsdbClosedError()), "checkpoints"));
    assert.equal(await value(registry, "svc_tsdb_checkpoints_total", { outcome: "ok" }), 1);
    assert.equal(await value(registry, "svc_tsdb_checkpoints_total", { outcome: "failed" }), 1);
    assert.equal(await measured(undefined, Promise.resolve(7), "merges"), 7, "no metrics: the step as it is");
  });

  it("damageReporter logs a torn tail at warn and other damage at error, counting both", async () => {
    const registry = createRegistry();
    const lines: Record<string, unknown>[] = [];
    const log = pino({ level: "info" }, { write: (s: string) => lines.push(JSON.parse(s)) });
    const report = damageReporter(
      log,
      createTsdbMetrics(registry, () => undefined),
    );
    report({
      kind: "wal_torn_tail",
      file: "wal/00000003",
      offset: 10,
      bytes: 4,
      samples: undefined,
      detail: "x",
    });
    report({
      kind: "block_chunk",
      file: "blocks/b/chunks",
      offset: 8,
      bytes: 90,
      samples: 120,
      detail: "crc",
    });
    assert.deepEqual(
      lines.map((l) => [l.level, l.kind, l.samplesDropped]),
      [
        [40, "wal_torn_tail", "unknown"],
        [50, "block_chunk", 120],
      ],
    );
    assert.equal(await value(registry, "svc_tsdb_wal_corruptions_total", { kind: "block_chunk" }), 1);
    assert.equal(
      await value(registry, "svc_tsdb_corrupt_dropped_samples_total", { kind: "block_chunk" }),
      120,
    );
  });
});
