import { type Kysely, PostgresAdapter, sql } from "kysely";

/**
 * Two counters in `eval_revision`, bumped by the database itself in the same transaction as any change
 * to the rows the evaluator reads every cycle (docs/decisions.md, "The evaluator's rule list and VMs
 * kept under the database's eval revision"), the pattern of 0015_auth_revision:
 *
 * - row 1, rules: `alert_rules` inserted, deleted (purged), or updated in a column its rule-list and
 *   pending-revision reads select on (id, project, versions, creation, deletion);
 * - row 2, VMs: `vms` inserted, deleted, or updated in a column its per-batch VM read selects on
 *   (project, location, id, state, creation).
 *
 * Not bumped by what changes every cycle or every sample: a rule's `last_eval_*`, `sync_*` and
 * `update_time`, a VM's `guest_sender` / `guest_seen_time`: the triggers name the columns they watch.
 * Triggers, not calls in the code, so no writer (another replica's build, a repair by hand) can
 * change those rows without the bump.
 */
const RULE_COLUMNS = "id, project_id, latest_version, applied_version, create_time, delete_time";
const VM_COLUMNS = "project_id, location, vm_id, state, create_time";

export async function up(db: Kysely<unknown>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema
    .createTable("eval_revision")
    .addColumn("id", "integer", (c) => c.primaryKey())
    .addColumn("revision", "bigint", (c) => c.notNull())
    .execute();
  await sql`insert into eval_revision (id, revision) values (1, 0), (2, 0)`.execute(db);
  const watched: [table: string, event: string, row: number][] = [
    ["alert_rules", "insert", 1],
    ["alert_rules", `update of ${RULE_COLUMNS}`, 1],
    ["alert_rules", "delete", 1],
    ["vms", "insert", 2],
    ["vms", `update of ${VM_COLUMNS}`, 2],
    ["vms", "delete", 2],
  ];
  if (postgres) {
    // The row to bump is the trigger's argument (TG_ARGV[0]).
    await sql`create function svc_bump_eval_revision() returns trigger language plpgsql as $$
      begin
        update eval_revision set revision = revision + 1 where id = TG_ARGV[0]::integer;
        return null;
      end $$`.execute(db);
    for (const [i, [table, event, row]] of watched.entries()) {
      // Once per statement: a statement that changes many rows bumps once.
      await sql
        .raw(
          `create trigger eval_revision_${i} after ${event} on ${table} for each statement execute function svc_bump_eval_revision('${row}')`,
        )
        .execute(db);
    }
  } else {
    for (const [i, [table, event, row]] of watched.entries()) {
      await sql
        .raw(
          `create trigger eval_revision_${i} after ${event} on ${table} begin update eval_revision set revision = revision + 1 where id = ${row}; end`,
        )
        .execute(db);
    }
  }
}
