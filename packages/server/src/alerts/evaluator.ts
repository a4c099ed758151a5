import { sql } from "kysely";
import type { Logger } from "pino";
import { type ShardLeases, shardOf } from "../cluster/shards.ts";
import type { Db } from "../db/database.ts";
import type { AlertInstanceTable } from "../db/schema.ts";
import type { MetricsBackend } from "../metrics/backend.ts";
import { loadProjectBatch, type ProjectBatch } from "./batch.ts";
import { type RuleMetric, ruleMetrics, storedSeries } from "./catalog.ts";
import {
  type Evaluation,
  evaluateTelemetryAge,
  evaluateUnexpectedStop,
  type VmTimeline,
} from "./condition.ts";
import { evaluateMetric, forecastLookbackMs } from "./forecast.ts";
import type { AlertMetrics } from "./instrumentation.ts";
import type { AlertOptions } from "./options.ts";
import {
  type InstanceData,
  indexSeries,
  instanceKey,
  ruleData,
  type SeriesIndex,
  selectSeries,
} from "./read.ts";
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
  /** Projects with an enabled rule evaluated in this cycle (of this replica's shards). */
  readonly projects: number;
  readonly rules: number;
  readonly instances: number;
  readonly evaluations: number;
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

interface AppliedRule {
  readonly id: string;
  readonly projectId: string;
  readonly version: number;
  readonly spec: RuleSpec;
}

/** Projects whose database rows are read and written together (one transaction per batch). */
const PROJECTS_PER_BATCH = 100;
/** Store reads in flight at once (the remote backend's are HTTP requests to the engine). */
const READ_CONCURRENCY = 8;
/** Rules of a project whose lookback is at most this share one store read; longer ones read apart. */
const SHARED_READ_MAX_LOOKBACK_MS = 30 * 60_000;
/** Instance rows per multi-row upsert (19 columns: well under SQLite's and PostgreSQL's bind limits). */
const UPSERT_ROWS = 500;

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

function chunks<T>(xs: readonly T[], n: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < xs.length; i += n) out.push(xs.slice(i, i + n));
  return out;
}

/** Runs fn over xs with at most `limit` in flight. */
async function eachLimited<T>(xs: readonly T[], limit: number, fn: (x: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < xs.length) await fn(xs[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(limit, xs.length) }, worker));
}

/** One store read of a project, shared by the rules that need it. */
interface PlannedRead {
  readonly metrics: RuleMetric[];
  /** Undefined = every VM. */
  vmNames: Set<string> | undefined;
  fromMs: number;
  data?: SeriesIndex;
  error?: string;
}

/** What one rule's evaluation will write. */
interface InstanceWrite {
  readonly key: string;
  readonly vmName: string;
  readonly mountpoint: string;
  readonly prev?: AlertInstanceTable;
  readonly next: InstanceStatus;
  readonly transition?: string;
  readonly value: number | null;
}

interface RuleOutcome {
  readonly rule: AppliedRule;
  readonly writes: InstanceWrite[];
  /** Live instances whose VM left the rule: deleted VMs, and VMs no longer selected. */
  readonly deleted: string[];
  readonly deselected: string[];
  readonly readError?: string;
}

class EvaluatorImpl implements Evaluator {
  readonly #deps: EvaluatorDeps;
  #timer: NodeJS.Timeout | undefined;
  /** Renews the shard leases between cycles and evaluates shards taken over (issue 48). */
  #keeper: NodeJS.Timeout | undefined;
  /** The shards the last cycles evaluated (undefined before the first, or without shards). */
  #evaluated: ReadonlySet<number> | undefined;
  /** performance.now() when the last full cycle began. */
  #lastCycleMs: number | undefined;
  #running: Promise<unknown> = Promise.resolve();
  #cycling = false;
  /** A timer's cycle (of every shard held) runs or waits to. */
  #ticking = false;
  #nudged = false;
  #lastPurge = 0;
  /** Instances flagged during the running cycle. */
  #flags = { noData: 0, error: 0 };
  /** Parsed specs of applied revisions, by rule id: a cycle reads only the rules' ids and versions. */
  readonly #specs = new Map<string, { version: number; spec: RuleSpec }>();

