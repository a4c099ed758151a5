import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { before, describe, it } from "node:test";
import { SvcError } from "@svc/sdk";
import { testDialects } from "../../testing/dialects.ts";
import type { SeededProject, TestApp } from "../../testing/harness.ts";
import { type HttpsPeer, makeCertificate } from "../../testing/https-peer.ts";
import { notifyFixture } from "../../testing/notify-fixture.ts";

const S = 1000;
const tls = makeCertificate();

async function refusal(p: Promise<unknown>): Promise<SvcError> {
  try {
    await p;
  } catch (err) {
    return SvcError.fromError(err);
  }
  assert.fail("expected a refusal");
}

for (const { dialect, skip } of await testDialects()) {
  describe(`silences (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    let other: SeededProject;
    let peer: HttpsPeer;
    const projectId = "silent";
    const f = notifyFixture(dialect, { projectId, vmIds: ["vm-1", "vm-2"], tls });
    let vm1: string;
    let vm2: string;

    before(async () => {
      ({ t, p, peer } = f);
      other = await t.seedProject("elsewhere", ["vm-9"]);
      [vm1, vm2] = p.vms;
    });

    const owner = () => t.clients(p.owner.session);
    const nowS = () => BigInt(Math.floor(t.clock.ms / 1000));
    async function key(capabilities: string[]) {
      const k = await owner().keys.createKey({
        parent: p.projectName,
        displayName: capabilities.join("+"),
        capabilities,
        requestId: randomUUID(),
      });
      return t.clients(k.secret);
    }
    const cpu = (vm: string, fromMs: number, toMs: number, v: number) => f.cpu(vm, fromMs, toMs, v);
    async function rule(destination: string, repeatIntervalSeconds = 0) {
      return owner().alerts.saveAlertRule({
        projectName: p.projectName,
        id: randomUUID(),
        requestId: randomUUID(),
        expectedVersion: "0",
        spec: {
          displayName: "CPU high",
          metricId: "cpu_utilization_pct",
          operator: "GREATER_THAN",
          threshold: 90,
          sustainedSeconds: 0,
          severity: "CRITICAL",
          allVms: true,
          destinationNames: [destination],
          repeatIntervalSeconds,
        },
      });
    }
    async function webhook() {
      const d = await owner().destinations.createDestination({
        projectName: p.projectName,
        displayName: "ops",
        kind: "WEBHOOK",
        url: `${peer.url}/hooks`,
        requestId: randomUUID(),
      });
      return d.destination?.name ?? "";
    }
    const silenceCount = async () =>
      Number(
        (
          await t.app.db.db
            .selectFrom("silences")
            .select((eb) => eb.fn.countAll<number>().as("n"))
            .executeTakeFirstOrThrow()
        ).n,
      );

    it("read keys list silences; humans and silences.write keys create, edit and expire them; pending, active and expired are listed apart", async () => {
      const reader = await key(["monitoring.read"]);
      const writer = await key(["monitoring.read", "silences.write"]);
      const r = await rule((await webhook()) || "");
      const base = { projectName: p.projectName, comment: "planned reboot", ruleNames: [r.name] };
      const denied = await refusal(
        reader.silences.createSilence({
          ...base,
          requestId: randomUUID(),
          startTimeUnix: 0n,
          endTimeUnix: nowS() + 3600n,
        }),
      );
      assert.equal(denied.reason, "CAPABILITY");
      const pending = await owner().silences.createSilence({
        ...base,
        requestId: randomUUID(),
        startTimeUnix: nowS() + 3600n,
        endTimeUnix: nowS() + 7200n,
      });
      assert.equal(pending.state, "PENDING");
      assert.equal(pending.creator, p.owner.user);
      const req = {
        ...base,
        requestId: randomUUID(),
        vmNames: [vm2],
        startTimeUnix: 0n,
        endTimeUnix: nowS() + 600n,
      };
      const active = await writer.silences.createSilence(req);
      assert.equal(active.state, "ACTIVE");
      assert.match(active.creator, /^keys\//);
      assert.equal(active.startTimeUnix, nowS(), "a start of 0 is now");
      const again = await writer.silences.createSilence(req);
      assert.deepEqual([again.name, again.replayed], [active.name, true]);
      const edited = await writer.silences.updateSilence({
        name: active.name,
        expectedVersion: "1",
        startTimeUnix: 0n,
        endTimeUnix: nowS() + 1200n,
        comment: "longer reboot",
        ruleNames: [r.name],
        vmNames: [vm1, vm2],
      });
      assert.deepEqual(
        [edited.version, edited.endTimeUnix, edited.comment, edited.vmNames, edited.startTimeUnix],
        ["2", nowS() + 1200n, "longer reboot", [vm1, vm2].sort(), active.startTimeUnix],
      );
      const conflict = await refusal(
        writer.silences.updateSilence({ ...req, name: active.name, expectedVersion: "1" }),
      );
      assert.equal(conflict.reason, "VERSION_CONFLICT");
      const ended = await owner().silences.expireSilence({ name: pending.name });
      assert.equal(ended.state, "EXPIRED");
      assert.equal(ended.updatedBy, p.owner.user);
      const late = await refusal(
        owner().silences.updateSilence({ ...req, name: pending.name, endTimeUnix: nowS() + 99n }),
      );
      assert.equal(late.reason, "SILENCE_EXPIRED");
      const list = async (state: string) =>
        (await reader.silences.listSilences({ projectName: p.projectName, state })).silences.map(
          (s) => s.name,
        );
      assert.deepEqual(await list("ACTIVE"), [active.name]);
      assert.deepEqual(await list("EXPIRED"), [pending.name]);
      assert.deepEqual(await list("PENDING"), []);
      assert.equal((await list("")).length, 2);
      assert.equal((await reader.silences.getSilence({ name: active.name })).version, "2");
      const page = await reader.silences.listSilences({ projectName: p.projectName, pageSize: 1 });
      const rest = await reader.silences.listSilences({
        projectName: p.projectName,
        pageSize: 1,
        pageToken: page.nextPageToken ?? "",
      });
      assert.deepEqual(
        [...page.silences, ...rest.silences].map((s) => s.name).sort(),
        (await list("")).sort(),
      );
      await owner().silences.expireSilence({ name: active.name });
      await owner().alerts.deleteAlertRule({ name: r.name });
    });

    it("a monitoring.write key cannot mute anyone (CAPABILITY on create, edit and expire); a silences.write key may, for at most 24 hours; a person for 90 days", async () => {
      const r = await rule(await webhook());
      const ruleWriter = await key(["monitoring.read", "monitoring.write"]);
      const base = { projectName: p.projectName, comment: "deploy", ruleNames: [r.name], vmNames: [] };
      const before = await silenceCount();
      const long = { ...base, startTimeUnix: 0n, endTimeUnix: nowS() + 2n * 86_400n };
      const denied = await refusal(ruleWriter.silences.createSilence({ ...long, requestId: randomUUID() }));
      assert.deepEqual([denied.code, denied.reason], [7, "CAPABILITY"]);
      assert.equal(await silenceCount(), before, "nothing saved");
      const silencer = await key(["monitoring.read", "silences.write"]);
      // A key's silence is bounded: 24 hours, not the 90 days a person may choose.
      const tooLong = await refusal(silencer.silences.createSilence({ ...long, requestId: randomUUID() }));
      assert.deepEqual([tooLong.reason, tooLong.field], ["INVALID_FIELD", "endTimeUnix"]);
      assert.match(tooLong.message, /24 hours/);
      const day = await silencer.silences.createSilence({
        ...base,
        requestId: randomUUID(),
        startTimeUnix: 0n,
        endTimeUnix: nowS() + 86_400n,
      });
      assert.equal(day.state, "ACTIVE");
      const person = await owner().silences.createSilence({ ...long, requestId: randomUUID() });
      assert.equal(person.state, "ACTIVE");
      // Renewing past 24 hours is refused to the key too; editing or expiring needs silences.write.
      const renew = await refusal(
        silencer.silences.updateSilence({ ...long, name: day.name, expectedVersion: day.version }),
      );
      assert.equal(renew.field, "endTimeUnix");
      // One call at a time: a second refusal started early would reject before anything awaits it.
      for (const call of [
        () =>
          ruleWriter.silences.updateSilence({
            ...base,
            name: person.name,
            startTimeUnix: 0n,
            endTimeUnix: nowS() + 60n,
            expectedVersion: "",
          }),
        () => ruleWriter.silences.expireSilence({ name: person.name }),
      ])
        assert.equal((await refusal(call())).reason, "CAPABILITY");
      assert.equal((await silencer.silences.expireSilence({ name: person.name })).state, "EXPIRED");
      await silencer.silences.expireSilence({ name: day.name });
      await owner().alerts.deleteAlertRule({ name: r.name });
    });

    it("bad input is a 400 naming the field, and nothing is saved", async () => {
      const r = await rule(await webhook());
      const before = await silenceCount();
      const ok = {
        projectName: p.projectName,
        comment: "x",
        ruleNames: [r.name],
        vmNames: [] as string[],
        startTimeUnix: nowS() + 600n,
        endTimeUnix: nowS() + 1200n,
      };
      const cases: [string, Partial<typeof ok>, string][] = [
        ["ends before it starts", { endTimeUnix: nowS() + 300n }, "endTimeUnix"],
        ["no end", { endTimeUnix: 0n }, "endTimeUnix"],
        ["longer than 90 days", { endTimeUnix: nowS() + 91n * 86_400n }, "endTimeUnix"],
        ["matchers naming nothing", { ruleNames: [], vmNames: [] }, "ruleNames"],
        ["an unknown rule", { ruleNames: [`${p.projectName}/alertRules/${randomUUID()}`] }, "ruleNames[0]"],
        ["a malformed rule name", { ruleNames: ["cpu-high"] }, "ruleNames[0]"],
        ["a VM of another project", { ruleNames: [], vmNames: [other.vms[0]] }, "vmNames[0]"],
        [
          "an unknown VM",
          { ruleNames: [], vmNames: [`${p.projectName}/locations/dc-1/vms/nope`] },
          "vmNames[0]",
        ],
        ["no comment", { comment: "  " }, "comment"],
      ];
      for (const [name, over, field] of cases) {
        const e = await refusal(owner().silences.createSilence({ ...ok, ...over, requestId: randomUUID() }));
        assert.deepEqual([e.code, e.reason, e.field], [3, "INVALID_FIELD", field], name);
      }
      assert.equal(await silenceCount(), before, "nothing saved");
      await owner().alerts.deleteAlertRule({ name: r.name });
    });

    it("a silence created before an episode skips its notifications (SILENCED, in the delivery history) while evaluation and the incident go on; the incident page names it; after it expires notifications flow", async () => {
      const d = await webhook();
      const r = await rule(d, 60);
      const t0 = t.clock.ms + 3600 * S;
      t.clock.ms = t0;
      // Only vm-1 is muted; vm-2 still notifies.
      const s = await owner().silences.createSilence({
        projectName: p.projectName,
        requestId: randomUUID(),
        comment: "load test on vm-1",
        ruleNames: [r.name],
        vmNames: [vm1],
        startTimeUnix: 0n,
        endTimeUnix: nowS() + 600n,
      });
      await cpu(vm1, t0 - 60 * S, t0 + 900 * S, 97);
      await cpu(vm2, t0 - 60 * S, t0 + 30 * S, 97);
      await t.app.evaluator.runCycle(t0);
      await t.app.dispatcher.runOnce(t0);
      const incidents = (await owner().incidents.listIncidents({ projectName: p.projectName, rule: r.name }))
        .incidents;
      const muted = incidents.find((i) => i.vmName === vm1);
      assert.equal(muted?.state, "OPEN", "the incident opens all the same");
      assert.equal(peer.received.length, 1, "only vm-2's opening is sent");
      assert.match(JSON.parse(peer.received[0].body.toString()).incident.name, /incidents/);
      assert.equal(JSON.parse(peer.received[0].body.toString()).vm.name, vm2);
      const got = await owner().incidents.getIncident({ name: muted?.name ?? "" });
      assert.deepEqual(got.silencedBy, [s.name]);
      const history = async () =>
        (await owner().destinations.listDeliveries({ projectName: p.projectName, incident: muted?.name }))
          .deliveries;
      const [skipped] = await history();
      assert.deepEqual([skipped.state, skipped.skipReason], ["SKIPPED", "SILENCED"]);
      assert.match(skipped.attempts[0].detail, new RegExp(`SILENCED: muted by ${s.name}`));
      // A repeat inside the window is skipped too.
      t.clock.ms = t0 + 120 * S;
      await t.app.evaluator.runCycle(t.clock.ms);
      await t.app.dispatcher.runOnce(t.clock.ms);
      assert.equal(peer.received.filter((x) => x.body.includes(vm1)).length, 0);
      assert.ok((await history()).every((x) => x.skipReason === "SILENCED"));
      // Expired early: the next repeat goes out.
      await owner().silences.expireSilence({ name: s.name });
      assert.deepEqual((await owner().incidents.getIncident({ name: muted?.name ?? "" })).silencedBy, []);
      t.clock.ms = t0 + 240 * S;
      await t.app.evaluator.runCycle(t.clock.ms);
      await t.app.dispatcher.runOnce(t.clock.ms);
      assert.equal(
        peer.received.filter((x) => JSON.parse(x.body.toString()).vm.name === vm1).length,
        1,
        "notified again once the silence expired",
      );
      await owner().alerts.deleteAlertRule({ name: r.name });
      await owner().destinations.deleteDestination({ name: d });
      await t.app.dispatcher.runOnce(t.clock.ms);
    });

    /**
     * One rule for every ordering (docs/alerts.md#silences): a message is muted when a matching silence is
     * active at the moment it would be sent, whatever it is and whatever was sent before; and what the API
     * says (`silencedBy` of GetIncident and ListIncidents) at that moment is the same answer.
     */
    const steps = ["incident.opened", "incident.repeat", "incident.repeat", "incident.resolved"] as const;
    const orderings: { name: string; window: [number, number]; muted: boolean[] }[] = [
      { name: "silence before the incident opens", window: [-10, 3600], muted: [true, true, true, true] },
      { name: "silence starting while it fires", window: [30, 3600], muted: [false, true, true, true] },
      {
        name: "silence starting just before it resolves",
        window: [150, 3600],
        muted: [false, false, false, true],
      },
      { name: "silence expiring mid-incident", window: [-10, 90], muted: [true, true, false, false] },
      {
        name: "silence starting after it resolved",
        window: [200, 3600],
        muted: [false, false, false, false],
      },
    ];
    for (const o of orderings)
      it(`one silence rule for every ordering: ${o.name}`, async () => {
        const d = await webhook();
        const r = await rule(d, 60);
        const t0 = t.clock.ms + 3600 * S;
        t.clock.ms = t0 - 20 * S;
        const s = await owner().silences.createSilence({
          projectName: p.projectName,
          requestId: randomUUID(),
          comment: o.name,
          ruleNames: [r.name],
          vmNames: [vm1],
          startTimeUnix: BigInt((t0 + o.window[0] * S) / S),
          endTimeUnix: BigInt((t0 + o.window[1] * S) / S),
        });
        // Fires at t0, repeats at +61 s and +122 s, resolves at +183 s.
        await cpu(vm1, t0 - 60 * S, t0 + 150 * S, 97);
        await cpu(vm1, t0 + 150 * S, t0 + 240 * S, 5);
        const ours = () =>
          peer.received
            .map((x) => JSON.parse(x.body.toString()) as { type: string; rule: { name: string } })
            .filter((b) => b.rule.name === r.name)
            .map((b) => b.type);
        const sent: string[] = [];
        for (const [k, at] of [0, 61, 122, 183].entries()) {
          t.clock.ms = t0 + at * S;
          await t.app.evaluator.runCycle(t.clock.ms);
          await t.app.dispatcher.runOnce(t.clock.ms);
          const [inc] = (await owner().incidents.listIncidents({ projectName: p.projectName, rule: r.name }))
            .incidents;
          const want = o.muted[k] ? [s.name] : [];
          const step = `${o.name}, ${steps[k]} at +${at} s`;
          assert.deepEqual(inc.silencedBy, want, `${step}: ListIncidents`);
          assert.deepEqual((await owner().incidents.getIncident({ name: inc.name })).silencedBy, want, step);
          if (!o.muted[k]) sent.push(steps[k]);
          assert.deepEqual(ours(), sent, `${step}: what reached the receiver`);
          const { deliveries } = await owner().destinations.listDeliveries({
            projectName: p.projectName,
            incident: inc.name,
          });
          const latest = deliveries.find(
            (x) => x.eventType === steps[k] && Number(x.createTimeUnix) * S === t.clock.ms,
          );
          assert.deepEqual(
            [latest?.state, latest?.skipReason],
            o.muted[k] ? ["SKIPPED", "SILENCED"] : ["SENT", ""],
            `${step}: the delivery`,
          );
        }
        await owner().alerts.deleteAlertRule({ name: r.name });
        await owner().destinations.deleteDestination({ name: d });
        await t.app.dispatcher.runOnce(t.clock.ms);
      });
  });
}
