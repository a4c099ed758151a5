import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { createSvcClients } from "@svc/sdk";
import pino from "pino";
import { testDialects } from "../../testing/dialects.ts";
import { ADMIN_TOKEN, type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { pushAll, rwSeries } from "../../testing/remote-write.ts";
import { startServerProcess } from "../../testing/server-process.ts";
import { type App, createApp } from "../app.ts";
import { loadConfig } from "../config.ts";
import type { SvcError } from "../errors.ts";
import { freePort } from "../net/free-port.ts";
import { fanout } from "../notify/outbox.ts";
import { takeBackup } from "./backup.ts";
import { BackupRefusedError, type Manifest, UNFINISHED_FILE, verifyBackup } from "./manifest.ts";
import { restoreBackup } from "./restore.ts";

const S = 1000;
const dialects = await testDialects();
const sqlite = dialects.find((d) => d.dialect.name === "sqlite")!;

async function refusal(p: Promise<unknown>, code: Code, pattern: RegExp): Promise<void> {
  try {
    await p;
  } catch (err) {
    const e = ConnectError.from(err);
    assert.equal(e.code, code, e.message);
    assert.match(e.rawMessage, pattern);
    return;
  }
  assert.fail("expected a refusal");
}

/** Starts the whole app on a restored data directory, as `SVC_DATA_DIR=<dir> npm start` would (no demo). */
async function startOn(dataDir: string, now: () => number): Promise<{ app: App; baseUrl: string }> {
  const config = loadConfig(
    {},
    {
      dataDir,
      port: await freePort("127.0.0.1"),
      adminToken: ADMIN_TOKEN,
      demo: false,
      evaluatorAutoStart: false,
      notify: { dispatcherAutoStart: false, options: { allowHosts: ["127.0.0.1"] } },
      agentPackageDir: join(dataDir, "no-agent-package"),
    },
  );
  const app = await createApp(config, { now, logger: pino({ level: "silent" }) });
  const address = await app.server.listen({ host: "127.0.0.1", port: config.port });
  return { app, baseUrl: address.replace("localhost", "127.0.0.1") };
}

describe("online backup and offline restore (SQLite + embedded store)", () => {
  let t: TestApp;
  let p: SeededProject;
  let key: string;
  const work = mkdtempSync(join(tmpdir(), "svc-backup-"));
  const backupDir = join(work, "backup");
  let manifest: Manifest;

  before(async () => {
    t = await startTestApp(sqlite.dialect, {
      notify: { dispatcherAutoStart: false, options: { allowHosts: ["127.0.0.1"] } },
    });
    p = await t.seedProject("bkp", ["vm-a", "vm-b"]);
    const created = await t.clients(p.owner.session).keys.createKey({
      parent: p.projectName,
      displayName: "reader",
      capabilities: ["monitoring.read"],
      requestId: randomUUID(),
    });
    assert.ok(created.secret);
    key = created.secret;
  });
  after(async () => {
    await t?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it("a backup under a steady remote-write stream restores into a directory that answers every acknowledged sample identically", async () => {
    const owner = t.clients(p.owner.session);
    const [vmA, vmB] = p.vms;
    const now = t.clock.ms;
    // Five hours of vm-b cut into a block, so the backup links block files as well as copying the WAL.
    const backfill: [number, number][] = [];
    for (let ts = now - 6 * 3600 * S; ts < now - 3600 * S; ts += 60 * S)
      backfill.push([ts, 1000 + backfill.length]);
    await pushAll(t.baseUrl, t.app.config.collectorToken, [
      rwSeries("svc_vm_cpu_seconds_total", { vm: vmB }, backfill),
      rwSeries("svc_vm_vcpus", { vm: vmB }, [[backfill[0][0], 2]]),
    ]);
    await t.app.tsdb.compact();
    assert.ok(t.app.tsdb.stats().blocks > 0, "a block was cut");

    // A rule that fires on vm-b's latest CPU, an open incident and its undelivered webhook delivery.
    const dest = await owner.destinations.createDestination({
      projectName: p.projectName,
      displayName: "ops webhook",
      kind: "WEBHOOK",
      url: "https://127.0.0.1:9/hooks/svc",
      requestId: randomUUID(),
    });
    const rule = await owner.alerts.saveAlertRule({
      projectName: p.projectName,
      id: randomUUID(),
      requestId: randomUUID(),
      expectedVersion: "0",
      spec: {
        displayName: "CPU busy",
        metricId: "cpu_utilization_pct",
        operator: "GREATER_THAN",
        threshold: -1,
        sustainedSeconds: 0,
        severity: "CRITICAL",
        vmNames: [vmB],
        destinationNames: [dest.destination?.name ?? ""],
      },
    });
    await t.app.evaluator.runCycle(backfill.at(-1)![0]);
    // The incident's event becomes a delivery row; no dispatcher runs, so it stays PENDING.
    await fanout({ db: t.app.db.db, baseUrl: t.baseUrl, messageTtlMs: 24 * 3600 * S }, t.clock.ms);
    const openBefore = (await owner.incidents.listIncidents({ projectName: p.projectName, state: "OPEN" }))
      .incidents;
    assert.equal(openBefore.length, 1, "an incident is open");
    const pendingBefore = (
      await owner.destinations.listDeliveries({ projectName: p.projectName, state: "PENDING" })
    ).deliveries;
    assert.ok(pendingBefore.length >= 1, "a delivery waits in the outbox");

    // The stream: one remote-write request at a time, each acknowledged sample recorded with when.
    const start = now - 3000 * S;
    const acked: { ts: number; value: number; at: number }[] = [];
    let stop = false;
    const stream = (async () => {
      for (let i = 0; !stop; i++) {
        const ts = start + i * 10 * S;
        const value = 5000 + i * 3.25;
        await pushAll(t.baseUrl, t.app.config.collectorToken, [
          rwSeries("svc_vm_cpu_seconds_total", { vm: vmA }, [[ts, value]]),
          rwSeries("svc_vm_vcpus", { vm: vmA }, [[ts, 2]]),
        ]);
        acked.push({ ts, value, at: Date.now() });
      }
    })();
    while (acked.length < 20) await new Promise((r) => setTimeout(r, 5));
    const res = await t.admin.operations.backup({ directory: backupDir });
    const afterBackup = acked.length;
    while (acked.length < afterBackup + 10) await new Promise((r) => setTimeout(r, 5));
    stop = true;
    await stream;

    assert.equal(res.directory, backupDir);
    assert.ok(res.linkedBytes > 0n, "block files are hard links");
    assert.ok(res.totalBytes > res.linkedBytes);
    manifest = JSON.parse(readFileSync(join(backupDir, "manifest.json"), "utf8")) as Manifest;
    assert.equal(BigInt(manifest.snapshotTimeUnixMs), res.snapshotTimeUnixMs);
    assert.equal(manifest.formats.schema, res.schemaVersion);
    assert.ok(manifest.files.some((f) => f.path === "data/svc.db"));
    assert.ok(manifest.files.some((f) => f.path === "data/secret-key" && f.mode === 0o600));
    const before = acked.filter((a) => a.at < manifest.snapshotTimeUnixMs);
    assert.ok(
      before.length >= 20 && before.length < acked.length,
      "samples on both sides of the snapshot time",
    );
    const last = before.at(-1)!;

    const restored = join(work, "restored");
    const r = await restoreBackup(backupDir, restored);
    assert.equal(r.dataDir, restored);
    const second = await startOn(restored, t.clock.now);
    try {
      const q = (baseUrl: string) => async (expr: string) => {
        const u = new URL(`${baseUrl}/v1/monitoring/projects/bkp/prometheus/api/v1/query_range`);
        u.search = new URLSearchParams({
          query: expr,
          start: String(start / S),
          end: String(last.ts / S),
          step: "10",
        }).toString();
        const res = await fetch(u, { headers: { Authorization: `Bearer ${key}` } });
        assert.equal(res.status, 200, "the key authenticates");
        return (await res.json()) as { data: { result: { values: [number, string][] }[] } };
      };
      // Every sample acknowledged before the snapshot time, exactly, through the Prometheus API.
      const raw = await q(second.baseUrl)(`svc_vm_cpu_seconds_total{vm="${vmA}"}`);
      assert.deepEqual(
        raw.data.result[0].values.map(([ts, v]) => [ts * S, Number(v)]),
        before.map((a) => [a.ts, a.value]),
      );
      for (const expr of [`svc_vm_cpu_seconds_total{vm="${vmA}"}`, `rate(svc_vm_cpu_seconds_total[1m])`]) {
        assert.deepEqual(await q(second.baseUrl)(expr), await q(t.baseUrl)(expr), expr);
      }
      // And through QueryVMMonitoring, for both VMs (vm-b from the linked block).
      const rpc = async (baseUrl: string, vm: string, from: number) => {
        const { createSvcClients } = await import("@svc/sdk");
        const c = createSvcClients({ baseUrl, token: key, maxRetries: 0 });
        const ans = await c.monitoring.queryVMMonitoring({
          name: vm,
          metricIds: ["cpu_utilization_pct"],
          startTimeUnix: BigInt(Math.ceil(from / S)),
          endTimeUnix: BigInt(Math.floor(last.ts / S)),
          stepSeconds: 30,
        });
        return ans.series.map((s) => s.points.map((pt) => [Number(pt.timeUnix), pt.value]));
      };
      for (const [vm, from] of [
        [vmA, start],
        [vmB, backfill[0][0]],
      ] as const) {
        const got = await rpc(second.baseUrl, vm, from);
        assert.ok(got[0].length >= 3, `${vm} has points (${got[0].length})`);
        assert.deepEqual(got, await rpc(t.baseUrl, vm, from), vm);
      }
      // The control plane: the owner's session, the rule, the open incident, the undelivered row.
      const { createSvcClients } = await import("@svc/sdk");
      const o2 = createSvcClients({ baseUrl: second.baseUrl, token: p.owner.session, maxRetries: 0 });
      const rules = (await o2.alerts.listAlertRules({ projectName: p.projectName })).rules;
      assert.deepEqual(
        rules.map((x) => x.name),
        [rule.name],
      );
      const open = (await o2.incidents.listIncidents({ projectName: p.projectName, state: "OPEN" }))
        .incidents;
      assert.deepEqual(
        open.map((i) => i.name),
        openBefore.map((i) => i.name),
      );
      const pending = (await o2.destinations.listDeliveries({ projectName: p.projectName, state: "PENDING" }))
        .deliveries;
      assert.deepEqual(
        pending.map((d) => d.name),
        pendingBefore.map((d) => d.name),
      );
      // The restored server takes writes: its store and database are its own, not links into the source.
      await pushAll(second.baseUrl, t.app.config.collectorToken, [
        rwSeries("svc_vm_vcpus", { vm: vmA }, [[last.ts + 1, 4]]),
      ]);
    } finally {
      await second.app.close();
    }
  });

  it("refuses a truncated, tampered, unfinished or newer-format backup, naming the file, and writes nothing", async () => {
    assert.ok(manifest, "the first test took a backup");
    const attempt = async (name: string, spoil: (dir: string) => void, pattern: RegExp) => {
      const copy = join(work, `spoiled-${name}`);
      cpSync(backupDir, copy, { recursive: true });
      spoil(copy);
      const target = join(work, `target-${name}`);
      await assert.rejects(restoreBackup(copy, target), (e: unknown) => {
        assert.ok(e instanceof BackupRefusedError, String(e));
        assert.match(e.message, pattern);
        return true;
      });
      assert.equal(existsSync(target), false, "nothing written");
      assert.deepEqual(
        readdirSync(work).filter((f) => f.includes(`target-${name}`)),
        [],
        "no staging directory left behind",
      );
    };
    const wal = manifest.files.find((f) => /^data\/tsdb\/wal\/\d{8}$/.test(f.path) && f.bytes > 16)!;
    await attempt(
      "truncated",
      (d) => truncateSync(join(d, wal.path), wal.bytes - 5),
      new RegExp(`^${wal.path}: .*truncated`),
    );
    await attempt(
      "tampered",
      (d) => {
        const path = join(d, "data", "svc.db");
        const b = readFileSync(path);
        b[b.length - 100] ^= 0xff;
        writeFileSync(path, b);
      },
      /^data\/svc\.db: sha256 differs from the manifest/,
    );
    await attempt(
      "unfinished",
      (d) => rmSync(join(d, "manifest.json")),
      /^manifest\.json: missing: the backup did not finish/,
    );
    await attempt(
      "newer",
      (d) => {
        const m = JSON.parse(readFileSync(join(d, "manifest.json"), "utf8"));
        m.formats.tsdbWal = 99;
        writeFileSync(join(d, "manifest.json"), JSON.stringify(m));
      },
      /^manifest\.json: tsdbWal format 99 is newer than this build reads/,
    );
    await attempt(
      "extra",
      (d) => writeFileSync(join(d, "data", "tsdb", "wal", "99999999"), "x"),
      /not listed in the manifest/,
    );

    // Never into a non-empty directory; what is there stays as it was.
    const busy = join(work, "busy");
    mkdirSync(busy);
    writeFileSync(join(busy, "keep"), "mine");
    await assert.rejects(restoreBackup(backupDir, busy), /busy: exists and is not an empty directory/);
    assert.deepEqual(readdirSync(busy), ["keep"]);
    assert.equal(readFileSync(join(busy, "keep"), "utf8"), "mine");
  });

  it("Backup is the operator's, into an absolute, empty directory outside the data directory", async () => {
    await refusal(
      t.clients(key).admin.operations.backup({ directory: join(work, "x") }),
      Code.PermissionDenied,
      /OPERATOR_ONLY/,
    );
    await refusal(
      t.admin.operations.backup({ directory: "relative/dir" }),
      Code.InvalidArgument,
      /^directory: must be an absolute path/,
    );
    await refusal(
      t.admin.operations.backup({ directory: join(t.app.config.dataDir, "backups") }),
      Code.InvalidArgument,
      /^directory: must lie outside the data directory/,
    );
    await refusal(
      t.admin.operations.backup({ directory: backupDir }),
      Code.FailedPrecondition,
      /not empty.*BACKUP_REFUSED/,
    );
  });

  it("resolves symbolic links: a link into the data directory is inside it (issue 41)", async () => {
    const data = t.app.config.dataDir;
    mkdirSync(join(data, "inside"), { recursive: true });
    symlinkSync(join(data, "inside"), join(work, "link-inside"));
    symlinkSync(data, join(work, "link-data"));
    for (const directory of [
      join(work, "link-inside"), // the link itself, an existing empty directory in the data directory
      join(work, "link-data", "backups", "b1"), // under a linked ancestor, not created yet
    ])
      await refusal(
        t.admin.operations.backup({ directory }),
        Code.InvalidArgument,
        /^directory: must lie outside the data directory/,
      );
    assert.ok(!existsSync(join(data, "backups")), "nothing was written into the data directory");
    assert.deepEqual(readdirSync(join(data, "inside")), []);
  });

  it("names why a target cannot be written, and refuses a NUL in the path, as 400s (issue 41)", async () => {
    writeFileSync(join(work, "a-file"), "not a directory\n");
    await refusal(
      t.admin.operations.backup({ directory: join(work, "a-file", "sub") }),
      Code.FailedPrecondition,
      /^directory: cannot write the backup into .*: a part of the path is not a directory \(ENOTDIR\).*BACKUP_REFUSED/,
    );
    if (existsSync("/sys/kernel"))
      await refusal(
        t.admin.operations.backup({ directory: "/sys/svc-backup-test" }),
        Code.FailedPrecondition,
        /\((EPERM|EROFS|EACCES)\).*BACKUP_REFUSED/,
      );
    await refusal(
      t.admin.operations.backup({ directory: `${work}/nul\u0000name` }),
      Code.InvalidArgument,
      /^directory: must not contain a NUL character/,
    );
  });

  it("a backup killed midway is marked unfinished; the retry into the same directory clears it and succeeds (issue 41)", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "svc-killed-backup-data-"));
    const target = join(work, "killed");
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PORT: "0",
      SVC_DATA_DIR: dataDir,
      SVC_DEMO: "false",
      SVC_EVALUATOR: "false",
      SVC_DISPATCHER: "false",
      SVC_ADMIN_TOKEN: ADMIN_TOKEN,
      SVC_LOG_LEVEL: "warn",
    };
    delete env.SVC_DATABASE_URL;
    const hang = join(import.meta.dirname, "..", "..", "testing", "hang-before-manifest.ts");
    const server = await startServerProcess({
      env,
      args: ["--import", "tsx", "--import", hang, "packages/server/src/main.ts"],
    });
    try {
      const call = createSvcClients({ baseUrl: server.baseUrl, token: ADMIN_TOKEN, maxRetries: 0 })
        .admin.operations.backup({ directory: target })
        .catch((e: unknown) => e);
      for (let i = 0; i < 1200 && !server.output().includes("hangs before its manifest"); i++)
        await new Promise((r) => setTimeout(r, 50));
      assert.match(server.output(), /hangs before its manifest/);
      server.child.kill("SIGKILL");
      await server.exited;
      assert.ok((await call) instanceof Error, "the killed server never answered");
    } finally {
      server.child.kill("SIGKILL");
      rmSync(dataDir, { recursive: true, force: true });
    }
    // What the kill left: the data, no manifest, and the mark of an unfinished backup.
    const left = readdirSync(target);
    assert.ok(left.includes("data") && !left.includes("manifest.json"), left.join(","));
    assert.ok(left.includes(UNFINISHED_FILE), "the unfinished backup is marked as such");
    await assert.rejects(verifyBackup(target), /manifest\.json/);
    // The retry (here by another server) clears what the killed one left and writes a whole backup.
    const r = await t.admin.operations.backup({ directory: target });
    assert.equal(r.directory, target);
    await verifyBackup(target);
    assert.ok(!readdirSync(target).includes(UNFINISHED_FILE), "a finished backup carries no mark");
  });

  it("a server refuses a data directory whose store a newer build wrote, before it opens or migrates the database", async () => {
    const dataDir = join(work, "newer");
    mkdirSync(join(dataDir, "tsdb"), { recursive: true });
    writeFileSync(join(dataDir, "tsdb", "VERSION"), JSON.stringify({ wal: 99, block: 1 }));
    await assert.rejects(
      startOn(dataDir, t.clock.now),
      /tsdb\/VERSION: WAL format 99 is newer than this build reads/,
    );
    assert.deepEqual(readdirSync(join(dataDir, "tsdb")), ["VERSION"]);
    assert.equal(existsSync(join(dataDir, "svc.db")), false, "the database was not created or migrated");
  });

  it("on PostgreSQL or a remote engine, Backup points to their own tools instead", async () => {
    const pg = { dialect: "postgres" as const, db: t.app.db.db, close: async () => {} };
    const dataDir = t.app.config.dataDir;
    await assert.rejects(
      takeBackup({ db: pg, tsdb: t.app.tsdb, dataDir }, join(work, "pg")),
      (e: SvcError) => e.reason === "BACKUP_REFUSED" && /PostgreSQL.*pg_dump/.test(e.message),
    );
    await assert.rejects(
      takeBackup({ db: t.app.db, dataDir }, join(work, "remote")),
      (e: SvcError) => e.metadata.why === "unsupported" && /remote engine.*vmbackup/.test(e.message),
    );
    assert.equal(existsSync(join(work, "pg")) || existsSync(join(work, "remote")), false);
  });
});
