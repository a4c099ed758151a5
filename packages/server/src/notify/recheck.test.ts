import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { DestinationTable, SilenceTable } from "../db/schema.ts";
import { type IncidentState, type RecheckState, recheck } from "./recheck.ts";

const at = Date.UTC(2026, 10, 28, 12);
const H = 3_600_000;

const dest: DestinationTable = {
  id: "dst-1",
  project_id: "p1",
  kind: "WEBHOOK",
  display_name: "hook",
  paused: 0,
  url_display: "https://hooks.example/x",
  sealed_url: "sealed",
  sealed_key: "",
  create_time: at - 24 * H,
  update_time: at - 24 * H,
  delete_time: null,
  creator: "users/u1",
  unconfirmed_by: "",
};
const open: IncidentState = {
  state: "OPEN",
  snooze_until: null,
  rule_id: "r1",
  vm_name: "projects/p1/vms/web-1",
  destinations: new Set(["dst-1"]),
};
function silence(over: Partial<SilenceTable> = {}): SilenceTable {
  return {
    id: "s1",
    project_id: "p1",
    start_time: at - H,
    end_time: at + H,
    comment: "deploy",
    rule_ids: "[]",
    vm_names: "[]",
    creator: "users/u1",
    updated_by: "users/u1",
    version: 1,
    create_time: at - H,
    update_time: at - H,
    ...over,
  };
}
const delivery = {
  incident_id: "i1" as string | null,
  event_type: "incident.opened",
  expire_time: at + 24 * H,
  destination_id: "dst-1",
};
const state = (over: Partial<RecheckState> = {}, inc: IncidentState | null = open): RecheckState => ({
  dest,
  silences: [],
  incidents: new Map([["i1", inc]]),
  ...over,
});

describe("recheck", () => {
  // [what, delivery changes, state, the skip reason (undefined: sent)]
  const table: [string, Partial<typeof delivery>, RecheckState, string | undefined][] = [
    ["an open incident's opening is sent", {}, state(), undefined],
    ["the destination row is gone", {}, state({ dest: undefined }), "DESTINATION_DELETED"],
    [
      "the destination was deleted",
      {},
      state({ dest: { ...dest, delete_time: at - 1 } }),
      "DESTINATION_DELETED",
    ],
    [
      "deleted beats paused",
      {},
      state({ dest: { ...dest, delete_time: at, paused: 1 } }),
      "DESTINATION_DELETED",
    ],
    ["the destination is paused", {}, state({ dest: { ...dest, paused: 1 } }), "DESTINATION_PAUSED"],
    [
      "a key set the URL and no person confirmed it",
      {},
      state({ dest: { ...dest, unconfirmed_by: "keys/k1" } }),
      "DESTINATION_UNCONFIRMED",
    ],
    ["past its expiry", { expire_time: at - 1 }, state(), "EXPIRED"],
    ["at its expiry it is still sent", { expire_time: at }, state(), undefined],
    [
      "paused beats expired",
      { expire_time: at - 1 },
      state({ dest: { ...dest, paused: 1 } }),
      "DESTINATION_PAUSED",
    ],
    ["the incident row is gone", {}, state({}, null), "INCIDENT_GONE"],
    ["the incident was not read", {}, state({ incidents: new Map() }), "INCIDENT_GONE"],
    ["an opening after recovery", {}, state({}, { ...open, state: "RESOLVED" }), "INCIDENT_RECOVERED"],
    [
      "a repeat after recovery",
      { event_type: "incident.repeat" },
      state({}, { ...open, state: "RESOLVED" }),
      "INCIDENT_RECOVERED",
    ],
    [
      "an acknowledgement after recovery",
      { event_type: "incident.acknowledged" },
      state({}, { ...open, state: "RESOLVED" }),
      "INCIDENT_RECOVERED",
    ],
    [
      "the resolution itself is sent",
      { event_type: "incident.resolved" },
      state({}, { ...open, state: "RESOLVED" }),
      undefined,
    ],
    ["an opening after retirement", {}, state({}, { ...open, state: "RETIRED" }), "INCIDENT_RETIRED"],
    [
      "the retirement itself is sent",
      { event_type: "incident.retired" },
      state({}, { ...open, state: "RETIRED" }),
      undefined,
    ],
    [
      "the rule no longer names the destination",
      {},
      state({}, { ...open, destinations: new Set(["dst-2"]) }),
      "DESTINATION_NOT_IN_RULE",
    ],
    [
      "not in the rule, even for a resolution",
      { event_type: "incident.resolved" },
      state({}, { ...open, state: "RESOLVED", destinations: new Set() }),
      "DESTINATION_NOT_IN_RULE",
    ],
    ["the rule row is gone: no rule check", {}, state({}, { ...open, destinations: null }), undefined],
    ["a silence of every rule and VM", {}, state({ silences: [silence()] }), "SILENCED"],
    [
      "a silence mutes the resolution too",
      { event_type: "incident.resolved" },
      state({ silences: [silence()] }, { ...open, state: "RESOLVED" }),
      "SILENCED",
    ],
    ["a silence of another rule", {}, state({ silences: [silence({ rule_ids: '["r2"]' })] }), undefined],
    ["a silence of the rule", {}, state({ silences: [silence({ rule_ids: '["r1"]' })] }), "SILENCED"],
    [
      "a silence of another VM",
      {},
      state({ silences: [silence({ vm_names: '["projects/p1/vms/db-1"]' })] }),
      undefined,
    ],
    ["a silence that ended", {}, state({ silences: [silence({ end_time: at })] }), undefined],
    ["a silence not yet begun", {}, state({ silences: [silence({ start_time: at + 1 })] }), undefined],
    ["snoozed", {}, state({}, { ...open, snooze_until: at + H }), "INCIDENT_SNOOZED"],
    ["a snooze that ended", {}, state({}, { ...open, snooze_until: at }), undefined],
    [
      "silenced beats snoozed",
      {},
      state({ silences: [silence()] }, { ...open, snooze_until: at + H }),
      "SILENCED",
    ],
    [
      "a test send has no incident",
      { incident_id: null, event_type: "test" },
      state({ incidents: new Map(), silences: [silence()] }),
      undefined,
    ],
    [
      "a test send still honours the destination",
      { incident_id: null, event_type: "test" },
      state({ dest: { ...dest, paused: 1 } }),
      "DESTINATION_PAUSED",
    ],
  ];
  for (const [what, over, st, reason] of table)
    it(what, () => {
      assert.equal(recheck({ ...delivery, ...over }, st, at)?.reason, reason);
    });

  it("the skip says why: the silence's name and end, the snooze's end", () => {
    assert.deepEqual(recheck(delivery, state({ silences: [silence()] }), at), {
      status: "SKIPPED",
      reason: "SILENCED",
      detail: `muted by projects/p1/silences/s1 until ${new Date(at + H).toISOString()}`,
    });
    assert.equal(
      recheck(delivery, state({}, { ...open, snooze_until: at + H }), at)?.detail,
      `notifications are snoozed until ${new Date(at + H).toISOString()}`,
    );
  });

  it("of two silences, the oldest is named", () => {
    const older = silence({ id: "s0", create_time: at - 2 * H });
    assert.match(
      recheck(delivery, state({ silences: [silence(), older] }), at)?.detail ?? "",
      /silences\/s0 /,
    );
  });
});
