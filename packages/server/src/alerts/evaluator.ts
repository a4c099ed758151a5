import type { CompiledQuery } from "kysely";
import type { Logger } from "pino";
import { type ShardLeases, shardOf } from "../cluster/shards.ts";
import type { Db } from "../db/database.ts";
import type { MetricsBackend } from "../metrics/backend.ts";
import { loadProjectBatch } from "./batch.ts";
import { ruleMetrics } from "./catalog.ts";
import { type AppliedRule, evaluateRule, type RuleOutcome } from "./evaluation.ts";
import type { AlertMetrics } from "./instrumentation.ts";
import type { AlertOptions } from "./options.ts";
import { applyRevisions, chunks, markRepeatsDue, purgeDeletedRules, writeOutcomes } from "./persistence.ts";
import { type PlannedRead, planReads, replanFailedRiders, ruleShare, runReads } from "./read-plan.ts";
import type { LiveVm } from "./rules.ts";
import { CycleSchedule, periodic } from "./schedule.ts";
import type { RuleSpec } from "./spec.ts";

/**
 * The alert evaluator: a cycle applies pending revisions, then evaluates every applied, enabled rule of
 * the projects it holds, in batches of projects: read (read-plan.ts), evaluate (evaluation.ts, pure),
 * write (persistence.ts), one transaction per batch. When it runs is schedule.ts's part.
 */

/** What one cycle did (for logs, metrics and the benchmark). */
export interface CycleReport {
  readonly atMs: number;
  /** Projects with an enabled rule evaluated in this cycle (of this replica's shards). */
  readonly projects: number;
  readonly rules: number;
  /** Instances evaluated (svc_alerts_instances_evaluated_total). */
  readonly instances: number;
  readonly transitions: number;
  /** Wall time of the whole cycle, of its store reads and of its database statements, ms. */
  readonly durationMs: number;
  readonly readMs: number;
  readonly dbMs: number;
  /** Rules whose read failed (their instances evaluated to `error`). */
  readonly errors: number;
  /** Batches of projects left unwritten because their shard's lease was lost mid-cycle. */
  readonly fencedOut: number;
  /** Batches of projects whose evaluation or write failed (logged; retried next cycle). */
  readonly failedBatches: number;
}

export interface Evaluator {
  /** Applies pending revisions, then evaluates every applied, enabled rule once at atMs (default now). */
  runCycle(atMs?: number): Promise<CycleReport>;
  /** Applies every pending revision (sync PENDING → APPLIED or FAILED); returns how many. */
  applyPending(atMs?: number): Promise<number>;
  /**
   * What the timer runs: a cycle of the projects of the shards this process holds (all of them
   * without `shards`); undefined when it holds none, or while the previous cycle still runs.
   */
  tick(atMs?: number): Promise<CycleReport | undefined>;
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
   * With several replicas: the projects are hashed into shards, each evaluated by the replica that
   * holds its lease (cluster/shards.ts). Absent = every project (one process).
   */
  readonly shards?: ShardLeases;
  readonly instruments?: AlertMetrics;
}

export function createEvaluator(deps: EvaluatorDeps): Evaluator {
  return new EvaluatorImpl(deps);
}

/** Projects whose database rows are read and written together (one transaction per batch). */
const PROJECTS_PER_BATCH = 100;

/** Rows of `eval_revision` (migration 0016_eval_revision). */
const RULES_REVISION = 1;
const VMS_REVISION = 2;

type RuleRow = { id: string; project_id: string; applied_version: number };

/** A cycle's running counts. */
type Totals = { -readonly [K in Exclude<keyof CycleReport, "atMs" | "durationMs">]: number };

class EvaluatorImpl implements Evaluator {
  readonly #deps: EvaluatorDeps;
  readonly #schedule: CycleSchedule<CycleReport>;
  /** Hourly: rules deleted past the history retention, then the caller's purge. */
  readonly #housekeeping: (atMs: number) => Promise<void>;
  /** Instances flagged during the running cycle. */
  #flags = { noData: 0, error: 0 };
  /** Parsed specs of applied revisions, by rule id: a cycle reads only the rules' ids and versions. */
  readonly #specs = new Map<string, { version: number; spec: RuleSpec }>();
  /**
   * What this replica last read of the rows that only change with the database's eval revision
   * (migration 0016_eval_revision; docs/decisions.md, "The evaluator's rule list and VMs kept under the
   * database's eval revision"), each with the revision read just before it: reused while the revision
   * read at the point the read used to happen is the same, so a change committed on any replica before
   * that point is seen as before.
   */
  #ruleList: { revision: number; rows: readonly RuleRow[] } | undefined;
  /** The rules revision under which no rule of any shard had a pending revision. */
  #noPendingAt: number | undefined;
  /** Live VMs by project, read under `#vmRevision`. */
  readonly #vms = new Map<string, readonly LiveVm[]>();
  #vmRevision = Number.NaN;
  readonly #revisionQueries = new Map<number, CompiledQuery>();

