import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, afterEach, before, describe, it } from "node:test";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { AlertRuleSpec, AlertRuleSpecSchema } from "@svc/sdk/gen/svc/monitoring/v1/alerts_pb";
import pino from "pino";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import type { MetricsBackend } from "../metrics/backend.ts";
import { labelsFromRecord } from "../storage/interface.ts";
import { createEvaluator } from "./evaluator.ts";
import { resolveAlertOptions } from "./options.ts";

const S = 1000;
type SpecInit = MessageInitShape<typeof AlertRuleSpecSchema>;

function reasonOf(err: unknown): string | undefined {
  const e = ConnectError.from(err);
  return /\[([A-Z_]+)\]$/.exec(e.rawMessage)?.[1];
}

async function rejects(
  p: Promise<unknown>,
  code: Code,
  reason: string,
  text?: RegExp,
): Promise<ConnectError> {
  try {
    await p;
  } catch (err) {
    const e = ConnectError.from(err);
    assert.equal(e.code, code, e.message);
    assert.equal(reasonOf(e), reason, e.message);
    if (text) assert.match(e.rawMessage, text);
    return e;
  }
  assert.fail("expected a refusal");
}

for (const { dialect, skip } of await testDialects()) {
  describe(`alert rules and the evaluator (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    const projectId = "alerts";
    let vm1: string;
    let vm2: string;

    before(async () => {
      t = await startTestApp(dialect, { alerts: { maxRulesPerProject: 6, maxInstancesPerProject: 12 } });
      p = await t.seedProject(projectId, ["vm-1", "vm-2"]);
      [vm1, vm2] = p.vms;
    });
    after(() => t?.close());
    // A test that fails half-way must not leave its rules to the next one (limits, read counts).
    afterEach(async () => {
      for (const r of (await owner().alerts.listAlertRules({ projectName: p.projectName })).rules)
        await owner().alerts.deleteAlertRule({ name: r.name });
    });

    const owner = () => t.clients(p.owner.session);
    /** Appends samples of one VM series straight into the store. */
    async function write(
      name: string,
      vm: string,
      points: [number, number][],
      extra: Record<string, string> = {},
    ) {
      const a = t.app.tsdb.appender();
      const labels = labelsFromRecord({
        __name__: name,
        project_id: projectId,
        vm,
        vm_id: vm.split("/").pop() ?? "",
        location: "dc-1",
        source: extra.source ?? "hypervisor",
        ...extra,
      });
      for (const [ts, v] of points) a.append(labels, ts, v);
      await a.commit();
    }
    /** CPU samples every 30 s in [fromMs, toMs) with a value per time. */
    async function cpu(vm: string, fromMs: number, toMs: number, value: (ts: number) => number) {
      const pts: [number, number][] = [];
      for (let ts = fromMs; ts < toMs; ts += 30 * S) pts.push([ts, value(ts)]);
      await write("svc_vm_cpu_utilization_pct", vm, pts);
    }
    const spec = (over: Partial<SpecInit> = {}): SpecInit =>
      ({
        displayName: "CPU high",
        metricId: "cpu_utilization_pct",
        operator: "GREATER_THAN",
        threshold: 90,
        sustainedSeconds: 120,
        severity: "WARNING",
        allVms: false,
        vmNames: [vm1],
        repeatIntervalSeconds: 0,
        destinationNames: [],
        ...over,
      }) as SpecInit;
    async function save(s: SpecInit, id = randomUUID(), expectedVersion = "0") {
      return owner().alerts.saveAlertRule({
        projectName: p.projectName,
        id,
        requestId: randomUUID(),
        expectedVersion,
        spec: s,
      });
    }
    /** Runs one cycle at each 30 s step in (fromMs, toMs]. */
    async function cycles(fromMs: number, toMs: number) {
      for (let at = fromMs; at <= toMs; at += 30 * S) {
        t.clock.ms = at;
        await t.app.evaluator.runCycle(at);
      }
    }
    async function instance(ruleName: string, vm = vm1) {
      const r = await owner().alerts.getAlertRule({ name: ruleName, includeInstances: true });
      return r.instances.find((i) => i.vmName === vm);
    }
    async function events(incident: string) {
      return (await owner().incidents.getIncident({ name: incident })).events.map((e) => e.kind);
    }
    async function cleanup(name: string) {
      await owner().alerts.deleteAlertRule({ name });
    }

    it("a saved revision is PENDING and watches nothing until the evaluator applies it", async () => {
      const r = await save(spec());
      assert.equal(r.version, "1");
      assert.equal(r.appliedVersion, "0");
      assert.equal(r.syncStatus, "PENDING");
      assert.match(r.name, new RegExp(`^projects/${projectId}/alertRules/[0-9a-f-]{36}$`));
      await t.app.evaluator.applyPending();
      const g = await owner().alerts.getAlertRule({ name: r.name });
      assert.deepEqual([g.version, g.appliedVersion, g.syncStatus], ["1", "1", "APPLIED"]);
      await cleanup(r.name);
    });

    it("fires after the breach holds for sustainedSeconds, keeps firing without data, and resolves only on an observed recovery", async () => {
      const t0 = t.clock.ms + 3600 * S;
      t.clock.ms = t0;
      const r = await save(spec());
      // 95 % from t0 for 5 minutes, then nothing for 3 minutes, then 40 %.
      await cpu(vm1, t0 - 600 * S, t0, () => 40);
      await cpu(vm1, t0, t0 + 300 * S, () => 95);
      await cycles(t0, t0 + 90 * S);
      assert.equal((await instance(r.name))?.state, "PENDING");
      await cycles(t0 + 120 * S, t0 + 150 * S);
      const firing = await instance(r.name);
      assert.equal(firing?.state, "FIRING");
      assert.ok(firing?.incident);
      // No samples after t0 + 270 s: the instance stays firing, flagged, and the incident stays open.
      await cycles(t0 + 180 * S, t0 + 480 * S);
      const quiet = await instance(r.name);
      assert.deepEqual([quiet?.state, quiet?.flag], ["FIRING", "NO_DATA"]);
      const open = await owner().incidents.getIncident({ name: firing.incident });
      assert.deepEqual([open.state, open.noData], ["OPEN", true]);
      await cpu(vm1, t0 + 510 * S, t0 + 540 * S, () => 40);
      await cycles(t0 + 510 * S, t0 + 510 * S);
      assert.equal((await instance(r.name))?.state, "RESOLVED");
      const closed = await owner().incidents.getIncident({ name: firing.incident });
      assert.equal(closed.state, "RESOLVED");
      assert.equal(closed.closeTimeUnix, BigInt((t0 + 510 * S) / 1000));
      assert.deepEqual(await events(firing.incident), ["OPENED", "RESOLVED"]);
      await cleanup(r.name);
    });

    it("an evaluator error keeps a firing instance firing, flagged, and never resolves it; one store read per rule", async () => {
      const t0 = t.clock.ms + 3600 * S;
      t.clock.ms = t0;
      const r = await save(spec({ sustainedSeconds: 0, allVms: true, vmNames: [] }));
      await cpu(vm1, t0 - 60 * S, t0 + 60 * S, () => 99);
      await cpu(vm2, t0 - 60 * S, t0 + 60 * S, () => 99);
      let reads = 0;
      let fail = false;
      const metrics: MetricsBackend = {
        ...t.app.metrics,
        select: async (...args) => {
          reads++;
          if (fail) throw new Error("store unavailable");
          return t.app.metrics.select(...args);
        },
      };
      const ev = createEvaluator({
        db: t.app.db.db,
        metrics,
        now: t.clock.now,
        log: pino({ level: "silent" }),
        options: resolveAlertOptions(),
      });
      await ev.runCycle(t0);
      assert.equal(reads, 1, "two VMs, one rule: one read");
      const firing = await instance(r.name);
      assert.equal(firing?.state, "FIRING");
      fail = true;
      await ev.runCycle(t0 + 30 * S);
      const after = await instance(r.name);
      assert.deepEqual(
        [after?.state, after?.flag, after?.flagMessage],
        ["FIRING", "ERROR", "store unavailable"],
      );
      const inc = await owner().incidents.getIncident({ name: firing?.incident ?? "" });
      assert.deepEqual([inc.state, inc.evaluationError], ["OPEN", true]);
      await cleanup(r.name);
    });

    it("the 90 % filesystem rule reads with the forecast's long read, and on its own when that read fails", async () => {
      const t0 = t.clock.ms + 3600 * S;
      t.clock.ms = t0;
      const fsLabels = { mountpoint: "/", fstype: "ext4", device: "vda1", source: "guest_agent" };
      const pts = (v: (ts: number) => number): [number, number][] => {
        const out: [number, number][] = [];
        for (let ts = t0 - 3600 * S; ts <= t0; ts += 30 * S) out.push([ts, v(ts)]);
        return out;
      };
      await write(
        "svc_vm_filesystem_used_bytes",
        vm1,
        pts(() => 95e9),
        fsLabels,
      );
      await write(
        "svc_vm_filesystem_size_bytes",
        vm1,
        pts(() => 100e9),
        fsLabels,
      );
      const fs = await save(
        spec({ metricId: "filesystem_used_pct", threshold: 90, sustainedSeconds: 0, displayName: "fs" }),
      );
      const forecast = await save(
        spec({
          metricId: "filesystem_used_pct",
          operator: "GREATER_THAN_OR_EQUAL",
          threshold: 100,
          sustainedSeconds: 0,
          displayName: "fs forecast",
          forecastHorizonSeconds: 14_400,
          forecastLookbackSeconds: 21_600,
        }),
      );
      const ranges: number[] = [];
      let refuseLong = false;
      const metrics: MetricsBackend = {
        ...t.app.metrics,
        select: async (projectId, matchers, startMs, endMs, opts) => {
          ranges.push(endMs - startMs);
          if (refuseLong && endMs - startMs > 3600 * S) throw new Error("range too long for the engine");
          return t.app.metrics.select(projectId, matchers, startMs, endMs, opts);
        },
      };
      const ev = createEvaluator({
        db: t.app.db.db,
        metrics,
        now: t.clock.now,
        log: pino({ level: "silent" }),
        options: resolveAlertOptions(),
      });
      await ev.runCycle(t0);
      assert.equal(ranges.length, 1, "one read for both rules");
      assert.equal((await instance(fs.name))?.state, "FIRING");
      // The forecast (95 %, flat) is plainly inactive: no row is stored for it.
      assert.equal(await instance(forecast.name), undefined);
      ranges.length = 0;
      refuseLong = true;
      await ev.runCycle(t0 + 30 * S);
      assert.equal(ranges.length, 2, "the long read, then the 90 % rule's own");
      assert.ok(ranges[1] <= 30 * 60 * S, `the 90 % rule's own window: ${ranges[1]} ms`);
      const fsAfter = await instance(fs.name);
      assert.deepEqual(
        [fsAfter?.state, fsAfter?.flag],
        ["FIRING", ""],
        "the long read's failure is not the 90 % rule's",
      );
      // The forecast's read failed: its rule records the error (no instance was ever stored for it).
      const errors = await t.app.db.db
        .selectFrom("alert_rules")
        .select(["id", "last_eval_error"])
        .where("project_id", "=", projectId)
        .where("delete_time", "is", null)
        .execute();
      const errorOf = (name: string) => errors.find((r) => name.endsWith(r.id))?.last_eval_error;
      assert.deepEqual([errorOf(fs.name), errorOf(forecast.name)], ["", "range too long for the engine"]);
      await cleanup(fs.name);
      await cleanup(forecast.name);
    });

    it("a cosmetic edit keeps the firing instance; a condition edit, a pause and a delete retire it with no recovery", async () => {
      const t0 = t.clock.ms + 3600 * S;
      t.clock.ms = t0;
      const id = randomUUID();
      await save(spec({ sustainedSeconds: 0 }), id);
      const name = `projects/${projectId}/alertRules/${id}`;
      await cpu(vm1, t0 - 60 * S, t0 + 600 * S, () => 97);
      await cycles(t0, t0);
      const first = (await instance(name))?.incident ?? "";
      assert.ok(first);
      // Cosmetic: name, severity, repeat interval.
      await save(
        spec({
          sustainedSeconds: 0,
          displayName: "CPU very high",
          severity: "CRITICAL",
          repeatIntervalSeconds: 600,
        }),
        id,
        "1",
      );
      await cycles(t0 + 30 * S, t0 + 30 * S);
      assert.equal((await instance(name))?.incident, first);
      assert.equal((await owner().incidents.getIncident({ name: first })).state, "OPEN");
      // Condition: the threshold.
      await save(spec({ sustainedSeconds: 0, threshold: 95 }), id, "2");
      await t.app.evaluator.applyPending(t0 + 40 * S);
      const retired = await owner().incidents.getIncident({ name: first });
      assert.equal(retired.state, "RETIRED");
      assert.match(retired.retireReason, /condition edited/);
      assert.deepEqual(await events(first), ["OPENED", "RETIRED"]);
      // The new condition fires as a new episode.
      await cycles(t0 + 60 * S, t0 + 60 * S);
      const second = (await instance(name))?.incident ?? "";
      assert.ok(second && second !== first);
      // Pause.
      await save(spec({ sustainedSeconds: 0, threshold: 95, enabled: false }), id, "3");
      await t.app.evaluator.applyPending(t0 + 70 * S);
      const paused = await owner().incidents.getIncident({ name: second });
      assert.deepEqual([paused.state, /paused/.test(paused.retireReason)], ["RETIRED", true]);
      assert.equal((await instance(name))?.state, "RETIRED");
      await cycles(t0 + 90 * S, t0 + 120 * S);
      assert.equal((await instance(name))?.state, "RETIRED", "a paused rule is not evaluated");
      // Resume, fire, delete.
      await save(spec({ sustainedSeconds: 0, threshold: 95 }), id, "4");
      await cycles(t0 + 150 * S, t0 + 150 * S);
      const third = (await instance(name))?.incident ?? "";
      const del = await owner().alerts.deleteAlertRule({ name, expectedVersion: "5" });
      assert.deepEqual([del.retiredInstances, del.retiredIncidents], [1, 1]);
      const gone = await owner().incidents.getIncident({ name: third });
      assert.deepEqual([gone.state, gone.retireReason], ["RETIRED", "rule deleted"]);
      assert.ok(!(await events(third)).includes("RESOLVED"));
      await rejects(owner().alerts.getAlertRule({ name }), Code.NotFound, "NOT_FOUND");
    });

    it("a restart keeps a firing instance firing with the same incident and no second OPENED event", async () => {
      const t0 = t.clock.ms + 3600 * S;
      t.clock.ms = t0;
      const r = await save(spec({ sustainedSeconds: 0 }));
      await cpu(vm1, t0 - 60 * S, t0 + 300 * S, () => 99);
      await cycles(t0, t0 + 30 * S);
      const before = await instance(r.name);
      await t.restart();
      await cycles(t0 + 60 * S, t0 + 120 * S);
      const after = await instance(r.name);
      assert.deepEqual([after?.state, after?.incident], ["FIRING", before?.incident]);
      assert.deepEqual(await events(after?.incident ?? ""), ["OPENED"]);
      await cleanup(r.name);
    });

    it("a user stop and a maintenance window raise no unexpected-stop alert; an unexpected stop does, and a restart resolves it", async () => {
      const t0 = t.clock.ms + 3600 * S;
      t.clock.ms = t0;
      const r = await save(
        spec({
          metricId: "vm_unexpected_stop",
          threshold: 0,
          sustainedSeconds: 0,
          allVms: true,
          vmNames: [],
        }),
      );
      const sec = (ms: number) => BigInt(ms / 1000);
      await t.admin.vms.recordVMStateEvent({
        vm: vm1,
        state: "STOPPED",
        stopReason: "USER",
        timeUnix: sec(t0 + 10 * S),
      });
      await t.admin.vms.createMaintenanceWindow({
        parent: p.projectName,
        vms: [vm2],
        startTimeUnix: sec(t0),
        endTimeUnix: sec(t0 + 600 * S),
        reason: "host patch",
      });
      await t.admin.vms.recordVMStateEvent({
        vm: vm2,
        state: "STOPPED",
        stopReason: "UNEXPECTED",
        timeUnix: sec(t0 + 10 * S),
      });
      await cycles(t0 + 30 * S, t0 + 60 * S);
      assert.equal((await instance(r.name, vm1))?.state ?? "INACTIVE", "INACTIVE");
      assert.equal((await instance(r.name, vm2))?.state ?? "INACTIVE", "INACTIVE");
      await t.admin.vms.recordVMStateEvent({
        vm: vm1,
        state: "RUNNING",
        stopReason: "",
        timeUnix: sec(t0 + 70 * S),
      });
      await t.admin.vms.recordVMStateEvent({
        vm: vm1,
        state: "STOPPED",
        stopReason: "UNEXPECTED",
        timeUnix: sec(t0 + 80 * S),
      });
      await cycles(t0 + 90 * S, t0 + 90 * S);
      assert.equal((await instance(r.name, vm1))?.state, "FIRING");
      await t.admin.vms.recordVMStateEvent({
        vm: vm1,
        state: "RUNNING",
        stopReason: "",
        timeUnix: sec(t0 + 100 * S),
      });
      await t.admin.vms.recordVMStateEvent({
        vm: vm2,
        state: "RUNNING",
        stopReason: "",
        timeUnix: sec(t0 + 100 * S),
      });
      await cycles(t0 + 120 * S, t0 + 120 * S);
      assert.equal((await instance(r.name, vm1))?.state, "RESOLVED");
      await cleanup(r.name);
    });

    it("filesystem rules have one instance per supported mountpoint, and a missing reading is no data, not 0 % full", async () => {
      const t0 = t.clock.ms + 3600 * S;
      t.clock.ms = t0;
      const r = await save(spec({ metricId: "filesystem_used_pct", threshold: 80, sustainedSeconds: 0 }));
      const fs = (mountpoint: string, fstype: string) => ({
        mountpoint,
        fstype,
        device: `/dev/${mountpoint.length}`,
        source: "guest_agent",
      });
      const pts = (v: number): [number, number][] => [
        [t0 - 30 * S, v],
        [t0, v],
      ];
      await write("svc_vm_filesystem_size_bytes", vm1, pts(100), fs("/", "ext4"));
      await write("svc_vm_filesystem_used_bytes", vm1, pts(90), fs("/", "ext4"));
      await write("svc_vm_filesystem_size_bytes", vm1, pts(100), fs("/data", "xfs"));
      await write("svc_vm_filesystem_used_bytes", vm1, pts(10), fs("/data", "xfs"));
      await write("svc_vm_filesystem_size_bytes", vm1, pts(100), fs("/run", "tmpfs"));
      await write("svc_vm_filesystem_used_bytes", vm1, pts(99), fs("/run", "tmpfs"));
      await cycles(t0, t0);
      const g = await owner().alerts.getAlertRule({ name: r.name, includeInstances: true });
      assert.deepEqual(
        g.instances.map((i) => [i.mountpoint, i.state]),
        [["/", "FIRING"]],
        "only the breaching supported mountpoint is stored; tmpfs is not watched",
      );
      await cycles(t0 + 120 * S, t0 + 120 * S);
      const later = await owner().alerts.getAlertRule({ name: r.name, includeInstances: true });
      assert.deepEqual(
        later.instances.map((i) => [i.mountpoint, i.state, i.flag]),
        [
          ["/", "FIRING", "NO_DATA"],
          ["/data", "INACTIVE", "NO_DATA"],
        ],
      );
      await cleanup(r.name);
    });

    it("filesystem usage is df's: a disk full to ordinary users (5 % reserved for root) is 100 %, an older agent's reading used ÷ size", async () => {
      const t0 = t.clock.ms + 3600 * S;
      t.clock.ms = t0;
      const r = await save(spec({ metricId: "filesystem_used_pct", threshold: 96, sustainedSeconds: 0 }));
      const fs = (mountpoint: string) => ({
        mountpoint,
        fstype: "ext4",
        device: `/dev/${mountpoint.length}`,
        source: "guest_agent",
      });
      const pts = (v: number): [number, number][] => [
        [t0 - 30 * S, v],
        [t0, v],
      ];
      for (const [mountpoint, size, used, avail] of [
        ["/", 100, 95, 0], // df: 100 %; used ÷ size said 95 %
        ["/data", 100, 20, 75], // df: 21 %
        ["/old", 100, 97, undefined], // an agent that sends no available bytes: 97 %
        ["/old-low", 100, 95, undefined], // 95 %
      ] as const) {
        await write("svc_vm_filesystem_size_bytes", vm1, pts(size), fs(mountpoint));
        await write("svc_vm_filesystem_used_bytes", vm1, pts(used), fs(mountpoint));
        if (avail !== undefined)
          await write("svc_vm_filesystem_avail_bytes", vm1, pts(avail), fs(mountpoint));
      }
      await cycles(t0, t0);
      const g = await owner().alerts.getAlertRule({ name: r.name, includeInstances: true });
      assert.deepEqual(g.instances.map((i) => [i.mountpoint, i.state]).sort(), [
        ["/", "FIRING"],
        ["/old", "FIRING"],
      ]);
      await cleanup(r.name);
    });

    it("the preview gives the same firing intervals as the evaluator run cycle by cycle over the same history", async () => {
      const t0 = t.clock.ms + 7200 * S;
      // Two episodes on vm-1 (one with a gap inside), one on vm-2, a flapping stretch.
      const value = (vm: string) => (ts: number) => {
        const m = (ts - t0) / 60_000;
        if (vm === vm1)
          return (m >= 5 && m < 12) || (m >= 20 && m < 31)
            ? 96
            : m >= 40 && m < 44 && Math.floor(m * 2) % 2 === 0
              ? 97
              : 30;
        return m >= 15 && m < 25 ? 99 : 20;
      };
      // Written as it would arrive (the store refuses samples far ahead of its clock), with a gap of
      // 4 minutes in vm-2's data inside its episode.
      for (let from = t0 - 600 * S; from < t0 + 3600 * S; from += 600 * S) {
        t.clock.ms = from + 600 * S;
        await cpu(vm1, from, from + 600 * S, value(vm1));
        await cpu(vm2, from, from + 600 * S, (ts) =>
          ts >= t0 + 1200 * S && ts < t0 + 1440 * S ? Number.NaN : value(vm2)(ts),
        );
      }
      const s = spec({ allVms: true, vmNames: [], sustainedSeconds: 180 });
      const r = await save(s);
      await t.app.evaluator.applyPending(t0 - 30 * S);
      const end = t0 + 3600 * S;
      await cycles(t0, end);
      const incidents = (
        await owner().incidents.listIncidents({ projectName: p.projectName, rule: r.name, pageSize: 50 })
      ).incidents;
      const fromEvaluator = incidents
        .map((i) => `${i.vmName} ${i.openTimeUnix}-${i.state === "OPEN" ? 0n : i.closeTimeUnix}`)
        .sort();
      assert.ok(fromEvaluator.length >= 3, fromEvaluator.join(", "));
      t.clock.ms = end;
      const pv = await owner().alerts.previewAlertRule({
        projectName: p.projectName,
        spec: s,
        historySeconds: 3600,
      });
      assert.equal(pv.queryStatus, "OK");
      assert.equal(pv.startTimeUnix, BigInt(t0 / 1000));
      const fromPreview = pv.instances
        .flatMap((i) => i.firingIntervals.map((f) => `${i.vmName} ${f.startTimeUnix}-${f.endTimeUnix}`))
        .sort();
      assert.deepEqual(fromPreview, fromEvaluator);
      assert.equal(pv.firingInstances, 2);
      assert.ok(pv.evaluatedSamples > 0n && pv.evaluatedSamples <= pv.expectedSamples);
      await cleanup(r.name);
    });

    it("retrying the exact save returns the original rule without a second revision; the same requestId with another body is refused", async () => {
      const id = randomUUID();
      const requestId = randomUUID();
      const req = { projectName: p.projectName, id, requestId, expectedVersion: "0", spec: spec() };
      const a = await owner().alerts.saveAlertRule(req);
      const b = await owner().alerts.saveAlertRule(req);
      assert.deepEqual([a.version, b.version, b.replayed, a.replayed], ["1", "1", true, false]);
      const revisions = await t.app.db.db
        .selectFrom("alert_rule_revisions")
        .select("version")
        .where("rule_id", "=", id)
        .execute();
      assert.equal(revisions.length, 1);
      await rejects(
        owner().alerts.saveAlertRule({ ...req, spec: spec({ threshold: 50 }) }),
        Code.InvalidArgument,
        "REQUEST_ID_REUSED",
      );
      await cleanup(a.name);
    });

    it("a save with a stale expectedVersion is refused naming the current version", async () => {
      const id = randomUUID();
      await save(spec(), id);
      await save(spec({ threshold: 80 }), id, "1");
      const e = await rejects(
        save(spec({ threshold: 70 }), id, "1"),
        Code.Aborted,
        "VERSION_CONFLICT",
        /current version is 2/,
      );
      assert.ok(e);
      await rejects(save(spec(), id, "0"), Code.Aborted, "VERSION_CONFLICT");
      await cleanup(`projects/${projectId}/alertRules/${id}`);
    });

    it("every field is validated with its name", async () => {
      const cases: [Partial<SpecInit>, RegExp][] = [
        [{ displayName: "" }, /spec\.displayName/],
        [{ metricId: "cpu" }, /spec\.metricId/],
        [{ operator: "ABOVE" }, /spec\.operator/],
        [{ threshold: Number.NaN }, /spec\.threshold/],
        [{ sustainedSeconds: -1 }, /spec\.sustainedSeconds/],
        [{ severity: "LOUD" }, /spec\.severity/],
        [{ allVms: true }, /spec\.vmNames/],
        [{ vmNames: ["projects/other/locations/dc-1/vms/x"] }, /spec\.vmNames\[0\]/],
        [{ vmNames: [`projects/${projectId}/locations/dc-1/vms/nope`] }, /spec\.vmNames\[0\]/],
        [{ repeatIntervalSeconds: 5 }, /spec\.repeatIntervalSeconds/],
        [{ destinationNames: ["slack"] }, /spec\.destinationNames\[0\]/],
      ];
      for (const [over, field] of cases) {
        await rejects(save(spec(over)), Code.InvalidArgument, "INVALID_FIELD", field);
      }
      const id = randomUUID();
      await rejects(
        owner().alerts.saveAlertRule({
          projectName: p.projectName,
          id,
          requestId: id,
          expectedVersion: "0",
          spec: spec(),
        }),
        Code.InvalidArgument,
        "INVALID_FIELD",
        /requestId/,
      );
      await rejects(
        owner().alerts.saveAlertRule({
          projectName: p.projectName,
          id: "rule-1",
          requestId: randomUUID(),
          expectedVersion: "0",
          spec: spec(),
        }),
        Code.InvalidArgument,
        "INVALID_FIELD",
        /^id:/,
      );
    });

    it("the rule and instance limits refuse a save naming the limit and the count", async () => {
      // maxInstancesPerProject is 12 here: six allVms rules on 2 VMs fit; one more rule does not.
      const names: string[] = [];
      for (let i = 0; i < 6; i++) names.push((await save(spec({ allVms: true, vmNames: [] }))).name);
      await rejects(save(spec()), Code.FailedPrecondition, "RULE_LIMIT_EXCEEDED", /limit is 6/);
      await owner().alerts.deleteAlertRule({ name: names.pop() ?? "" });
      // Five allVms rules (10 instances) + a rule on both VMs would be 12: fits; a third VM would not.
      await t.admin.vms.createVM({
        parent: p.projectName,
        vmId: "vm-3",
        location: "dc-1",
        distribution: "debian-12",
        vcpus: 1,
        memoryBytes: 1n << 30n,
      });
      const e = await rejects(
        save(spec({ allVms: true, vmNames: [] })),
        Code.FailedPrecondition,
        "INSTANCE_LIMIT_EXCEEDED",
        /limit is 12/,
      );
      assert.match(e.rawMessage, /18 instances/);
      for (const n of names) await cleanup(n);
      await t.admin.vms.deleteVM({ name: `projects/${projectId}/locations/dc-1/vms/vm-3` });
    });

    it("a read key can preview, get and list but not save; a write key can save; keys cannot acknowledge", async () => {
      const key = async (capabilities: string[]) =>
        (
          await owner().keys.createKey({
            parent: p.projectName,
            displayName: "k",
            capabilities,
            requestId: randomUUID(),
          })
        ).secret;
      const read = t.clients(await key(["monitoring.read"]));
      const write = t.clients(await key(["monitoring.read", "monitoring.write"]));
      await rejects(
        read.alerts.saveAlertRule({
          id: randomUUID(),
          requestId: randomUUID(),
          expectedVersion: "0",
          spec: spec(),
        }),
        Code.PermissionDenied,
        "CAPABILITY",
      );
      // projectName may be left out: the key is bound to one project.
      const saved = await write.alerts.saveAlertRule({
        id: randomUUID(),
        requestId: randomUUID(),
        expectedVersion: "0",
        spec: spec(),
      });
      assert.equal(saved.version, "1");
      await rejects(
        write.alerts.saveAlertRule({
          projectName: "projects/other",
          id: randomUUID(),
          requestId: randomUUID(),
          expectedVersion: "0",
          spec: spec(),
        }),
        Code.PermissionDenied,
        "PROJECT_BOUNDARY",
      );
      assert.equal((await read.alerts.getAlertRule({ name: saved.name })).name, saved.name);
      assert.ok(
        (await read.alerts.listAlertRules({ projectName: p.projectName })).rules.some(
          (x) => x.name === saved.name,
        ),
      );
      const pv = await read.alerts.previewAlertRule({
        projectName: p.projectName,
        spec: spec(),
        historySeconds: 600,
      });
      assert.equal(pv.queryStatus, "OK");
      assert.equal((await read.alerts.listAlertRuleTemplates({})).templates.length, 6);
      await rejects(
        write.incidents.acknowledgeIncident({ name: `projects/${projectId}/incidents/x` }),
        Code.PermissionDenied,
        "HUMAN_ONLY",
      );
      await rejects(read.alerts.deleteAlertRule({ name: saved.name }), Code.PermissionDenied, "CAPABILITY");
      await write.alerts.deleteAlertRule({ name: saved.name });
    });

    it("every template is a valid spec that saves as is", async () => {
      const { templates } = await owner().alerts.listAlertRuleTemplates({});
      assert.deepEqual(
        templates.map((x) => x.id),
        ["cpu", "memory", "filesystem", "filesystem-forecast", "unexpected-stop", "telemetry"],
      );
      for (const tpl of templates) {
        const r = await save(tpl.spec as AlertRuleSpec);
        assert.equal(r.spec?.metricId, tpl.spec?.metricId);
        await cleanup(r.name);
      }
    });
  });
}
