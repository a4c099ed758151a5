import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.ts";
import { type DbHandle, openDb } from "../db/database.ts";
import type { AlertInstanceTable } from "../db/schema.ts";
import { type AppliedRule, evaluateRule, type RuleOutcome } from "./evaluation.ts";
import { instanceRow, statusOf } from "./instance-row.ts";
import { applyRevisions, markRepeatsDue, writeOutcomes } from "./persistence.ts";
import type { InstanceData } from "./read.ts";
import { conditionKey, type RuleSpec } from "./spec.ts";
import { inactive } from "./state.ts";
import { openIncident } from "./transitions.ts";

const S = 1000;
const G = 90 * S;
const T = 1_800_000_000_000;
const P = "p";
const VM1 = `projects/${P}/locations/dc-1/vms/vm-1`;
const VM2 = `projects/${P}/locations/dc-1/vms/vm-2`;

const baseSpec: RuleSpec = {
  displayName: "CPU high",
  metricId: "cpu_utilization_pct",
  operator: "GREATER_THAN",
  threshold: 90,
  sustainedSeconds: 0,
  severity: "WARNING",
  allVms: true,
  vmNames: [],
  enabled: true,
  repeatIntervalSeconds: 0,
  destinationNames: [],
};

for (const { dialect, skip } of await testDialects()) {
  describe(`the evaluator's writes (persistence.ts, ${dialect.name})`, { skip }, () => {
    let h: DbHandle;
    let drop: () => Promise<void> = async () => {};
    let n = 0;
    let rule: AppliedRule;

    before(async () => {
      const d = await dialect.create();
      drop = d.drop;
      h = await openDb({ databaseUrl: d.databaseUrl, sqlitePath: d.databaseUrl ? undefined : ":memory:" });
      await h.db.insertInto("projects").values({ id: P, display_name: P, create_time: 1 }).execute();
      for (const vm of ["vm-1", "vm-2"])
        await h.db
          .insertInto("vms")
          .values({
            project_id: P,
            vm_id: vm,
            location: "dc-1",
            display_name: vm,
            state: "RUNNING",
            distribution: "debian",
            monitoring_level: "BASELINE",
            vcpus: 2,
            memory_bytes: 4e9,
            create_time: 1,
            delete_time: null,
            guest_sender: null,
            guest_seen_time: null,
          })
          .execute();
    });
    after(async () => {
      await h?.close();
      await drop();
    });

    /** A rule with its revisions saved (version = how many), the last one applied unless said otherwise. */
    async function saveRule(specs: RuleSpec[], applied = specs.length): Promise<AppliedRule> {
      const id = `r${++n}`;
      await h.db
        .insertInto("alert_rules")
        .values({
          id,
          project_id: P,
          latest_version: specs.length,
          applied_version: applied,
          sync_status: applied === specs.length ? "APPLIED" : "PENDING",
          sync_reason: "",
          create_time: 1,
          update_time: 1,
          delete_time: null,
          last_eval_time: null,
          last_eval_error: "",
        })
        .execute();
      for (const [i, spec] of specs.entries())
        await h.db
          .insertInto("alert_rule_revisions")
          .values({
            rule_id: id,
            version: i + 1,
            project_id: P,
            spec: JSON.stringify(spec),
            condition_key: conditionKey(spec),
            actor: "test",
            request_id: `${id}-${i}`,
            create_time: 1,
          })
          .execute();
      return { id, projectId: P, version: applied, spec: specs[applied - 1] ?? specs[0] };
    }
    beforeEach(async () => {
      rule = await saveRule([baseSpec]);
    });

    const stored = (ruleId = rule.id) =>
      h.db
        .selectFrom("alert_instances")
        .selectAll()
        .where("rule_id", "=", ruleId)
        .orderBy("instance_key")
        .execute();
    const incidents = (ruleId = rule.id) =>
      h.db.selectFrom("incidents").selectAll().where("rule_id", "=", ruleId).orderBy("open_time").execute();
    const events = async (ruleId = rule.id) =>
      (
        await h.db
          .selectFrom("incident_events")
          .select(["kind", "time"])
          .where("rule_id", "=", ruleId)
          .orderBy("time")
          .execute()
      ).map((e) => e.kind);
    /** Evaluates the rule at atMs on VM1's value (VM2 below the threshold) over the stored rows. */
    async function evaluate(atMs: number, value: number, readError?: string): Promise<RuleOutcome> {
      const d = (vmName: string, v: number): [string, InstanceData] => [
        vmName,
        { vmName, mountpoint: "", series: { t: [atMs - 30 * S, atMs], v: [v, v] } },
      ];
      const vms = [VM1, VM2].map((name) => ({ name, state: "RUNNING", createTime: 1 }));
      const data = readError ? new Map() : new Map([d(VM1, value), d(VM2, 10)]);
      const input = {
        vms,
        live: new Set([VM1, VM2]),
        timelines: undefined,
        stored: await stored(),
        data,
        readError,
      };
      return evaluateRule(rule, input, atMs, 100, G).outcome;
    }

    it("the instance row holds every column of the migrated table", async () => {
      const table = (await h.db.introspection.getTables()).find((t) => t.name === "alert_instances");
      const id = {
        rule_id: "r",
        instance_key: "k",
        project_id: P,
        vm_name: VM1,
        mountpoint: "",
        revision: 1,
      };
      const row = instanceRow(id, { ...inactive, stateSince: T }, null, T);
      assert.deepEqual(Object.keys(row).sort(), table?.columns.map((c) => c.name).sort());
    });

    it("a firing instance opens its incident with its row; a new value updates both; a recovery resolves them", async () => {
      const fired = await evaluate(T, 95);
      assert.equal(await writeOutcomes(h.db, [fired], T), true);
      const [row] = await stored();
      assert.deepEqual(statusOf(row), fired.writes[0].next, "the row holds the status written");
      const [inc] = await incidents();
      assert.deepEqual(
        [inc.state, inc.firing_value, inc.instance_key, row.incident_id],
        ["OPEN", 95, VM1, inc.id],
      );

      const moved = await evaluate(T + 30 * S, 97);
      assert.deepEqual(
        moved.writes.map((w) => [w.next.state, w.transition]),
        [["FIRING", undefined]],
      );
      await writeOutcomes(h.db, [moved], T + 30 * S);
      const [row2] = await stored();
      assert.deepEqual(
        [row2.state, row2.last_value, row2.last_eval_time, row2.fired_at, row2.incident_id],
        ["FIRING", 97, T + 30 * S, T, inc.id],
      );
      assert.equal((await incidents())[0].last_value, 97);

      const resolved = await evaluate(T + 60 * S, 40);
      await writeOutcomes(h.db, [resolved], T + 60 * S);
      const [row3] = await stored();
      assert.deepEqual([row3.state, row3.resolved_at, row3.incident_id], ["RESOLVED", T + 60 * S, inc.id]);
      const [closed] = await incidents();
      assert.deepEqual([closed.state, closed.close_time, closed.last_value], ["RESOLVED", T + 60 * S, 40]);
      assert.deepEqual(await events(), ["OPENED", "RESOLVED"]);
      const r = await h.db
        .selectFrom("alert_rules")
        .selectAll()
        .where("id", "=", rule.id)
        .executeTakeFirstOrThrow();
      assert.deepEqual([r.last_eval_time, r.last_eval_error], [T + 60 * S, ""]);
    });

    it("a firing instance without data keeps its incident open, flagged; the rule keeps its read error", async () => {
      await writeOutcomes(h.db, [await evaluate(T, 95)], T);
      await writeOutcomes(h.db, [await evaluate(T + 30 * S, 0, "store unavailable")], T + 30 * S);
      const rows = await stored();
      assert.deepEqual(
        rows.map((x) => [x.vm_name, x.state, x.flag, x.flag_message]),
        [
          [VM1, "FIRING", "ERROR", "store unavailable"],
          [VM2, "INACTIVE", "ERROR", "store unavailable"],
        ],
      );
      const [inc] = await incidents();
      assert.deepEqual([inc.state, inc.evaluation_error, inc.no_data], ["OPEN", 1, 0]);
      const r = await h.db
        .selectFrom("alert_rules")
        .selectAll()
        .where("id", "=", rule.id)
        .executeTakeFirstOrThrow();
      assert.equal(r.last_eval_error, "store unavailable");
    });

    it("a batch whose fence refuses writes nothing", async () => {
      const fired = await evaluate(T, 95);
      assert.equal(await writeOutcomes(h.db, [fired], T, async () => false), false);
      assert.deepEqual([await stored(), await incidents()], [[], []]);
      let fenced = false;
      assert.equal(
        await writeOutcomes(h.db, [fired], T, async (tx) => {
          fenced =
            (await tx.selectFrom("alert_rules").select("id").where("id", "=", rule.id).execute()).length ===
            1;
          return true;
        }),
        true,
      );
      assert.ok(fenced, "the fence runs in the batch's transaction");
      assert.equal((await stored()).length, 1);
    });

    it("instances whose VM was deleted or deselected retire with their reason, and their open incidents", async () => {
      await writeOutcomes(h.db, [await evaluate(T, 95)], T);
      const other = await saveRule([baseSpec]);
      const row = (vm: string) =>
        instanceRow(
          { rule_id: other.id, instance_key: vm, project_id: P, vm_name: vm, mountpoint: "", revision: 1 },
          { ...inactive, state: "PENDING", stateSince: T, pendingSince: T },
          null,
          T,
        );
      await h.db
        .insertInto("alert_instances")
        .values([row(VM1), row(VM2)])
        .execute();
      const [inc] = await incidents();
      await writeOutcomes(
        h.db,
        [
          { rule, writes: [], deleted: [VM1], deselected: [] },
          { rule: other, writes: [], deleted: [], deselected: [VM2] },
        ],
        T + 30 * S,
      );
      const retired = (rows: AlertInstanceTable[]) =>
        rows.map((x) => [x.instance_key, x.state, x.retire_reason]);
      assert.deepEqual(retired(await stored()), [[VM1, "RETIRED", "VM deleted"]]);
      assert.deepEqual(retired(await stored(other.id)), [
        [VM1, "PENDING", ""],
        [VM2, "RETIRED", "VM no longer selected by the rule"],
      ]);
      const closed = (await incidents()).find((x) => x.id === inc.id);
      assert.deepEqual([closed?.state, closed?.retire_reason], ["RETIRED", "VM deleted"]);
      assert.deepEqual(await events(), ["OPENED", "RETIRED"]);
    });

    it("a repeat is due once per interval, and skipped (not postponed) while snoozed", async () => {
      const spec = { ...baseSpec, repeatIntervalSeconds: 60 };
      const open = (vmName: string) =>
        h.db.transaction().execute((tx) =>
          openIncident(tx, {
            projectId: P,
            ruleId: rule.id,
            ruleVersion: 1,
            spec,
            instanceKey: vmName,
            vmName,
            mountpoint: "",
            value: 95,
            atMs: T,
          }),
        );
      await open(VM1);
      const snoozed = await open(VM2);
      await h.db
        .updateTable("incidents")
        .set({ snooze_until: T + 600 * S })
        .where("id", "=", snoozed)
        .execute();
      const all = () => true;
      await markRepeatsDue(h.db, T + 30 * S, all);
      assert.deepEqual(await events(), ["OPENED", "OPENED"], "not due yet");
      await markRepeatsDue(h.db, T + 60 * S, all);
      await markRepeatsDue(h.db, T + 60 * S, all);
      assert.deepEqual(
        await events(),
        ["OPENED", "OPENED", "REPEAT_DUE"],
        "one repeat, of the unsnoozed one",
      );
      const next = await h.db
        .selectFrom("incidents")
        .select(["id", "next_notify_time"])
        .where("rule_id", "=", rule.id)
        .execute();
      assert.ok(
        next.every((x) => x.next_notify_time === T + 120 * S),
        "both rescheduled",
      );
      await markRepeatsDue(h.db, T + 120 * S, (p) => p !== P);
      assert.equal((await events()).length, 3, "another shard's incidents are not this replica's");
    });

    it("applies a pending revision once; a revision naming a gone VM fails; an edited condition retires the instances", async () => {
      const edited = await saveRule([baseSpec, { ...baseSpec, threshold: 80 }], 1);
      await h.db
        .insertInto("alert_instances")
        .values(
          instanceRow(
            {
              rule_id: edited.id,
              instance_key: VM1,
              project_id: P,
              vm_name: VM1,
              mountpoint: "",
              revision: 1,
            },
            { ...inactive, state: "PENDING", stateSince: T, pendingSince: T },
            null,
            T,
          ),
        )
        .execute();
      const missing = `projects/${P}/locations/dc-1/vms/gone`;
      const failing = await saveRule([{ ...baseSpec, allVms: false, vmNames: [missing] }], 0);
      const applied = await applyRevisions(h.db, T, (p) => p === P);
      const rules = await h.db
        .selectFrom("alert_rules")
        .selectAll()
        .where("id", "in", [edited.id, failing.id])
        .orderBy("id")
        .execute();
      assert.ok(applied >= 1);
      const byId = new Map(rules.map((r) => [r.id, r]));
      assert.deepEqual(
        [byId.get(edited.id)?.applied_version, byId.get(edited.id)?.sync_status],
        [2, "APPLIED"],
      );
      assert.deepEqual(
        [
          byId.get(failing.id)?.applied_version,
          byId.get(failing.id)?.sync_status,
          byId.get(failing.id)?.sync_reason,
        ],
        [0, "FAILED", `spec.vmNames: ${missing} no longer exists`],
      );
      const [inst] = await stored(edited.id);
      assert.deepEqual([inst.state, inst.retire_reason], ["RETIRED", "rule condition edited (version 2)"]);
      assert.equal(await applyRevisions(h.db, T + 30 * S, (p) => p === P), 0, "applied once");
    });
  });
}
