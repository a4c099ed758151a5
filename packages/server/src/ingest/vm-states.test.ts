import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { parseVmName } from "../inventory/names.ts";
import { issueAgentToken } from "./credentials.ts";
import { VM_STATES_PATH } from "./vm-states.ts";

const [sqlite] = await testDialects();

describe("POST /v1/ingest/vm-states (the hypervisor collector's state changes)", () => {
  let t: TestApp;
  let p: SeededProject;
  before(async () => {
    t = await startTestApp(sqlite.dialect);
    p = await t.seedProject("states", ["vm-a", "vm-b"]);
  });
  after(() => t?.close());

  const post = (token: string | undefined, body: unknown) =>
    fetch(`${t.baseUrl}${VM_STATES_PATH}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...(token ? { Authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });
  const nowS = () => Math.floor(t.clock.now() / 1000);
  const events = async (vm: string) =>
    (await t.admin.vms.listVMStateEvents({ vm })).events.map((e) => [
      e.state,
      e.stopReason,
      Number(e.timeUnix),
    ]);

  it("records the collector's events in order with their observation times", async () => {
    const [a] = p.vms;
    const res = await post(t.app.config.collectorToken, {
      events: [
        { vm: a, state: "STOPPED", stopReason: "UNEXPECTED", timeUnix: nowS() - 60 },
        { vm: a, state: "RUNNING", stopReason: "", timeUnix: nowS() - 30 },
      ],
    });
    assert.equal(res.status, 204, await res.text());
    assert.deepEqual(await events(a), [
      ["STOPPED", "UNEXPECTED", nowS() - 60],
      ["RUNNING", "", nowS() - 30],
    ]);
    assert.equal((await t.admin.vms.getVM({ name: a })).state, "RUNNING");
  });

  it("refuses an unknown VM or a stop without a reason by item, keeping the rest (400, not to be retried)", async () => {
    const b = p.vms[1];
    const res = await post(t.app.config.collectorToken, {
      events: [
        { vm: "projects/states/locations/dc-1/vms/ghost", state: "RUNNING", timeUnix: nowS() },
        { vm: b, state: "STOPPED", stopReason: "", timeUnix: nowS() },
        { vm: b, state: "STOPPED", stopReason: "USER", timeUnix: nowS() },
      ],
    });
    assert.equal(res.status, 400);
    const text = await res.text();
    assert.match(text, /^accepted 1 events; refused 2: /);
    assert.match(text, /events\[0\].*ghost not found/);
    assert.match(text, /events\[1\].*stopReason/);
    assert.deepEqual(await events(b), [["STOPPED", "USER", nowS()]]);
  });

  it("takes only the collector token: 401 without or with a wrong one, 403 for a guest-agent token", async () => {
    const body = { events: [{ vm: p.vms[0], state: "RUNNING", timeUnix: nowS() }] };
    assert.equal((await post(undefined, body)).status, 401);
    const wrong = await post("svcc_wrong", body);
    assert.equal(wrong.status, 401);
    assert.doesNotMatch(await wrong.text(), /svcc_wrong/);
    const agent = await issueAgentToken(t.app.db.db, parseVmName(p.vms[0]), t.clock.now());
    assert.equal((await post(agent, body)).status, 403);
  });

  it("answers 422 naming the field for a body that is not a list of events", async () => {
    for (const body of [{}, { events: "x" }, []]) {
      const res = await post(t.app.config.collectorToken, body);
      assert.equal(res.status, 422);
      assert.match(await res.text(), /^events: must be an array/);
    }
    const res = await post(t.app.config.collectorToken, { events: [{ vm: 3 }] });
    assert.equal(res.status, 400);
    assert.match(await res.text(), /events\[0\]: needs vm and state/);
  });
});
