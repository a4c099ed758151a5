import { sql } from "kysely";
import type { Db } from "../db/database.ts";
import type { AlertInstanceTable } from "../db/schema.ts";
import type { RuleOutcome } from "./evaluation.ts";
import { INSTANCE_KEY, instanceRow, rewrittenColumns } from "./instance-row.ts";
import { liveVms, loadRevision } from "./rules.ts";
import { conditionKey } from "./spec.ts";
import {
  EVALUATOR_ACTOR,
  insertEvent,
  openIncident,
  resolveIncident,
  retireInstances,
} from "./transitions.ts";

/**
 * What the evaluator writes: applied revisions, a batch's evaluation (incidents through transitions.ts,
 * instance rows as instance-row.ts declares them, retirements, each rule's last evaluation), repeats
 * due, and the purge of deleted rules. Each write that must not happen twice (two replicas during a
 * shard's handover) is conditional on the row it replaces.
 */

/** Instance rows per multi-row upsert (19 columns: well under SQLite's and PostgreSQL's bind limits). */
const UPSERT_ROWS = 500;

export function chunks<T>(xs: readonly T[], n: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < xs.length; i += n) out.push(xs.slice(i, i + n));
  return out;
}

/**
 * Applies every pending revision of the projects `inShard` accepts (sync PENDING → APPLIED, or FAILED
 * when a VM it names is gone); an edited condition or a pause retires the rule's instances, a changed
 * repeat interval reschedules its open incidents. Returns how many were applied.
 */
export async function applyRevisions(
  db: Db,
  atMs: number,
  inShard: (projectId: string) => boolean,
  /** Told how many rules of every shard had a pending revision (the evaluator skips the read while 0). */
  sawPending?: (rules: number) => void,
): Promise<number> {
  const all = await db
    .selectFrom("alert_rules")
    .selectAll()
    .where("delete_time", "is", null)
    .whereRef("latest_version", "!=", "applied_version")
    .execute();
  sawPending?.(all.length);
  const pending = all.filter((r) => inShard(r.project_id));
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

/**
 * One transaction for a batch's outcomes: the fence first (its shard's lease still ours), then incident
 * transitions, the instance rows in multi-row upserts, retirements, and every rule's last evaluation in
 * one statement per distinct error. False (nothing written) when the fence refuses.
 */
export async function writeOutcomes(
  db: Db,
  outcomes: readonly RuleOutcome[],
  atMs: number,
  fence?: (tx: Db) => Promise<boolean>,
): Promise<boolean> {
  if (outcomes.length === 0) return true;
  return db.transaction().execute(async (tx) => {
    if (fence && !(await fence(tx))) return false;
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
        const id = {
          rule_id: rule.id,
          instance_key: w.key,
          project_id: rule.projectId,
          vm_name: w.vmName,
          mountpoint: w.mountpoint,
          revision: rule.version,
        };
        const keeps = w.next.state === "FIRING" || w.next.state === "RESOLVED";
        rows.push(instanceRow(id, w.next, keeps ? incidentId : null, atMs));
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
        // `state || ''`, not `state`: SQLite (no statistics) would otherwise search incidents_state
        // for every OPEN incident of every project, once per batch, instead of the ids' keys.
        .where(sql<string>`(${sql.ref("state")} || '')`, "=", "OPEN")
        .execute();
    }
    await upsertInstances(tx, rows);
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

/** Inserts instance rows, or rewrites every column but the key of those already stored. */
async function upsertInstances(tx: Db, rows: readonly AlertInstanceTable[]): Promise<void> {
  if (rows.length === 0) return;
  const columns = rewrittenColumns(rows[0]);
  for (const part of chunks(rows, UPSERT_ROWS)) {
    await tx
      .insertInto("alert_instances")
      .values(part)
      .onConflict((oc) =>
        oc
          .columns([...INSTANCE_KEY])
          .doUpdateSet((eb) => Object.fromEntries(columns.map((c) => [c, eb.ref(`excluded.${c}`)]))),
      )
      .execute();
  }
}

/**
 * Still-firing incidents of the projects `inShard` accepts whose repeat interval has passed get a
 * REPEAT_DUE event, unless snoozed (a snoozed repeat is skipped, not sent after the snooze).
 */
export async function markRepeatsDue(
  db: Db,
  atMs: number,
  inShard: (projectId: string) => boolean,
): Promise<void> {
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

/** Deletes the rules deleted before `beforeMs` (their revisions and instances go with them). */
export async function purgeDeletedRules(db: Db, beforeMs: number): Promise<void> {
  await db.deleteFrom("alert_rules").where("delete_time", "<", beforeMs).execute();
}
