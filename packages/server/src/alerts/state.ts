import type { Evaluation } from "./condition.ts";

/**
 * The instance state machine (docs/alerts.md#instance-states): INACTIVE → PENDING → FIRING → RESOLVED, and RETIRED.
 * Pure: the live evaluator and the preview both run it, so they agree by construction.
 *
 * - A breach that holds fires (from INACTIVE, PENDING or RESOLVED); one that does not hold yet is PENDING.
 * - Only an observed `false` leaves PENDING (→ INACTIVE) or FIRING (→ RESOLVED).
 * - `no_data` and `error` change no state: they set a visible flag until the next evaluation with data.
 * - RETIRED is terminal here; the evaluator starts a fresh INACTIVE instance for a new condition.
 */
export type InstanceState = "INACTIVE" | "PENDING" | "FIRING" | "RESOLVED" | "RETIRED";
export type InstanceFlag = "" | "NO_DATA" | "ERROR";

export interface InstanceStatus {
  readonly state: InstanceState;
  readonly stateSince: number;
  /** When the current breach started (PENDING or FIRING). */
  readonly pendingSince: number | null;
  readonly firedAt: number | null;
  readonly resolvedAt: number | null;
  readonly flag: InstanceFlag;
  readonly flagSince: number | null;
  readonly flagMessage: string;
  readonly lastValue: number | null;
}

/** What a step did that the outside world must hear of. */
export type Transition = "PENDING" | "FIRED" | "RESOLVED" | "CLEARED";

export const inactive: InstanceStatus = {
  state: "INACTIVE",
  stateSince: 0,
  pendingSince: null,
  firedAt: null,
  resolvedAt: null,
  flag: "",
  flagSince: null,
  flagMessage: "",
  lastValue: null,
};

export function step(
  prev: InstanceStatus,
  ev: Evaluation,
  atMs: number,
): { next: InstanceStatus; transition?: Transition } {
  if (prev.state === "RETIRED") return { next: prev };
  if (ev.result === "no_data" || ev.result === "error") {
    const flag: InstanceFlag = ev.result === "no_data" ? "NO_DATA" : "ERROR";
    const same = prev.flag === flag;
    return {
      next: {
        ...prev,
        flag,
        flagSince: same ? prev.flagSince : atMs,
        flagMessage: ev.message ?? "",
      },
    };
  }
  const base: InstanceStatus = {
    ...prev,
    flag: "",
    flagSince: null,
    flagMessage: "",
    lastValue: ev.value ?? null,
  };
  if (ev.result === "false") {
    if (prev.state === "FIRING")
      return {
        next: { ...base, state: "RESOLVED", stateSince: atMs, resolvedAt: atMs, pendingSince: null },
        transition: "RESOLVED",
      };
    if (prev.state === "PENDING")
      return {
        next: { ...base, state: "INACTIVE", stateSince: atMs, pendingSince: null },
        transition: "CLEARED",
      };
    return { next: base };
  }
  // result "true"
  if (prev.state === "FIRING") return { next: base };
  const pendingSince = prev.state === "PENDING" ? prev.pendingSince : atMs;
  if (ev.holds) {
    return {
      next: { ...base, state: "FIRING", stateSince: atMs, pendingSince, firedAt: atMs, resolvedAt: null },
      transition: "FIRED",
    };
  }
  if (prev.state === "PENDING") return { next: base };
  return { next: { ...base, state: "PENDING", stateSince: atMs, pendingSince }, transition: "PENDING" };
}

/** Whether a step changed what is stored (state or flag); a new value alone is not a change. */
export function changed(a: InstanceStatus, b: InstanceStatus): boolean {
  return (
    a.state !== b.state ||
    a.flag !== b.flag ||
    a.flagMessage !== b.flagMessage ||
    a.pendingSince !== b.pendingSince
  );
}
