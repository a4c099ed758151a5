/**
 * The process's own state on /metrics: the build, the configuration, the data directory's filesystem
 * (statfs at scrape time) and, on ingest processes, the inventory's VMs by state across projects.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, statfsSync } from "node:fs";
import { describe, it } from "node:test";
import { pushRemoteWrite } from "@svc/remotewrite";
import pino from "pino";
import { testDialects } from "../../testing/dialects.ts";
import { ADMIN_TOKEN, startTestApp } from "../../testing/harness.ts";
import { rwSeries } from "../../testing/remote-write.ts";

const dialects = await testDialects();

/** The value of the one sample of `name` whose labels include `labels` (undefined when absent). */
function sample(text: string, name: string, labels = ""): number | undefined {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (labels && !line.includes(labels)) continue;
    return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}

async function scrape(baseUrl: string): Promise<string> {
  const res = await fetch(`${baseUrl}/metrics`, { headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } });
  assert.equal(res.status, 200);
  return res.text();
}

describe("the process's state on /metrics", () => {
  for (const { dialect, skip } of dialects) {
    it(`build, configuration, the data directory's disk and the inventory's VMs (${dialect.name})`, {
      skip,
    }, async () => {
      const t = await startTestApp(dialect);
      try {
        await t.seedProject("big", ["vm-1", "vm-2", "vm-3"]);
        const small = await t.seedProject("small", ["vm-1", "gone"]);
        await t.admin.vms.deleteVM({ name: small.vms[1] });
        await t.admin.vms.recordVMStateEvent({ vm: small.vms[0], state: "STOPPED", stopReason: "USER" });
        const text = await scrape(t.baseUrl);
        // Across projects, deleted VMs left out, every live state present (0 is a count here).
        assert.equal(sample(text, "svc_inventory_vms", 'state="RUNNING"'), 3);
        assert.equal(sample(text, "svc_inventory_vms", 'state="STOPPED"'), 1);
        assert.equal(sample(text, "svc_inventory_vms", 'state="STARTING"'), 0);
        assert.equal(sample(text, "svc_inventory_vms", 'state="DELETED"'), undefined);

        const { version } = JSON.parse(
          readFileSync(new URL("../../package.json", import.meta.url), "utf8"),
        ) as { version: string };
        const head = spawnSync("git", ["rev-parse", "HEAD"], { encoding: "utf8" }).stdout.trim();
        assert.match(
          text,
          new RegExp(
            `^svc_build_info\\{version="${version}",revision="${head}",node="${process.version}"\\} 1$`,
            "m",
          ),
        );
        assert.match(
          text,
          new RegExp(`^svc_config_info\\{metrics_backend="embedded",database="${dialect.name}"\\} 1$`, "m"),
        );
        for (const role of ["api", "ingest", "evaluator", "notifier"])
          assert.equal(sample(text, "svc_role_enabled", `role="${role}"`), 1);
        assert.equal(sample(text, "svc_tsdb_retention_seconds"), 168 * 3600);
        assert.equal(sample(text, "svc_tsdb_max_block_duration_seconds"), 24 * 3600);

        // The filesystem of the data directory, as statfs tells it now (others write to it meanwhile).
        const fs = statfsSync(t.app.config.dataDir);
        const size = sample(text, "svc_data_dir_filesystem_size_bytes");
        const avail = sample(text, "svc_data_dir_filesystem_avail_bytes");
        assert.equal(size, fs.blocks * fs.bsize);
        assert.ok(avail !== undefined && avail > 0 && avail <= size);
        assert.ok(
          Math.abs(avail - fs.bavail * fs.bsize) < 0.02 * size,
          `${avail} vs ${fs.bavail * fs.bsize}`,
        );
      } finally {
        await t.close();
      }
    });
  }

  it("an api-only process counts no VMs, and says which roles it runs", async () => {
    const [{ dialect }] = dialects;
    const t = await startTestApp(dialect, { roles: new Set(["api"]) });
    try {
      const text = await scrape(t.baseUrl);
      assert.equal(sample(text, "svc_inventory_vms"), undefined);
      assert.equal(sample(text, "svc_role_enabled", 'role="api"'), 1);
      assert.equal(sample(text, "svc_role_enabled", 'role="ingest"'), 0);
    } finally {
      await t.close();
    }
  });

  it("a start logs the WAL replay at info: segments, samples and its duration", async () => {
    const [{ dialect }] = dialects;
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const t = await startTestApp(dialect, {}, { logger });
    try {
      const p = await t.seedProject("replay", ["vm-1"]);
      const endMs = Math.floor(t.clock.now() / 1000) * 1000;
      const samples = [0, 1, 2, 3, 4].map((i) => [endMs - (4 - i) * 15_000, i] as const);
      const res = await pushRemoteWrite(
        `${t.baseUrl}/v1/ingest/prometheus/api/v1/write`,
        t.app.config.collectorToken,
        { timeseries: [rwSeries("svc_vm_vcpus", { vm: p.vms[0] }, samples)], metadata: [] },
      );
      assert.equal(res.status, 204);
      const replays = () => lines.filter((l) => l.msg === "WAL replayed");
      assert.equal(replays().length, 1);
      assert.equal(replays()[0].samples, 0);
      await t.restart();
      const [, again] = replays();
      assert.ok(again, "no replay line on the second start");
      assert.equal(again.level, 30);
      // The five written, plus what ingest derives from them; at least one segment.
      assert.ok(Number(again.samples) >= 5, JSON.stringify(again));
      assert.ok(Number(again.segments) >= 1, JSON.stringify(again));
      assert.equal(typeof again.durationMs, "number");
    } finally {
      await t.close();
    }
  });
});
