import type { Logger } from "pino";
import type { Db } from "../db/database.ts";
import type { AlertInstanceTable } from "../db/schema.ts";
import type { MetricsBackend } from "../metrics/backend.ts";
import { type RuleMetric, ruleMetrics } from "./catalog.ts";
import {
  type Evaluation,
  evaluateTelemetryAge,
  evaluateUnexpectedStop,
  type VmTimeline,
} from "./condition.ts";
import { evaluateMetric, forecastLookbackMs } from "./forecast.ts";
import type { AlertMetrics } from "./instrumentation.ts";
import type { AlertOptions } from "./options.ts";
import { type InstanceData, instanceKey, readRuleData, readTimelines } from "./read.ts";
import { type LiveVm, liveVms, loadRevision } from "./rules.ts";
import { conditionKey, type RuleSpec } from "./spec.ts";
import { changed, type InstanceStatus, inactive, step } from "./state.ts";
import {
  EVALUATOR_ACTOR,
  insertEvent,
  openIncident,
  resolveIncident,
  retireInstances,
} from "./transitions.ts";

/** What one cycle did (for logs, metrics and the benchmark). */
export interface CycleReport {
  readonly atMs: number;
  readonly rules: number;
  readonly instances: number;
  readonly evaluations: number;
  readonly transitions: number;
  /** Wall time of the whole cycle and of its store reads, ms. */
  readonly durationMs: number;
  readonly readMs: number;
  /** Rules whose read failed (their instances evaluated to `error`). */
  readonly errors: number;
}

export interface Evaluator {
  /** Applies pending revisions, then evaluates every applied, enabled rule once at atMs (default now). */
  runCycle(atMs?: number): Promise<CycleReport>;
  /** Applies every pending revision (sync PENDING → APPLIED or FAILED); returns how many. */
  applyPending(atMs?: number): Promise<number>;
  /** What the timer runs: a cycle when this process is the leader (always, without `leader`). */
  tick(): Promise<CycleReport | undefined>;
  /** Starts the cycle timer (every evaluationIntervalMs). */
  start(): void;
  /** Asks for pending revisions to be applied soon, without waiting for the next cycle. */
  nudge(): void;
  /** Stops the timer and waits for a running cycle. */
  stop(): Promise<void>;
}

export interface EvaluatorDeps {
  readonly db: Db;
  readonly metrics: MetricsBackend;
  readonly now: () => number;
  readonly log: Logger;
  readonly options: AlertOptions;
  /** Hourly housekeeping (history purge); errors are logged. */
  readonly purge?: (nowMs: number) => Promise<void>;
  /**
   * With several replicas, one evaluates: this takes or renews the leadership (cluster/lease.ts) and
   * says whether this process has it. Absent = always (one process).
   */
  readonly leader?: () => Promise<boolean>;
  readonly instruments?: AlertMetrics;
}

export function createEvaluator(deps: EvaluatorDeps): Evaluator {
  return new EvaluatorImpl(deps);
}

interface AppliedRule {
  readonly id: string;
  readonly projectId: string;
  readonly version: number;
  readonly spec: RuleSpec;
}

function statusOf(r: AlertInstanceTable): InstanceStatus {
  return {
    state: r.state,
    stateSince: r.state_since,
    pendingSince: r.pending_since,
    firedAt: r.fired_at,
    resolvedAt: r.resolved_at,
    flag: r.flag as InstanceStatus["flag"],
    flagSince: r.flag_since,
    flagMessage: r.flag_message,
    lastValue: r.last_value,
  };
}

class EvaluatorImpl implements Evaluator {
  readonly #deps: EvaluatorDeps;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> = Promise.resolve();
  #nudged = false;
  #lastPurge = 0;
  /** Instances flagged during the running cycle. */
  #flags = { noData: 0, error: 0 };

