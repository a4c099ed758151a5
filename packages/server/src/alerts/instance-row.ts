import type { AlertInstanceTable } from "../db/schema.ts";
import type { InstanceStatus } from "./state.ts";

/**
 * An alert_instances row and the instance status it stores (state.ts), declared once: the evaluation
 * reads a stored row's status with statusOf, the persistence writes rows built by instanceRow and
 * rewrites every column instanceRow fills but the key. A new column is one line here (and a migration).
 */

/** Each InstanceStatus field and the column that stores it. */
const STATUS_COLUMNS = {
  state: "state",
  stateSince: "state_since",
  pendingSince: "pending_since",
  firedAt: "fired_at",
  resolvedAt: "resolved_at",
  flag: "flag",
  flagSince: "flag_since",
  flagMessage: "flag_message",
  lastValue: "last_value",
} as const satisfies { readonly [F in keyof InstanceStatus]: keyof AlertInstanceTable };

type StatusColumn = (typeof STATUS_COLUMNS)[keyof InstanceStatus];

const STATUS_ENTRIES = Object.entries(STATUS_COLUMNS) as [keyof InstanceStatus, StatusColumn][];

/** An instance row's primary key: an upsert on it rewrites every other column. */
export const INSTANCE_KEY = ["rule_id", "instance_key"] as const;

/** The status a stored row holds. */
export function statusOf(row: AlertInstanceTable): InstanceStatus {
  const s: Partial<Record<keyof InstanceStatus, unknown>> = {};
  for (const [field, column] of STATUS_ENTRIES) s[field] = row[column];
  return s as InstanceStatus;
}

/** What identifies an instance row and the revision it was evaluated under. */
export type InstanceIdentity = Pick<
  AlertInstanceTable,
  "rule_id" | "instance_key" | "project_id" | "vm_name" | "mountpoint" | "revision"
>;

/** The row of an instance evaluated at atMs into `status` (live: no retire reason). */
export function instanceRow(
  id: InstanceIdentity,
  status: InstanceStatus,
  incidentId: string | null,
  atMs: number,
): AlertInstanceTable {
  const columns: Partial<Record<StatusColumn, unknown>> = {};
  for (const [field, column] of STATUS_ENTRIES) columns[column] = status[field];
  return {
    ...id,
    ...(columns as Pick<AlertInstanceTable, StatusColumn>),
    retire_reason: "",
    last_eval_time: atMs,
    incident_id: incidentId,
    update_time: atMs,
  };
}

/** The columns an upsert of `row` rewrites on conflict: all it holds but the key. */
export function rewrittenColumns(row: AlertInstanceTable): (keyof AlertInstanceTable)[] {
  return (Object.keys(row) as (keyof AlertInstanceTable)[]).filter(
    (c) => !(INSTANCE_KEY as readonly string[]).includes(c),
  );
}
