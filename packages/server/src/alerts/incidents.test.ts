import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { Code } from "@connectrpc/connect";
import { rejectsWith } from "../../testing/assert.ts";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import type { IncidentEventTable, IncidentTable } from "../db/schema.ts";
import { newId } from "../ids.ts";
import { incidentName, MAX_SNOOZE_MS, purgeIncidentHistory } from "./incidents.ts";

const MIN = 60_000;
const DAY = 86_400_000;

for (const { dialect, skip } of await testDialects()) {
  describe(`IncidentService (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    let other: SeededProject;
    let projects = 0;
    before(async () => {
      t = await startTestApp(dialect);
      p = await t.seedProject("acme", ["web-1", "web-2"]);
      other = await t.seedProject("other", ["x-1"]);
    });
    after(() => t?.close());

    const projectIdOf = (s: SeededProject) => s.projectName.slice("projects/".length);
    const owner = () => t.clients(p.owner.session).incidents;

    /** An incident row (and its events) as the evaluator would write them, inserted directly. */
    async function insertIncident(
      s: SeededProject,
      o: Partial<IncidentTable> = {},
      events: Partial<IncidentEventTable>[] = [],
    ): Promise<{ row: IncidentTable; name: string }> {
      const now = t.clock.now();
      const row: IncidentTable = {
        id: randomUUID(),
        project_id: projectIdOf(s),
        rule_id: randomUUID(),
        rule_version: 3,
        instance_key: s.vms[0],
        vm_name: s.vms[0],
        mountpoint: "",
        state: "OPEN",
        retire_reason: "",
        rule_display_name: "CPU high",
        severity: "WARNING",
        metric_id: "cpu_utilization_pct",
        operator: "GREATER_THAN",
        threshold: 90,
        open_time: now - 10 * MIN,
        close_time: null,
        firing_value: 95.5,
        last_value: 97,
        no_data: 0,
        evaluation_error: 0,
        ack_user_id: null,
        ack_time: null,
        snooze_until: null,
        snooze_user_id: null,
        repeat_interval_ms: 3_600_000,
        next_notify_time: now + 50 * MIN,
        update_time: now - 10 * MIN,
        ...o,
      };
      await t.app.db.db.insertInto("incidents").values(row).execute();
      for (const e of events) {
        await t.app.db.db
          .insertInto("incident_events")
          .values({
            id: newId(),
            project_id: row.project_id,
            incident_id: row.id,
            rule_id: row.rule_id,
            kind: "OPENED",
            time: row.open_time,
            actor: "evaluator",
            detail: "{}",
            ...e,
          })
          .execute();
      }
      return { row, name: incidentName(row.project_id, row.id) };
    }

    async function member(
      s: SeededProject,
      role: "editor" | "viewer",
    ): Promise<{ user: string; session: string }> {
      const email = `${role}-${randomUUID()}@example.com`;
      const password = `pw-${randomUUID()}`;
      const user = await t.admin.users.createUser({ email, password });
      await t.admin.projects.setMember({ project: s.projectName, user: user.name, role });
      const { sessionToken } = await t.clients().sessions.login({ email, password });
      return { user: user.name, session: sessionToken };
    }

    /** A fresh project, so listings see only the incidents of one test. */
    const freshProject = () => t.seedProject(`list-${++projects}`, ["a-1", "a-2"]);

    const rowOf = (id: string) =>
      t.app.db.db.selectFrom("incidents").selectAll().where("id", "=", id).executeTakeFirstOrThrow();
    const eventsOf = (id: string) =>
      t.app.db.db.selectFrom("incident_events").selectAll().where("incident_id", "=", id).execute();

    describe("ListIncidents", () => {
      it("lists newest first, a page at a time, until the last page has no token", async () => {
        const s = await freshProject();
        const now = t.clock.now();
        const names: string[] = [];
        for (let i = 0; i < 5; i++) {
          const { name } = await insertIncident(s, { open_time: now - i * MIN }, [{}]);
          names.push(name);
        }
        const c = t.clients(s.owner.session).incidents;
        const seen: string[] = [];
        let pageToken = "";
        let pages = 0;
        do {
          const res = await c.listIncidents({ projectName: s.projectName, pageSize: 2, pageToken });
          assert.ok(res.incidents.length <= 2);
          for (const i of res.incidents) assert.deepEqual(i.events, [], "a listing leaves events out");
          seen.push(...res.incidents.map((i) => i.name));
          pageToken = res.nextPageToken ?? "";
          pages++;
        } while (pageToken);
        assert.deepEqual(seen, names);
        assert.equal(pages, 3);
      });

      it("orders incidents opened at the same time by id, without repeating one across pages", async () => {
        const s = await freshProject();
        const at = t.clock.now() - 5 * MIN;
        const ids = ["aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb", "cccccccccccccccc"];
        for (const id of ids) await insertIncident(s, { id, open_time: at });
        const c = t.clients(s.owner.session).incidents;
        const first = await c.listIncidents({ projectName: s.projectName, pageSize: 2 });
        const second = await c.listIncidents({
          projectName: s.projectName,
          pageSize: 2,
          pageToken: first.nextPageToken,
        });
        assert.deepEqual(
          [...first.incidents, ...second.incidents].map((i) => i.name),
          [...ids].reverse().map((id) => incidentName(projectIdOf(s), id)),
        );
        assert.equal(second.nextPageToken, undefined);
      });

      it("filters by state, rule and VM", async () => {
        const s = await freshProject();
        const rule = randomUUID();
        const ruleName = `${s.projectName}/alertRules/${rule}`;
        const open1 = await insertIncident(s, { rule_id: rule, vm_name: s.vms[0] });
        const open2 = await insertIncident(s, { vm_name: s.vms[1] });
        const resolved = await insertIncident(s, {
          rule_id: rule,
          vm_name: s.vms[1],
          state: "RESOLVED",
          close_time: t.clock.now(),
        });
        const retired = await insertIncident(s, {
          state: "RETIRED",
          retire_reason: "RULE_DELETED",
          close_time: t.clock.now(),
        });
        const c = t.clients(s.owner.session).incidents;
        const names = async (f: { state?: string; rule?: string; vmName?: string }) =>
          (await c.listIncidents({ projectName: s.projectName, ...f })).incidents.map((i) => i.name).sort();
        assert.deepEqual(await names({ state: "OPEN" }), [open1.name, open2.name].sort());
        assert.deepEqual(await names({ state: "RESOLVED" }), [resolved.name]);
        assert.deepEqual(await names({ state: "RETIRED" }), [retired.name]);
        assert.deepEqual(await names({ rule: ruleName }), [open1.name, resolved.name].sort());
        assert.deepEqual(await names({ vmName: s.vms[1] }), [open2.name, resolved.name].sort());
        assert.deepEqual(await names({ rule: ruleName, vmName: s.vms[1], state: "RESOLVED" }), [
          resolved.name,
        ]);
        assert.deepEqual(await names({}), [open1.name, open2.name, resolved.name, retired.name].sort());
      });

      it("refuses an unknown state, and a rule or VM of another project, naming the field", async () => {
        const c = owner();
        const bad = async (f: object, field: string) => {
          const err = await rejectsWith(
            c.listIncidents({ projectName: p.projectName, ...f }),
            Code.InvalidArgument,
            "INVALID_FIELD",
          );
          assert.match(err.message, new RegExp(`^\\[invalid_argument\\] ${field}:`));
        };
        await bad({ state: "FIRING" }, "state");
        await bad({ rule: `${other.projectName}/alertRules/${randomUUID()}` }, "rule");
        await bad({ rule: `${p.projectName}/alertRules/not-a-uuid` }, "rule");
        await bad({ vmName: other.vms[0] }, "vmName");
        await bad({ vmName: "web-1" }, "vmName");
        await bad({ pageSize: -1 }, "pageSize");
      });

      it("refuses a tampered page token and a token of other filters or another listing", async () => {
        const s = await freshProject();
        for (let i = 0; i < 3; i++) await insertIncident(s, { open_time: t.clock.now() - i * MIN });
        const c = t.clients(s.owner.session).incidents;
        const { nextPageToken } = await c.listIncidents({ projectName: s.projectName, pageSize: 1 });
        assert.ok(nextPageToken);
        const [body, mac] = nextPageToken.split(".");
        const forged = Buffer.from(
          JSON.stringify({ ...JSON.parse(Buffer.from(body, "base64url").toString()), p: "0/zzz" }),
        ).toString("base64url");
        for (const pageToken of [`${forged}.${mac}`, `${body}.${mac.slice(1)}x`, "garbage"]) {
          await rejectsWith(
            c.listIncidents({ projectName: s.projectName, pageSize: 1, pageToken }),
            Code.InvalidArgument,
            "INVALID_PAGE_TOKEN",
          );
        }
        await rejectsWith(
          c.listIncidents({
            projectName: s.projectName,
            pageSize: 1,
            state: "OPEN",
            pageToken: nextPageToken,
          }),
          Code.InvalidArgument,
          "INVALID_PAGE_TOKEN",
        );
        const vms = t.clients(s.owner.session).monitoring;
        await rejectsWith(
          vms.listVMMonitoring({ projectName: s.projectName, inventoryOnly: true, pageToken: nextPageToken }),
          Code.InvalidArgument,
          "INVALID_PAGE_TOKEN",
        );
      });
    });

    describe("GetIncident", () => {
      it("answers every field of the row and its events oldest first", async () => {
        const openTime = t.clock.now() - 30 * MIN;
        const { row, name } = await insertIncident(
          p,
          {
            mountpoint: "/var",
            metric_id: "filesystem_used_pct",
            open_time: openTime,
            no_data: 1,
            firing_value: null,
            next_notify_time: null,
          },
          [
            { kind: "REPEAT_DUE", time: openTime + 20 * MIN, detail: '{"n":2}' },
            { kind: "OPENED", time: openTime, detail: '{"value":95.5}' },
            { kind: "REPEAT_DUE", time: openTime + 10 * MIN, detail: '{"n":1}' },
          ],
        );
        const i = await owner().getIncident({ name });
        assert.equal(i.name, `${p.projectName}/incidents/${row.id}`);
        assert.equal(i.rule, `${p.projectName}/alertRules/${row.rule_id}`);
        assert.equal(i.ruleVersion, "3");
        assert.equal(i.ruleDisplayName, "CPU high");
        assert.equal(i.severity, "WARNING");
        assert.equal(i.metricId, "filesystem_used_pct");
        assert.equal(i.operator, "GREATER_THAN");
        assert.equal(i.threshold, 90);
        assert.equal(i.vmName, p.vms[0]);
        assert.equal(i.mountpoint, "/var");
        assert.equal(i.state, "OPEN");
        assert.equal(i.openTimeUnix, BigInt(openTime / 1000));
        assert.equal(i.closeTimeUnix, 0n);
        assert.equal(i.firingValue, undefined);
        assert.equal(i.lastValue, 97);
        assert.equal(i.noData, true);
        assert.equal(i.evaluationError, false);
        assert.equal(i.acknowledgedBy, "");
        assert.equal(i.acknowledgeTimeUnix, 0n);
        assert.equal(i.snoozeUntilUnix, 0n);
        assert.equal(i.snoozedBy, "");
        assert.equal(i.nextNotifyTimeUnix, 0n);
        assert.deepEqual(
          i.events.map((e) => [e.kind, e.timeUnix, e.actor, e.detail]),
          [
            ["OPENED", BigInt(openTime / 1000), "evaluator", '{"value":95.5}'],
            ["REPEAT_DUE", BigInt((openTime + 10 * MIN) / 1000), "evaluator", '{"n":1}'],
            ["REPEAT_DUE", BigInt((openTime + 20 * MIN) / 1000), "evaluator", '{"n":2}'],
          ],
        );
      });

      it("refuses another project's incident with PROJECT_BOUNDARY and an unknown one with not_found", async () => {
        const theirs = await insertIncident(other);
        await rejectsWith(
          owner().getIncident({ name: theirs.name }),
          Code.PermissionDenied,
          "PROJECT_BOUNDARY",
        );
        await rejectsWith(
          owner().listIncidents({ projectName: other.projectName }),
          Code.PermissionDenied,
          "PROJECT_BOUNDARY",
        );
        // Their incident's id under our project's name is simply not there.
        const mine = incidentName(projectIdOf(p), theirs.row.id);
        await rejectsWith(owner().getIncident({ name: mine }), Code.NotFound, "NOT_FOUND");
        await rejectsWith(owner().acknowledgeIncident({ name: mine }), Code.NotFound, "NOT_FOUND");
        await rejectsWith(
          owner().acknowledgeIncident({ name: theirs.name }),
          Code.PermissionDenied,
          "PROJECT_BOUNDARY",
        );
        assert.equal((await rowOf(theirs.row.id)).ack_user_id, null);
      });

      it("refuses a malformed name, naming the field", async () => {
        const err = await rejectsWith(
          owner().getIncident({ name: `${p.projectName}/alertRules/x` }),
          Code.InvalidArgument,
          "INVALID_FIELD",
        );
        assert.match(err.message, /name:/);
      });
    });

    describe("AcknowledgeIncident", () => {
      it("records who and when with an ACKNOWLEDGED event and changes nothing else", async () => {
        const { row, name } = await insertIncident(p, {
          snooze_until: t.clock.now() + 60 * MIN,
          snooze_user_id: "someone",
        });
        t.clock.advance(1000);
        const ackAt = t.clock.now();
        const i = await owner().acknowledgeIncident({ name });
        assert.equal(i.acknowledgedBy, p.owner.user);
        assert.equal(i.acknowledgeTimeUnix, BigInt(ackAt / 1000));
        assert.deepEqual(
          i.events.map((e) => [e.kind, e.actor, e.timeUnix]),
          [["ACKNOWLEDGED", p.owner.user, BigInt(ackAt / 1000)]],
        );
        const after = await rowOf(row.id);
        assert.deepEqual(
          { ...after, ack_user_id: null, ack_time: null, update_time: row.update_time },
          row,
          "only the acknowledgement changed",
        );
        assert.equal(`users/${after.ack_user_id}`, p.owner.user);
        assert.equal(after.ack_time, ackAt);
      });

      it("keeps the first acknowledgement and writes no second event when acknowledged again", async () => {
        const { row, name } = await insertIncident(p);
        const first = await owner().acknowledgeIncident({ name });
        const editor = await member(p, "editor");
        t.clock.advance(5 * MIN);
        const again = await t.clients(editor.session).incidents.acknowledgeIncident({ name });
        assert.equal(again.acknowledgedBy, p.owner.user);
        assert.equal(again.acknowledgeTimeUnix, first.acknowledgeTimeUnix);
        assert.equal((await owner().acknowledgeIncident({ name })).events.length, 1);
        assert.equal((await eventsOf(row.id)).length, 1);
      });

      it("refuses a resolved or retired incident with INCIDENT_CLOSED, unless already acknowledged", async () => {
        for (const state of ["RESOLVED", "RETIRED"] as const) {
          const { name } = await insertIncident(p, { state, close_time: t.clock.now() });
          const err = await rejectsWith(
            owner().acknowledgeIncident({ name }),
            Code.FailedPrecondition,
            "INCIDENT_CLOSED",
          );
          assert.match(err.message, new RegExp(state));
          await rejectsWith(
            owner().snoozeIncident({ name, snoozeUntilUnix: BigInt((t.clock.now() + 60 * MIN) / 1000) }),
            Code.FailedPrecondition,
            "INCIDENT_CLOSED",
          );
        }
        const acked = await insertIncident(p);
        const first = await owner().acknowledgeIncident({ name: acked.name });
        await t.app.db.db
          .updateTable("incidents")
          .set({ state: "RESOLVED", close_time: t.clock.now() })
          .where("id", "=", acked.row.id)
          .execute();
        const retry = await owner().acknowledgeIncident({ name: acked.name });
        assert.equal(retry.acknowledgeTimeUnix, first.acknowledgeTimeUnix);
        assert.equal(retry.state, "RESOLVED");
      });
    });

    describe("human operations", () => {
      it("lets a service-account key list and get, but refuses it acknowledge, snooze and unsnooze (HUMAN_ONLY)", async () => {
        const { row, name } = await insertIncident(p);
        const o = t.clients(p.owner.session);
        const sa = await o.serviceAccounts.createServiceAccount({
          parent: p.projectName,
          displayName: "alerts bot",
          template: "Alert manager",
        });
        const { secret } = await o.keys.createKey({
          parent: sa.name,
          displayName: "k",
          capabilities: ["monitoring.read", "monitoring.write"],
          requestId: randomUUID(),
        });
        const c = t.clients(secret).incidents;
        const listed = await c.listIncidents({ projectName: p.projectName });
        assert.ok(listed.incidents.some((i) => i.name === name));
        assert.equal((await c.getIncident({ name })).name, name);
        const until = BigInt((t.clock.now() + 60 * MIN) / 1000);
        await rejectsWith(c.acknowledgeIncident({ name }), Code.PermissionDenied, "HUMAN_ONLY");
        await rejectsWith(
          c.snoozeIncident({ name, snoozeUntilUnix: until }),
          Code.PermissionDenied,
          "HUMAN_ONLY",
        );
        await rejectsWith(c.unsnoozeIncident({ name }), Code.PermissionDenied, "HUMAN_ONLY");
        const after = await rowOf(row.id);
        assert.equal(after.ack_user_id, null);
        assert.equal(after.snooze_until, null);
        assert.deepEqual(await eventsOf(row.id), []);
      });

      it("lets a viewer read but refuses acknowledge and snooze (CAPABILITY); an editor may", async () => {
        const { row, name } = await insertIncident(p);
        const viewer = t.clients((await member(p, "viewer")).session).incidents;
        assert.equal((await viewer.getIncident({ name })).name, name);
        const until = BigInt((t.clock.now() + 60 * MIN) / 1000);
        await rejectsWith(viewer.acknowledgeIncident({ name }), Code.PermissionDenied, "CAPABILITY");
        await rejectsWith(
          viewer.snoozeIncident({ name, snoozeUntilUnix: until }),
          Code.PermissionDenied,
          "CAPABILITY",
        );
        await rejectsWith(viewer.unsnoozeIncident({ name }), Code.PermissionDenied, "CAPABILITY");
        assert.deepEqual(await eventsOf(row.id), []);
        const editor = await member(p, "editor");
        const acked = await t.clients(editor.session).incidents.acknowledgeIncident({ name });
        assert.equal(acked.acknowledgedBy, editor.user);
      });
    });

    describe("SnoozeIncident and UnsnoozeIncident", () => {
      it("refuses a time that is not in the future or more than 30 days ahead, naming snoozeUntilUnix", async () => {
        const { row, name } = await insertIncident(p);
        const now = t.clock.now();
        for (const ms of [0, now - MIN, now, now + MAX_SNOOZE_MS + 1000]) {
          const err = await rejectsWith(
            owner().snoozeIncident({ name, snoozeUntilUnix: BigInt(Math.floor(ms / 1000)) }),
            Code.InvalidArgument,
            "INVALID_FIELD",
          );
          assert.match(err.message, /snoozeUntilUnix/);
        }
        await owner().snoozeIncident({ name, snoozeUntilUnix: BigInt((now + MAX_SNOOZE_MS) / 1000) });
        assert.equal((await rowOf(row.id)).snooze_until, now + MAX_SNOOZE_MS);
      });

      it("sets the snooze with a SNOOZED event and unsnooze clears it with an UNSNOOZED event; nothing else changes", async () => {
        const { row, name } = await insertIncident(p);
        const until = t.clock.now() + 2 * 60 * MIN;
        t.clock.advance(1000);
        const snoozed = await owner().snoozeIncident({ name, snoozeUntilUnix: BigInt(until / 1000) });
        assert.equal(snoozed.snoozeUntilUnix, BigInt(until / 1000));
        assert.equal(snoozed.snoozedBy, p.owner.user);
        assert.equal(snoozed.state, "OPEN");
        assert.equal(snoozed.nextNotifyTimeUnix, BigInt((row.next_notify_time ?? 0) / 1000));
        assert.deepEqual(
          snoozed.events.map((e) => [e.kind, e.actor, JSON.parse(e.detail)]),
          [["SNOOZED", p.owner.user, { snoozeUntilUnix: until / 1000 }]],
        );
        // The exact same snooze again is a retry: no second event.
        await owner().snoozeIncident({ name, snoozeUntilUnix: BigInt(until / 1000) });
        assert.equal((await eventsOf(row.id)).length, 1);

        t.clock.advance(1000);
        const cleared = await owner().unsnoozeIncident({ name });
        assert.equal(cleared.snoozeUntilUnix, 0n);
        assert.equal(cleared.snoozedBy, "");
        assert.deepEqual(
          cleared.events.map((e) => e.kind),
          ["SNOOZED", "UNSNOOZED"],
        );
        assert.deepEqual(JSON.parse(cleared.events[1].detail), { snoozeUntilUnix: until / 1000 });
        const after = await rowOf(row.id);
        assert.deepEqual({ ...after, update_time: row.update_time }, row, "back to the row as it was");
        // Unsnoozing what is not snoozed changes nothing.
        await owner().unsnoozeIncident({ name });
        assert.equal((await eventsOf(row.id)).length, 2);
      });
    });

    describe("purgeIncidentHistory()", () => {
      it("deletes only resolved and retired incidents closed before the retention, with their events", async () => {
        const s = await freshProject();
        const now = t.clock.now();
        const retention = 90 * DAY;
        const oldResolved = await insertIncident(
          s,
          { state: "RESOLVED", open_time: now - 100 * DAY, close_time: now - 91 * DAY },
          [{}, { kind: "RESOLVED", time: now - 91 * DAY }],
        );
        const oldRetired = await insertIncident(
          s,
          { state: "RETIRED", open_time: now - 100 * DAY, close_time: now - 95 * DAY },
          [{}, { kind: "RETIRED", time: now - 95 * DAY }],
        );
        const recent = await insertIncident(
          s,
          { state: "RESOLVED", open_time: now - 100 * DAY, close_time: now - 89 * DAY },
          [{}],
        );
        const oldOpen = await insertIncident(s, { open_time: now - 200 * DAY }, [{}]);
        const result = await purgeIncidentHistory(t.app.db.db, now, retention);
        assert.deepEqual(result, { incidents: 2, events: 4 });
        const left = await t.clients(s.owner.session).incidents.listIncidents({ projectName: s.projectName });
        assert.deepEqual(left.incidents.map((i) => i.name).sort(), [recent.name, oldOpen.name].sort());
        for (const gone of [oldResolved, oldRetired]) assert.deepEqual(await eventsOf(gone.row.id), []);
        assert.equal((await eventsOf(recent.row.id)).length, 1);
        assert.equal((await eventsOf(oldOpen.row.id)).length, 1);
        assert.deepEqual(await purgeIncidentHistory(t.app.db.db, now, retention), {
          incidents: 0,
          events: 0,
        });
      });
    });
  });
}