  constructor(deps: EvaluatorDeps) {
    this.#deps = deps;
  }

  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => {
      void this.tick().catch((err: unknown) =>
        this.#deps.log.error({ err }, "alert evaluation cycle failed"),
      );
    }, this.#deps.options.evaluationIntervalMs);
    this.#timer.unref();
  }

  async tick(): Promise<CycleReport | undefined> {
    const m = this.#deps.instruments;
    if (this.#deps.leader) {
      let lead = false;
      try {
        lead = await this.#deps.leader();
      } finally {
        if (m) m.state.holdsLease = lead;
      }
      if (!lead) return undefined;
    } else if (m) m.state.holdsLease = true;
    return this.runCycle();
  }

  nudge(): void {
    if (this.#nudged) return;
    this.#nudged = true;
    setImmediate(() => {
      this.#nudged = false;
      // Only the leader applies revisions; another replica's save waits for the leader's next cycle.
      const leader = this.#deps.leader ? this.#deps.leader() : Promise.resolve(true);
      void leader
        .then((lead) => (lead ? this.applyPending() : 0))
        .catch((err: unknown) => this.#deps.log.error({ err }, "applying alert rule revisions failed"));
    });
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#running.catch(() => {});
  }

  /** One cycle or apply at a time: they write the same rows. */
  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#running.catch(() => {}).then(fn);
    this.#running = run;
    return run;
  }

  applyPending(atMs = this.#deps.now()): Promise<number> {
    return this.#serial(() => this.#apply(atMs));
  }

  runCycle(atMs = this.#deps.now()): Promise<CycleReport> {
    return this.#serial(() => this.#measuredCycle(atMs));
  }

  async #measuredCycle(atMs: number): Promise<CycleReport> {
    const m = this.#deps.instruments;
    if (!m) return this.#cycle(atMs);
    m.state.now = this.#deps.now;
    m.state.lastCycleStartMs = this.#deps.now();
    try {
      const r = await this.#cycle(atMs);
      m.cycles.inc({ outcome: "ok" });
      m.cycleDuration.observe(r.durationMs / 1000);
      m.rules.inc(r.rules);
      m.instances.inc(r.instances);
      if (r.errors) m.readFailures.inc(r.errors);
      return r;
    } catch (err) {
      m.cycles.inc({ outcome: "failed" });
      throw err;
    }
  }

  async #apply(atMs: number): Promise<number> {
    const { db } = this.#deps;
    const pending = await db
      .selectFrom("alert_rules")
      .selectAll()
      .where("delete_time", "is", null)
      .whereRef("latest_version", "!=", "applied_version")
      .execute();
    let applied = 0;
    for (const r of pending) {
      const spec = await loadRevision(db, r.id, r.latest_version);
      const live = new Set((await liveVms(db, r.project_id)).map((v) => v.name));
      const missing = spec.vmNames.find((n) => !live.has(n));
      if (missing) {
        await db
          .updateTable("alert_rules")
          .set({
            sync_status: "FAILED",
            sync_reason: `spec.vmNames: ${missing} no longer exists`,
            update_time: atMs,
          })
          .where("id", "=", r.id)
          .where("latest_version", "=", r.latest_version)
          .execute();
        continue;
      }
      const prev = r.applied_version > 0 ? await loadRevision(db, r.id, r.applied_version) : undefined;
      await db.transaction().execute(async (tx) => {
        if (prev && conditionKey(prev) !== conditionKey(spec)) {
          const reason = !spec.enabled
            ? `rule paused (version ${r.latest_version})`
            : `rule condition edited (version ${r.latest_version})`;
          await retireInstances(tx, r.project_id, r.id, reason, atMs, EVALUATOR_ACTOR);
        }
        const repeatMs = spec.repeatIntervalSeconds * 1000;
        if (prev && prev.repeatIntervalSeconds !== spec.repeatIntervalSeconds) {
          await tx
            .updateTable("incidents")
            .set({
              repeat_interval_ms: repeatMs,
              next_notify_time: repeatMs > 0 ? atMs + repeatMs : null,
              update_time: atMs,
            })
            .where("rule_id", "=", r.id)
            .where("state", "=", "OPEN")
            .execute();
        }
        await tx
          .updateTable("alert_rules")
          .set({
            applied_version: r.latest_version,
            sync_status: "APPLIED",
            sync_reason: "",
            update_time: atMs,
          })
          .where("id", "=", r.id)
          .where("latest_version", "=", r.latest_version)
          .execute();
      });
      applied++;
    }
    return applied;
  }

  async #cycle(atMs: number): Promise<CycleReport> {
    const started = performance.now();
    await this.#apply(atMs);
    const { db } = this.#deps;
    const rows = await db
      .selectFrom("alert_rules as r")
      .innerJoin("alert_rule_revisions as v", (j) =>
        j.onRef("v.rule_id", "=", "r.id").onRef("v.version", "=", "r.applied_version"),
      )
      .select(["r.id", "r.project_id", "r.applied_version", "v.spec"])
      .where("r.delete_time", "is", null)
      .where("r.applied_version", ">", 0)
      .orderBy("r.project_id")
      .orderBy("r.create_time")
      .orderBy("r.id")
      .execute();
    const byProject = new Map<string, AppliedRule[]>();
    for (const r of rows) {
      const spec = JSON.parse(r.spec) as RuleSpec;
      if (!spec.enabled) continue;
      let list = byProject.get(r.project_id);
      if (!list) {
        list = [];
        byProject.set(r.project_id, list);
      }
      list.push({ id: r.id, projectId: r.project_id, version: r.applied_version, spec });
    }
    const totals = { rules: 0, instances: 0, evaluations: 0, transitions: 0, readMs: 0, errors: 0 };
    this.#flags = { noData: 0, error: 0 };
    for (const [projectId, rules] of byProject) {
      const vms = await liveVms(db, projectId);
      let timelines: Map<string, VmTimeline> | undefined;
      let budget = this.#deps.options.maxInstancesPerProject;
      for (const rule of rules) {
        const metric = ruleMetrics.get(rule.spec.metricId);
        if (!metric) continue;
        if ((metric.kind === "unexpected_stop" || metric.kind === "telemetry_age") && !timelines)
          timelines = await readTimelines(db, projectId, vms, atMs);
        const r = await this.#evaluateRule(rule, metric, vms, timelines, atMs, budget);
        budget -= r.instances;
        totals.rules++;
        totals.instances += r.instances;
        totals.evaluations += r.instances;
        totals.transitions += r.transitions;
        totals.readMs += r.readMs;
        if (r.readFailed) totals.errors++;
      }
    }
    const m = this.#deps.instruments;
    if (m) {
      m.flagged.set({ flag: "no_data" }, this.#flags.noData);
      m.flagged.set({ flag: "error" }, this.#flags.error);
    }
    await this.#repeatDue(atMs);
    await this.#housekeeping(atMs);
    return { atMs, ...totals, durationMs: performance.now() - started };
  }

  async #evaluateRule(
    rule: AppliedRule,
    metric: RuleMetric,
    vms: readonly LiveVm[],
    timelines: Map<string, VmTimeline> | undefined,
    atMs: number,
    budget: number,
  ): Promise<{ instances: number; transitions: number; readMs: number; readFailed: boolean }> {
    const { db, metrics, options } = this.#deps;
    const { spec } = rule;
    const live = new Map(vms.map((v) => [v.name, v]));
    const targets = spec.allVms ? vms.map((v) => v.name) : spec.vmNames.filter((n) => live.has(n));
    const stored = await db
      .selectFrom("alert_instances")
      .selectAll()
      .where("rule_id", "=", rule.id)
      .execute();
    const storedByKey = new Map(stored.map((r) => [r.instance_key, r]));
    // The one store read of this rule for all its VMs.
    const t0 = performance.now();
    let data = new Map<string, InstanceData>();
    let readError: string | undefined;
    const sustainedMs = spec.sustainedSeconds * 1000;
    try {
      const lookbackMs =
        metric.kind === "telemetry_age"
          ? sustainedMs + spec.threshold * 1000 + options.maxGapMs
          : sustainedMs + options.maxGapMs + options.samplingIntervalMs + forecastLookbackMs(spec);
      data = await readRuleData(
        metrics,
        rule.projectId,
        metric,
        spec.allVms ? undefined : targets,
        atMs - lookbackMs,
        atMs,
      );
    } catch (err) {
      readError = err instanceof Error ? err.message : String(err);
    }
    const readMs = performance.now() - t0;
    // Instances: one per target VM, or per (VM, mountpoint) seen now or before for filesystem rules.
    const targetSet = new Set(targets);
    const instances = new Map<string, { vmName: string; mountpoint: string }>();
    if (metric.perMountpoint) {
      for (const [k, d] of data) if (targetSet.has(d.vmName)) instances.set(k, d);
      for (const r of stored)
        if (r.state !== "RETIRED" && targetSet.has(r.vm_name))
          instances.set(r.instance_key, { vmName: r.vm_name, mountpoint: r.mountpoint });
    } else {
      for (const vm of targets) instances.set(instanceKey(vm, ""), { vmName: vm, mountpoint: "" });
    }
    let evaluated = 0;
    let transitions = 0;
    const writes: {
      key: string;
      vmName: string;
      mountpoint: string;
      prev?: AlertInstanceTable;
      next: InstanceStatus;
      transition?: string;
      value: number | null;
    }[] = [];
    for (const [key, inst] of instances) {
      if (evaluated >= budget) break;
      evaluated++;
      const row = storedByKey.get(key);
      // A retired row belongs to an earlier condition or selection: the instance starts afresh.
      const prev = row && row.state !== "RETIRED" ? statusOf(row) : { ...inactive, stateSince: atMs };
      const ev = this.#evaluate(metric, spec, data.get(key), timelines?.get(inst.vmName), readError, atMs);
      const { next, transition } = step(prev, ev, atMs);
      if (next.flag === "NO_DATA") this.#flags.noData++;
      else if (next.flag === "ERROR") this.#flags.error++;
      const isNew = !row || row.state === "RETIRED";
      const firingValueMoved = next.state === "FIRING" && next.lastValue !== (row?.last_value ?? null);
      if (
        transition ||
        (isNew ? next.state !== "INACTIVE" || next.flag !== "" : changed(prev, next) || firingValueMoved)
      ) {
        writes.push({ key, ...inst, prev: row, next, transition, value: ev.value ?? null });
        if (transition) {
          transitions++;
          this.#deps.instruments?.transitions.inc({ kind: transition.toLowerCase() });
        }
      }
    }
    // Instances whose VM left the rule (deleted, or no longer selected) retire; no recovery is claimed.
    const gone = stored.filter((r) => r.state !== "RETIRED" && !targetSet.has(r.vm_name));
    if (writes.length === 0 && gone.length === 0) {
      await this.#markEvaluated(rule, atMs, readError);
      return { instances: evaluated, transitions, readMs, readFailed: readError !== undefined };
    }
    await db.transaction().execute(async (tx) => {
      for (const w of writes) {
        let incidentId = w.prev && w.prev.state !== "RETIRED" ? w.prev.incident_id : null;
        if (w.transition === "FIRED") {
          incidentId = await openIncident(tx, {
            projectId: rule.projectId,
            ruleId: rule.id,
            ruleVersion: rule.version,
            spec,
            instanceKey: w.key,
            vmName: w.vmName,
            mountpoint: w.mountpoint,
            value: w.value,
            atMs,
          });
        } else if (w.transition === "RESOLVED" && incidentId) {
          await resolveIncident(tx, incidentId, rule.projectId, rule.id, w.value, atMs);
        } else if (w.next.state === "FIRING" && incidentId) {
          // The open incident shows the newest value and whether evaluation currently sees data.
          await tx
            .updateTable("incidents")
            .set({
              last_value: w.next.lastValue,
              no_data: w.next.flag === "NO_DATA" ? 1 : 0,
              evaluation_error: w.next.flag === "ERROR" ? 1 : 0,
              update_time: atMs,
            })
            .where("id", "=", incidentId)
            .where("state", "=", "OPEN")
            .execute();
        }
        const values: AlertInstanceTable = {
          rule_id: rule.id,
          instance_key: w.key,
          project_id: rule.projectId,
          vm_name: w.vmName,
          mountpoint: w.mountpoint,
          revision: rule.version,
          state: w.next.state,
          state_since: w.next.stateSince,
          pending_since: w.next.pendingSince,
          fired_at: w.next.firedAt,
          resolved_at: w.next.resolvedAt,
          retire_reason: "",
          flag: w.next.flag,
          flag_since: w.next.flagSince,
          flag_message: w.next.flagMessage,
          last_eval_time: atMs,
          last_value: w.next.lastValue,
          incident_id: w.next.state === "FIRING" || w.next.state === "RESOLVED" ? incidentId : null,
          update_time: atMs,
        };
        const { rule_id: _r, instance_key: _k, ...update } = values;
        await tx
          .insertInto("alert_instances")
          .values(values)
          .onConflict((oc) => oc.columns(["rule_id", "instance_key"]).doUpdateSet(update))
          .execute();
      }
      const deleted = gone.filter((r) => !live.has(r.vm_name)).map((r) => r.instance_key);
      const deselected = gone.filter((r) => live.has(r.vm_name)).map((r) => r.instance_key);
      await retireInstances(tx, rule.projectId, rule.id, "VM deleted", atMs, EVALUATOR_ACTOR, deleted);
      await retireInstances(
        tx,
        rule.projectId,
        rule.id,
        "VM no longer selected by the rule",
        atMs,
        EVALUATOR_ACTOR,
        deselected,
      );
    });
    await this.#markEvaluated(rule, atMs, readError);
    return { instances: evaluated, transitions, readMs, readFailed: readError !== undefined };
  }

  #evaluate(
    metric: RuleMetric,
    spec: RuleSpec,
    data: InstanceData | undefined,
    timeline: VmTimeline | undefined,
    readError: string | undefined,
    atMs: number,
  ): Evaluation {
    if (metric.kind === "unexpected_stop") {
      if (!timeline)
        return { result: "error", holds: false, message: "the VM's inventory could not be read" };
      return evaluateUnexpectedStop(timeline, atMs, spec);
    }
    if (readError !== undefined) return { result: "error", holds: false, message: readError };
    if (metric.kind === "telemetry_age") {
      if (!timeline)
        return { result: "error", holds: false, message: "the VM's inventory could not be read" };
      return evaluateTelemetryAge(timeline, data?.series.t ?? [], atMs, spec);
    }
    if (!data) {
      return {
        result: "no_data",
        holds: false,
        message: `no sample in the ${this.#deps.options.maxGapMs / 1000} s before the evaluation`,
      };
    }
    return evaluateMetric(data.series, atMs, spec, this.#deps.options.maxGapMs);
  }

  async #markEvaluated(rule: AppliedRule, atMs: number, readError: string | undefined): Promise<void> {
    await this.#deps.db
      .updateTable("alert_rules")
      .set({ last_eval_time: atMs, last_eval_error: readError ?? "" })
      .where("id", "=", rule.id)
      .execute();
  }

  /** Still-firing incidents whose repeat interval has passed get a REPEAT_DUE event (unless snoozed). */
  async #repeatDue(atMs: number): Promise<void> {
    const { db } = this.#deps;
    const due = await db
      .selectFrom("incidents")
      .select(["id", "project_id", "rule_id", "repeat_interval_ms", "snooze_until"])
      .where("state", "=", "OPEN")
      .where("next_notify_time", "<=", atMs)
      .execute();
    for (const d of due) {
      await db.transaction().execute(async (tx) => {
        await tx
          .updateTable("incidents")
          .set({ next_notify_time: atMs + d.repeat_interval_ms, update_time: atMs })
          .where("id", "=", d.id)
          .execute();
        // A snoozed incident is not due: its repeat is skipped, not sent after the snooze.
        if (d.snooze_until !== null && d.snooze_until > atMs) return;
        await insertEvent(tx, {
          project_id: d.project_id,
          incident_id: d.id,
          rule_id: d.rule_id,
          kind: "REPEAT_DUE",
          time: atMs,
          actor: EVALUATOR_ACTOR,
        });
      });
    }
  }

  async #housekeeping(atMs: number): Promise<void> {
    if (atMs - this.#lastPurge < 3_600_000) return;
    this.#lastPurge = atMs;
    const { db, options } = this.#deps;
    try {
      await db
        .deleteFrom("alert_rules")
        .where("delete_time", "<", atMs - options.historyRetentionMs)
        .execute();
      await this.#deps.purge?.(atMs);
    } catch (err) {
      this.#deps.log.warn({ err }, "alert history purge failed");
    }
  }
}
