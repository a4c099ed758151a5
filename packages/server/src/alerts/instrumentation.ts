import { counter, gauge, histogram, LATENCY_BUCKETS, observed, type Registry } from "../instrument.ts";
import type { Transition } from "./state.ts";

const TRANSITIONS: readonly Transition[] = ["PENDING", "FIRED", "RESOLVED", "CLEARED"];

/** The evaluator's figures: cycles, lag behind schedule, what was evaluated, transitions, the lease. */
export function createAlertMetrics(registry: Registry, intervalSeconds: number) {
  // Set by the evaluator; read at scrape time for the lag.
  const state = {
    holdsLease: false,
    /** The shard leases' last renewal (cluster/shards.ts), with several replicas. */
    shards: undefined as { readonly held: number; readonly unowned: number | undefined } | undefined,
    lastCycleStartMs: undefined as number | undefined,
    now: () => Date.now(),
  };
  gauge(registry, "svc_alerts_evaluation_interval_seconds", "The evaluator's configured cycle.").set(
    intervalSeconds,
  );
  observed(
    registry,
    "gauge",
    "svc_alerts_lease_held",
    "1 while this process holds at least one evaluator shard lease (evaluates those shards' projects), else 0.",
    () => (state.holdsLease ? 1 : 0),
  );
  observed(
    registry,
    "gauge",
    "svc_alerts_shards_held",
    "Evaluator shards whose lease this process holds (0 on a replica that evaluates nothing); absent before the first renewal.",
    () => state.shards?.held,
  );
  observed(
    registry,
    "gauge",
    "svc_alerts_shards_unowned",
    "Evaluator shards without a live lease as this process's last renewal left them (their projects are not evaluated until one is taken).",
    () => state.shards?.unowned,
  );
  observed(
    registry,
    "gauge",
    "svc_alerts_last_cycle_timestamp_seconds",
    "When this process's last evaluation cycle started, Unix seconds (absent before the first).",
    () => (state.lastCycleStartMs === undefined ? undefined : state.lastCycleStartMs / 1000),
  );
  observed(
    registry,
    "gauge",
    "svc_alerts_evaluation_lag_seconds",
    "How far the next cycle is behind its schedule (time since the last cycle started, less one interval), while this process holds the lease.",
    () =>
      state.holdsLease && state.lastCycleStartMs !== undefined
        ? Math.max(0, (state.now() - state.lastCycleStartMs) / 1000 - intervalSeconds)
        : undefined,
  );
  return {
    state,
    cycles: counter(
      registry,
      "svc_alerts_cycles_total",
      "Evaluation cycles by outcome.",
      ["outcome"],
      [{ outcome: "ok" }, { outcome: "failed" }],
    ),
    cycleDuration: histogram(
      registry,
      "svc_alerts_cycle_duration_seconds",
      "Duration of one evaluation cycle over every project's rules.",
      LATENCY_BUCKETS,
    ),
    rules: counter(
      registry,
      "svc_alerts_rules_evaluated_total",
      "Rule evaluations (one per rule per cycle).",
    ),
    instances: counter(
      registry,
      "svc_alerts_instances_evaluated_total",
      "Alert instances (rule × VM, × mountpoint) evaluated.",
    ),
    transitions: counter(
      registry,
      "svc_alerts_transitions_total",
      "Instance state transitions by kind (pending, fired, resolved, cleared).",
      ["kind"],
      TRANSITIONS.map((t) => ({ kind: t.toLowerCase() })),
    ),
    readFailures: counter(
      registry,
      "svc_alerts_rule_read_failures_total",
      "Rule evaluations whose metrics read failed (their instances are flagged error).",
    ),
    flagged: gauge(
      registry,
      "svc_alerts_instances_flagged",
      "Instances the last cycle left flagged no_data or error (no state change, a visible flag).",
      ["flag"],
    ),
  };
}

export type AlertMetrics = ReturnType<typeof createAlertMetrics>;