  constructor(deps: EvaluatorDeps) {
    this.#deps = deps;
    this.#schedule = new CycleSchedule(
      { ...deps, intervalMs: deps.options.evaluationIntervalMs },
      {
        cycle: (atMs, held) => this.#cycle(atMs, held),
        apply: (atMs, held) => applyRevisions(deps.db, atMs, this.#inShards(held)),
      },
    );
    this.#housekeeping = periodic(
      3_600_000,
      async (atMs) => {
        await purgeDeletedRules(deps.db, atMs - deps.options.historyRetentionMs);
        await deps.purge?.(atMs);
      },
      deps.log,
      "alert history purge",
    );
  }

  start(): void {
    this.#schedule.start();
  }

  tick(atMs?: number): Promise<CycleReport | undefined> {
    return this.#schedule.tick(atMs);
  }

  nudge(): void {
    this.#schedule.nudge();
  }

  stop(): Promise<void> {
    return this.#schedule.stop();
  }

  applyPending(atMs = this.#deps.now()): Promise<number> {
    return this.#schedule.serial(() => applyRevisions(this.#deps.db, atMs, () => true));
  }

  runCycle(atMs = this.#deps.now()): Promise<CycleReport> {
    return this.#schedule.cycle(atMs, undefined);
  }

  #inShards(held: ReadonlySet<number> | undefined): (projectId: string) => boolean {
    const count = this.#deps.shards?.count;
    if (!held || !count) return () => true;
    return (projectId) => held.has(shardOf(projectId, count));
  }

  /** Row `id` of `eval_revision` now (NaN when the row is missing: never equal, so nothing is reused). */
  async #revision(id: number): Promise<number> {
    let q = this.#revisionQueries.get(id);
    if (!q) {
      q = this.#deps.db.selectFrom("eval_revision").select("revision").where("id", "=", id).compile();
      this.#revisionQueries.set(id, q);
    }
    const { rows } = await this.#deps.db.executeQuery<{ revision: number | string }>(q);
    return Number(rows[0]?.revision ?? Number.NaN);
  }

  /**
   * The applied, enabled rules of the projects `inShard` accepts, by project, in evaluation order.
   * `revision`: the rules revision read just before (the list read under it last time is reused).
   */
  async #appliedRules(
    inShard: (projectId: string) => boolean,
    revision: number,
  ): Promise<Map<string, AppliedRule[]>> {
    const { db } = this.#deps;
    let all = this.#ruleList?.revision === revision ? this.#ruleList.rows : undefined;
    if (!all) {
      all = await db
        .selectFrom("alert_rules")
        .select(["id", "project_id", "applied_version"])
        .where("delete_time", "is", null)
        .where("applied_version", ">", 0)
        .orderBy("project_id")
        .orderBy("create_time")
        .orderBy("id")
        .execute();
      this.#ruleList = Number.isNaN(revision) ? undefined : { revision, rows: all };
    }
    const rows = all.filter((r) => inShard(r.project_id));
    const missing = rows.filter((r) => this.#specs.get(r.id)?.version !== r.applied_version);
    for (const part of chunks(missing, 500)) {
      const want = new Map(part.map((r) => [r.id, r.applied_version]));
      const revisions = await db
        .selectFrom("alert_rule_revisions")
        .select(["rule_id", "version", "spec"])
        .where("rule_id", "in", [...want.keys()])
        .execute();
      for (const v of revisions)
        if (want.get(v.rule_id) === v.version)
          this.#specs.set(v.rule_id, { version: v.version, spec: JSON.parse(v.spec) as RuleSpec });
    }
    const byProject = new Map<string, AppliedRule[]>();
    const seen = new Set<string>();
    for (const r of rows) {
      seen.add(r.id);
      const cached = this.#specs.get(r.id);
      if (!cached || cached.version !== r.applied_version || !cached.spec.enabled) continue;
      let list = byProject.get(r.project_id);
      if (!list) {
        list = [];
        byProject.set(r.project_id, list);
      }
      list.push({ id: r.id, projectId: r.project_id, version: r.applied_version, spec: cached.spec });
    }
    // Forget deleted rules and the other shards' (the map is rebuilt from them on a miss).
    for (const id of this.#specs.keys()) if (!seen.has(id)) this.#specs.delete(id);
    return byProject;
  }

  async #cycle(atMs: number, held: ReadonlySet<number> | undefined): Promise<CycleReport> {
    const m = this.#deps.instruments;
    if (m) {
      m.state.now = this.#deps.now;
      m.state.lastCycleStartMs = this.#deps.now();
    }
    this.#flags = { noData: 0, error: 0 };
    try {
      const r = await this.#cycleOf(atMs, held);
      if (m) {
        m.cycles.inc({ outcome: "ok" });
        m.cycleDuration.observe(r.durationMs / 1000);
        m.rules.inc(r.rules);
        m.instances.inc(r.instances);
        if (r.errors) m.readFailures.inc(r.errors);
        m.flagged.set({ flag: "no_data" }, this.#flags.noData);
        m.flagged.set({ flag: "error" }, this.#flags.error);
      }
      return r;
    } catch (err) {
      m?.cycles.inc({ outcome: "failed" });
      throw err;
    }
  }

  async #cycleOf(atMs: number, held: ReadonlySet<number> | undefined): Promise<CycleReport> {
    const { db } = this.#deps;
    const started = performance.now();
    const inShard = this.#inShards(held);
    const totals: Totals = {
      projects: 0,
      rules: 0,
      instances: 0,
      transitions: 0,
      readMs: 0,
      dbMs: 0,
      errors: 0,
      fencedOut: 0,
      failedBatches: 0,
    };
    let t0 = performance.now();
    // The rules revision, read where the pending-revision read used to start: while it is the one under
    // which no rule had a pending revision, there is none, and the rule list read under it still holds.
    let revision = await this.#revision(RULES_REVISION);
    if (Number.isNaN(revision) || revision !== this.#noPendingAt) {
      let pendingRules = -1;
      await applyRevisions(db, atMs, inShard, (n) => {
        pendingRules = n;
      });
      this.#noPendingAt = pendingRules === 0 ? revision : undefined;
      // Applying wrote (and another writer may have): read again where the rule list's read used to be.
      if (pendingRules !== 0) revision = await this.#revision(RULES_REVISION);
    }
    const byProject = await this.#appliedRules(inShard, revision);
    // VMs of projects this replica no longer evaluates are not kept.
    for (const p of this.#vms.keys()) if (!byProject.has(p)) this.#vms.delete(p);
    totals.dbMs += performance.now() - t0;
    // Batches never span shards: a batch's writes are fenced by its one shard's lease.
    const count = this.#deps.shards?.count;
    const byShard = new Map<number, string[]>();
    for (const projectId of byProject.keys()) {
      const shard = held && count ? shardOf(projectId, count) : -1;
      const list = byShard.get(shard);
      if (list) list.push(projectId);
      else byShard.set(shard, [projectId]);
    }
    for (const [shard, projectIds] of byShard) {
      for (const batch of chunks(projectIds, PROJECTS_PER_BATCH)) {
        let kept: boolean;
        try {
          kept = await this.#evaluateBatch(batch, byProject, atMs, shard, totals);
        } catch (err) {
          // A failed batch (its transaction rolled back) leaves the others to be evaluated and written.
          this.#deps.log.error(
            { err, projects: batch.length },
            "alert evaluation of a batch of projects failed",
          );
          totals.failedBatches++;
          continue;
        }
        if (!kept) {
          // The shard went to another replica mid-cycle: it evaluates the rest.
          totals.fencedOut++;
          break;
        }
      }
    }
    t0 = performance.now();
    await markRepeatsDue(db, atMs, inShard);
    // History purge is global: one replica runs it, the holder of shard 0.
    if (!held || held.has(0)) await this.#housekeeping(atMs);
    totals.dbMs += performance.now() - t0;
    return { atMs, ...totals, durationMs: performance.now() - started };
  }

  /** Reads, evaluates and writes one batch of projects; false when its shard's lease was lost. */
  async #evaluateBatch(
    projectIds: readonly string[],
    byProject: ReadonlyMap<string, readonly AppliedRule[]>,
    atMs: number,
    shard: number,
    totals: Totals,
  ): Promise<boolean> {
    const { db, options, shards, now } = this.#deps;
    const rulesOf = (p: string) => (byProject.get(p) ?? []).filter((r) => ruleMetrics.has(r.spec.metricId));
    let t0 = performance.now();
    // The VMs revision, read where the batch's VM read used to start: the VMs read under it are reused.
    const vmRevision = await this.#revision(VMS_REVISION);
    if (vmRevision !== this.#vmRevision) {
      this.#vms.clear();
      this.#vmRevision = vmRevision;
    }
    const batch = await loadProjectBatch(
      db,
      {
        projectIds,
        keptVms: this.#vms,
        ruleIds: projectIds.flatMap((p) => rulesOf(p).map((r) => r.id)),
        timelineProjectIds: projectIds.filter((p) =>
          rulesOf(p).some((r) => {
            const kind = ruleMetrics.get(r.spec.metricId)?.kind;
            return kind === "unexpected_stop" || kind === "telemetry_age";
          }),
        ),
      },
      atMs,
    );
    if (!Number.isNaN(vmRevision) && this.#vmRevision === vmRevision)
      for (const [p, vms] of batch.vmsRead) this.#vms.set(p, vms);
    totals.dbMs += performance.now() - t0;

    // The store reads of every project of the batch, a few in flight.
    t0 = performance.now();
    const live = new Map(projectIds.map((p) => [p, new Set((batch.vms.get(p) ?? []).map((v) => v.name))]));
    const plans = new Map<string, Map<string, PlannedRead>>();
    for (const p of projectIds) plans.set(p, planReads(rulesOf(p), live.get(p) ?? new Set(), atMs, options));
    const reads = [...plans.entries()].flatMap(([projectId, plan]) =>
      [...new Set(plan.values())].map((read) => ({ projectId, read })),
    );
    await runReads(this.#deps.metrics, reads, atMs);
    const again = projectIds.flatMap((projectId) => {
      const plan = plans.get(projectId);
      if (!plan) return [];
      const own = replanFailedRiders(
        rulesOf(projectId),
        plan,
        live.get(projectId) ?? new Set(),
        atMs,
        options,
      );
      return own.map((read) => ({ projectId, read }));
    });
    if (again.length > 0) await runReads(this.#deps.metrics, again, atMs);
    totals.readMs += performance.now() - t0;

    const outcomes: RuleOutcome[] = [];
    for (const projectId of projectIds) {
      const rules = rulesOf(projectId);
      if (rules.length === 0) continue;
      totals.projects++;
      const vms = batch.vms.get(projectId) ?? [];
      const names = live.get(projectId) ?? new Set<string>();
      const timelines = batch.timelines.get(projectId);
      const plan = plans.get(projectId);
      let budget = options.maxInstancesPerProject;
      for (const rule of rules) {
        const share = ruleShare(rule, plan?.get(rule.id), names, atMs, options);
        const stored = batch.instances.get(rule.id) ?? [];
        const input = { vms, live: names, timelines, stored, ...share };
        const e = evaluateRule(rule, input, atMs, budget, options.maxGapMs);
        budget -= e.evaluated;
        this.#flags.noData += e.noData;
        this.#flags.error += e.error;
        outcomes.push(e.outcome);
        totals.rules++;
        totals.instances += e.evaluated;
        totals.transitions += e.outcome.writes.filter((w) => w.transition).length;
        if (e.outcome.readError !== undefined) totals.errors++;
      }
    }

    t0 = performance.now();
    const fence = shard >= 0 && shards ? (tx: Db) => shards.fence(tx, shard, now()) : undefined;
    const committed = await writeOutcomes(db, outcomes, atMs, fence);
    totals.dbMs += performance.now() - t0;
    const m = this.#deps.instruments;
    // Counted once written: a batch fenced out by another replica transitioned nothing.
    if (committed && m)
      for (const o of outcomes)
        for (const w of o.writes) if (w.transition) m.transitions.inc({ kind: w.transition.toLowerCase() });
    return committed;
  }
}