  constructor(deps: EvaluatorDeps) {
    this.#deps = deps;
  }

  start(): void {
    if (this.#timer) return;
    const tick = () =>
      void this.tick().catch((err: unknown) =>
        this.#deps.log.error({ err }, "alert evaluation cycle failed"),
      );
    this.#timer = setInterval(tick, this.#deps.options.evaluationIntervalMs);
    this.#timer.unref();
    // A starting replica takes its share and evaluates it at once, not a cycle later (issue 48).
    setImmediate(tick);
    const { shards } = this.#deps;
    if (shards) {
      this.#keeper = setInterval(
        () =>
          void this.#keep().catch((err: unknown) =>
            this.#deps.log.error({ err }, "renewing the evaluator's shard leases failed"),
          ),
        shards.renewIntervalMs,
      );
      this.#keeper.unref();
    }
  }

  async tick(atMs?: number): Promise<CycleReport | undefined> {
    const { shards, now } = this.#deps;
    // Leases are renewed even while a long cycle runs, so a slow cycle does not hand its shards over.
    const held = shards ? await shards.acquire(now()) : undefined;
    this.#held(held);
    // A cycle still running (longer than the interval) is not queued behind: the next tick evaluates.
    // One of shards just taken over (#keep) is short: this cycle waits for it rather than be skipped.
    if (this.#ticking || held?.size === 0) return undefined;
    this.#ticking = true;
    this.#lastCycleMs = performance.now();
    let report: CycleReport;
    try {
      report = await this.#serial(() => this.#cycle(atMs ?? now(), held));
    } finally {
      this.#ticking = false;
    }
    this.#evaluated = held;
    // Shards beyond this replica's share (a replica joined) go back right after being evaluated, so
    // the replica taking them evaluates them well within a cycle of this one (cluster/shards.ts).
    if (shards) this.#held(await shards.acquire(now(), { shed: true }));
    return report;
  }

  /**
   * Between cycles, every renewIntervalMs: renews the leases, takes free or expired shards (a replica
   * stopped or died) and evaluates the ones taken at once rather than at the next cycle.
   */
  async #keep(): Promise<void> {
    const { shards, now } = this.#deps;
    if (!shards) return;
    const held = await shards.acquire(now());
    this.#held(held);
    const fresh = new Set([...held].filter((s) => !this.#evaluated?.has(s)));
    if (fresh.size === 0 || this.#cycling || !this.#timer) return;
    await this.#serial(() => this.#cycle(now(), fresh));
    this.#evaluated = new Set([...(this.#evaluated ?? []), ...fresh]);
  }

  #held(held: ReadonlySet<number> | undefined): void {
    const m = this.#deps.instruments;
    if (m) {
      m.state.holdsLease = held === undefined || held.size > 0;
      if (this.#deps.shards) m.state.shards = this.#deps.shards.status;
    }
    if (held && this.#evaluated) this.#evaluated = new Set([...this.#evaluated].filter((s) => held.has(s)));
  }

  nudge(): void {
    if (this.#nudged) return;
    this.#nudged = true;
    setImmediate(() => {
      this.#nudged = false;
      // Revisions are applied by their project's shard holder; another replica's save waits for it.
      const { shards, now } = this.#deps;
      const held = shards ? shards.acquire(now()) : Promise.resolve(undefined);
      void held
        .then((h) => (h?.size === 0 ? 0 : this.#serial(() => this.#apply(now(), this.#inShards(h)))))
        .catch((err: unknown) => this.#deps.log.error({ err }, "applying alert rule revisions failed"));
    });
  }

  async stop(): Promise<void> {
    const started = this.#timer !== undefined;
    clearInterval(this.#timer);
    clearInterval(this.#keeper);
    this.#timer = undefined;
    this.#keeper = undefined;
    await this.#running.catch(() => {});
    // A stopping replica evaluates its shards once more when its last cycle began more than half a
    // cycle ago, so whoever takes them over after the release evaluates them within a cycle.
    const { shards, now } = this.#deps;
    const last = this.#lastCycleMs;
    const half = this.#deps.options.evaluationIntervalMs / 2;
    if (started && shards && this.#evaluated?.size && last !== undefined && performance.now() - last > half)
      await this.#serial(() => this.#cycle(now(), this.#evaluated)).catch((err: unknown) =>
        this.#deps.log.error({ err }, "the last alert evaluation before stopping failed"),
      );
  }

  /** One cycle or apply at a time: they write the same rows. */
  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#running.catch(() => {}).then(fn);
    this.#running = run;
    return run;
  }

  #inShards(held: ReadonlySet<number> | undefined): (projectId: string) => boolean {
    const count = this.#deps.shards?.count;
    if (!held || !count) return () => true;
    return (projectId) => held.has(shardOf(projectId, count));
  }

  applyPending(atMs = this.#deps.now()): Promise<number> {
    return this.#serial(() => this.#apply(atMs, () => true));
  }

  runCycle(atMs = this.#deps.now()): Promise<CycleReport> {
    return this.#serial(() => this.#cycle(atMs, undefined));
  }

  async #apply(atMs: number, inShard: (projectId: string) => boolean): Promise<number> {
    const { db } = this.#deps;
    const pending = (
      await db
        .selectFrom("alert_rules")
        .selectAll()
        .where("delete_time", "is", null)
        .whereRef("latest_version", "!=", "applied_version")
        .execute()
    ).filter((r) => inShard(r.project_id));
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
      const done = await db.transaction().execute(async (tx) => {
        // Conditional on the version it replaces: a revision is applied (and its instances retired) once,
        // even when a replica that just lost the project's shard applies it too.
        const set = await tx
          .updateTable("alert_rules")
          .set({
            applied_version: r.latest_version,
            sync_status: "APPLIED",
            sync_reason: "",
            update_time: atMs,
          })
          .where("id", "=", r.id)
          .where("latest_version", "=", r.latest_version)
          .where("applied_version", "=", r.applied_version)
          .executeTakeFirst();
        if (Number(set.numUpdatedRows) === 0) return false;
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
        return true;
      });
      if (done) applied++;
    }
    return applied;
  }

  /** The applied, enabled rules of the projects `inShard` accepts, by project, in evaluation order. */
  async #appliedRules(inShard: (projectId: string) => boolean): Promise<Map<string, AppliedRule[]>> {
    const { db } = this.#deps;
    const rows = (
      await db
        .selectFrom("alert_rules")
        .select(["id", "project_id", "applied_version"])
        .where("delete_time", "is", null)
        .where("applied_version", ">", 0)
        .orderBy("project_id")
        .orderBy("create_time")
        .orderBy("id")
        .execute()
    ).filter((r) => inShard(r.project_id));
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
    this.#cycling = true;
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
    } finally {
      this.#cycling = false;
    }
  }

  async #cycleOf(atMs: number, held: ReadonlySet<number> | undefined): Promise<CycleReport> {
    const started = performance.now();
    const inShard = this.#inShards(held);
    const totals = {
      projects: 0,
      rules: 0,
      instances: 0,
      evaluations: 0,
      transitions: 0,
      readMs: 0,
      dbMs: 0,
      errors: 0,
      fencedOut: 0,
      failedBatches: 0,
    };
    let t0 = performance.now();
    await this.#apply(atMs, inShard);
    const byProject = await this.#appliedRules(inShard);
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
    await this.#repeatDue(atMs, inShard);
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
    totals: {
      projects: number;
      rules: number;
      instances: number;
      evaluations: number;
      transitions: number;
      readMs: number;
      dbMs: number;
      errors: number;
    },
  ): Promise<boolean> {
    const { db, options } = this.#deps;
    const rulesOf = (p: string) => (byProject.get(p) ?? []).filter((r) => ruleMetrics.has(r.spec.metricId));
    let t0 = performance.now();
    const batch = await loadProjectBatch(
      db,
      {
        projectIds,
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
    totals.dbMs += performance.now() - t0;

    // The store reads of every project of the batch, a few in flight.
    t0 = performance.now();
    const plans = new Map(projectIds.map((p) => [p, this.#planReads(rulesOf(p), batch, p, atMs)]));
    const reads = [...plans.entries()].flatMap(([p, plan]) =>
      [...new Set(plan.values())].map((r) => ({ p, r })),
    );
    await eachLimited(reads, READ_CONCURRENCY, async ({ p, r }) => {
      try {
        r.data = indexSeries(
          await selectSeries(this.#deps.metrics, p, r.metrics, r.vmNames && [...r.vmNames], r.fromMs, atMs),
        );
      } catch (err) {
        r.error = err instanceof Error ? err.message : String(err);
      }
    });
    totals.readMs += performance.now() - t0;

    const outcomes: RuleOutcome[] = [];
    for (const projectId of projectIds) {
      const rules = rulesOf(projectId);
      if (rules.length === 0) continue;
      totals.projects++;
      const vms = batch.vms.get(projectId) ?? [];
      const live = new Set(vms.map((v) => v.name));
      const timelines = batch.timelines.get(projectId);
      const plan = plans.get(projectId);
      let budget = options.maxInstancesPerProject;
      for (const rule of rules) {
        const o = this.#evaluateRule(rule, vms, live, timelines, batch, plan?.get(rule.id), atMs, budget);
        budget -= o.evaluated;
        outcomes.push(o.outcome);
        totals.rules++;
        totals.instances += o.evaluated;
        totals.evaluations += o.evaluated;
        totals.transitions += o.outcome.writes.filter((w) => w.transition).length;
        if (o.outcome.readError !== undefined) totals.errors++;
      }
    }

    t0 = performance.now();
    const kept = await this.#write(outcomes, atMs, shard);
    totals.dbMs += performance.now() - t0;
    const m = this.#deps.instruments;
    // Counted once written: a batch fenced out by another replica transitioned nothing.
    if (kept && m)
      for (const o of outcomes)
        for (const w of o.writes) if (w.transition) m.transitions.inc({ kind: w.transition.toLowerCase() });
    return kept;
  }

  /**
   * The store reads of one project's rules: one per rule that reads the store, merged into one read
   * for every rule with a lookback up to SHARED_READ_MAX_LOOKBACK_MS (the union of their series and
   * VMs over the longest of their windows, each rule cutting out its own), and one per metric for
   * longer ones. ruleData gives each rule exactly what its own read would have.
   */
  #planReads(
    rules: readonly AppliedRule[],
    batch: ProjectBatch,
    projectId: string,
    atMs: number,
  ): Map<string, PlannedRead> {
    const live = new Set((batch.vms.get(projectId) ?? []).map((v) => v.name));
    const plan = new Map<string, PlannedRead>();
    const shared = new Map<string, PlannedRead>();
    for (const rule of rules) {
      const metric = ruleMetrics.get(rule.spec.metricId);
      if (!metric || storedSeries(metric).length === 0) continue;
      const targets = rule.spec.allVms ? undefined : rule.spec.vmNames.filter((n) => live.has(n));
      if (targets?.length === 0) continue;
      const lookbackMs = this.#lookbackMs(metric, rule.spec);
      const group = lookbackMs <= SHARED_READ_MAX_LOOKBACK_MS ? "" : `${metric.id}`;
      let read = shared.get(group);
      if (!read) {
        read = { metrics: [], vmNames: targets && new Set(), fromMs: atMs - lookbackMs };
        shared.set(group, read);
      }
      if (!read.metrics.includes(metric)) read.metrics.push(metric);
      if (!targets) read.vmNames = undefined;
      else if (read.vmNames) for (const n of targets) read.vmNames.add(n);
      read.fromMs = Math.min(read.fromMs, atMs - lookbackMs);
      plan.set(rule.id, read);
    }
    return plan;
  }

  #lookbackMs(metric: RuleMetric, spec: RuleSpec): number {
    const { options } = this.#deps;
    const sustainedMs = spec.sustainedSeconds * 1000;
    return metric.kind === "telemetry_age"
      ? sustainedMs + spec.threshold * 1000 + options.maxGapMs
      : sustainedMs + options.maxGapMs + options.samplingIntervalMs + forecastLookbackMs(spec);
  }

  #evaluateRule(
    rule: AppliedRule,
    vms: readonly LiveVm[],
    live: ReadonlySet<string>,
    timelines: Map<string, VmTimeline> | undefined,
    batch: ProjectBatch,
    read: PlannedRead | undefined,
    atMs: number,
    budget: number,
  ): { outcome: RuleOutcome; evaluated: number } {
    const { spec } = rule;
    const metric = ruleMetrics.get(spec.metricId) as RuleMetric;
    const targets = spec.allVms ? vms.map((v) => v.name) : spec.vmNames.filter((n) => live.has(n));
    const targetSet: ReadonlySet<string> = spec.allVms ? live : new Set(targets);
    const stored = batch.instances.get(rule.id) ?? [];
    const storedByKey = new Map(stored.map((r) => [r.instance_key, r]));
    const readError = read?.error;
    const data =
      read?.data && readError === undefined
        ? ruleData(
            metric,
            read.data,
            spec.allVms ? undefined : targetSet,
            atMs - this.#lookbackMs(metric, spec),
            atMs,
          )
        : new Map<string, InstanceData>();
    // Instances: one per target VM, or per (VM, mountpoint) seen now or before for filesystem rules.
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
    const writes: InstanceWrite[] = [];
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
      )
        writes.push({ key, ...inst, prev: row, next, transition, value: ev.value ?? null });
    }
    // Instances whose VM left the rule (deleted, or no longer selected) retire; no recovery is claimed.
    const gone = stored.filter((r) => r.state !== "RETIRED" && !targetSet.has(r.vm_name));
    return {
      outcome: {
        rule,
        writes,
        deleted: gone.filter((r) => !live.has(r.vm_name)).map((r) => r.instance_key),
        deselected: gone.filter((r) => live.has(r.vm_name)).map((r) => r.instance_key),
        readError,
      },
      evaluated,
    };
  }

  /**
   * One transaction for a batch's outcomes: its shard's fence first (the lease still ours, renewed),
   * then incident transitions, the instance rows in multi-row upserts, retirements, and every rule's
   * last evaluation in one statement per distinct error. False (nothing written) when fenced out.
   */
  async #write(outcomes: readonly RuleOutcome[], atMs: number, shard: number): Promise<boolean> {
    const { db, shards, now } = this.#deps;
    if (outcomes.length === 0) return true;
    return db.transaction().execute(async (tx) => {
      if (shard >= 0 && shards && !(await shards.fence(tx, shard, now()))) return false;
      const rows: AlertInstanceTable[] = [];
      const firing: { id: string; lastValue: number | null; noData: number; error: number }[] = [];
      for (const { rule, writes } of outcomes) {
        for (const w of writes) {
          let incidentId = w.prev && w.prev.state !== "RETIRED" ? w.prev.incident_id : null;
          if (w.transition === "FIRED") {
            incidentId = await openIncident(tx, {
              projectId: rule.projectId,
              ruleId: rule.id,
              ruleVersion: rule.version,
              spec: rule.spec,
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
            firing.push({
              id: incidentId,
              lastValue: w.next.lastValue,
              noData: w.next.flag === "NO_DATA" ? 1 : 0,
              error: w.next.flag === "ERROR" ? 1 : 0,
            });
          }
          rows.push({
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
          });
        }
      }
      // Still-firing incidents' values, one UPDATE per chunk (CASE over the ids; casts type the
      // parameters for PostgreSQL, and SQLite takes the type names as affinities).
      for (const part of chunks(firing, 200)) {
        const by = (f: (u: (typeof part)[number]) => unknown, type: string) =>
          sql<number>`case id ${sql.join(
            part.map((u) => sql`when ${u.id} then cast(${f(u)} as ${sql.raw(type)})`),
            sql` `,
          )} end`;
        await tx
          .updateTable("incidents")
          .set({
            last_value: by((u) => u.lastValue, "double precision"),
            no_data: by((u) => u.noData, "integer"),
            evaluation_error: by((u) => u.error, "integer"),
            update_time: atMs,
          })
          .where(
            "id",
            "in",
            part.map((u) => u.id),
          )
          .where("state", "=", "OPEN")
          .execute();
      }
      for (const part of chunks(rows, UPSERT_ROWS)) {
        await tx
          .insertInto("alert_instances")
          .values(part)
          .onConflict((oc) =>
            oc.columns(["rule_id", "instance_key"]).doUpdateSet((eb) => ({
              project_id: eb.ref("excluded.project_id"),
              vm_name: eb.ref("excluded.vm_name"),
              mountpoint: eb.ref("excluded.mountpoint"),
              revision: eb.ref("excluded.revision"),
              state: eb.ref("excluded.state"),
              state_since: eb.ref("excluded.state_since"),
              pending_since: eb.ref("excluded.pending_since"),
              fired_at: eb.ref("excluded.fired_at"),
              resolved_at: eb.ref("excluded.resolved_at"),
              retire_reason: eb.ref("excluded.retire_reason"),
              flag: eb.ref("excluded.flag"),
              flag_since: eb.ref("excluded.flag_since"),
              flag_message: eb.ref("excluded.flag_message"),
              last_eval_time: eb.ref("excluded.last_eval_time"),
              last_value: eb.ref("excluded.last_value"),
              incident_id: eb.ref("excluded.incident_id"),
              update_time: eb.ref("excluded.update_time"),
            })),
          )
          .execute();
      }
      for (const o of outcomes) {
        const { projectId, id } = o.rule;
        await retireInstances(tx, projectId, id, "VM deleted", atMs, EVALUATOR_ACTOR, o.deleted);
        await retireInstances(
          tx,
          projectId,
          id,
          "VM no longer selected by the rule",
          atMs,
          EVALUATOR_ACTOR,
          o.deselected,
        );
      }
      const byError = new Map<string, string[]>();
      for (const o of outcomes) {
        const e = o.readError ?? "";
        const list = byError.get(e);
        if (list) list.push(o.rule.id);
        else byError.set(e, [o.rule.id]);
      }
      for (const [error, ids] of byError)
        for (const part of chunks(ids, 1000))
          await tx
            .updateTable("alert_rules")
            .set({ last_eval_time: atMs, last_eval_error: error })
            .where("id", "in", part)
            .execute();
      return true;
    });
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

  /** Still-firing incidents whose repeat interval has passed get a REPEAT_DUE event (unless snoozed). */
  async #repeatDue(atMs: number, inShard: (projectId: string) => boolean): Promise<void> {
    const { db } = this.#deps;
    const due = (
      await db
        .selectFrom("incidents")
        .select(["id", "project_id", "rule_id", "repeat_interval_ms", "snooze_until"])
        .where("state", "=", "OPEN")
        .where("next_notify_time", "<=", atMs)
        .execute()
    ).filter((d) => inShard(d.project_id));
    for (const d of due) {
      await db.transaction().execute(async (tx) => {
        // Conditional: a repeat is due once, even when two replicas see it during a shard's handover.
        const r = await tx
          .updateTable("incidents")
          .set({ next_notify_time: atMs + d.repeat_interval_ms, update_time: atMs })
          .where("id", "=", d.id)
          .where("next_notify_time", "<=", atMs)
          .executeTakeFirst();
        if (Number(r.numUpdatedRows) === 0) return;
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
