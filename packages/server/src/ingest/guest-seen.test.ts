import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { parseVmName } from "../inventory/names.ts";
import { createGuestSeen, guestSenderName, SEEN_WRITE_MS } from "./guest-seen.ts";

describe("the guest sender's name", () => {
  it("is one of a fixed set, from the path and the User-Agent, never the header's text", () => {
    assert.equal(guestSenderName("svc-agent", "anything"), "svc-agent");
    assert.equal(guestSenderName("node_exporter", "vmagent"), "node_exporter via vmagent");
    assert.equal(guestSenderName("node_exporter", "Prometheus/3.5.0"), "node_exporter via Prometheus");
    assert.equal(
      guestSenderName("node_exporter", "Alloy/v1.9.1 (linux; deb)"),
      "node_exporter via Grafana Alloy",
    );
    assert.equal(guestSenderName("node_exporter", "<script>x</script>"), "node_exporter via remote write");
    assert.equal(guestSenderName("node_exporter", undefined), "node_exporter via remote write");
    assert.equal(
      guestSenderName("otlp", "OpenTelemetry Collector Contrib/0.120.0 (linux/amd64)"),
      "OpenTelemetry Collector (OTLP)",
    );
    assert.equal(guestSenderName("otlp", "OTel-OTLP-Exporter-Go/1.35.0"), "OpenTelemetry Go SDK (OTLP)");
    assert.equal(guestSenderName("otlp", "curl/8.0"), "OpenTelemetry (OTLP)");
  });
});

for (const { dialect, skip } of await testDialects()) {
  describe(`the VM's guest sender on its row (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    before(async () => {
      t = await startTestApp(dialect);
      p = await t.seedProject("gsend", ["vm-a", "vm-b"]);
    });
    after(() => t?.close());

    const shown = async (vm: string) =>
      (
        await t.clients(p.owner.session).monitoring.listVMMonitoring({
          projectName: p.projectName,
          inventoryOnly: true,
        })
      ).vms.find((v) => v.name === vm)?.guestSender;
    const fail = (err: unknown) => assert.fail(String(err));

    it("is absent before any sender, then named with when it was seen; rewritten every 10 s or on a change", async () => {
      const seen = createGuestSeen(t.app.db.db);
      const vm = parseVmName(p.vms[0]!);
      assert.equal(await shown(p.vms[0]!), undefined, "no sender yet: absent, not an empty name");
      const t0 = 1_800_000_000_000;
      await seen.record(vm, "node_exporter via vmagent", t0, fail);
      assert.deepEqual(
        { name: (await shown(p.vms[0]!))?.name, at: (await shown(p.vms[0]!))?.lastSeenUnix },
        { name: "node_exporter via vmagent", at: BigInt(t0 / 1000) },
      );
      // Within 10 s the same sender costs no write…
      await seen.record(vm, "node_exporter via vmagent", t0 + SEEN_WRITE_MS - 1000, fail);
      assert.equal((await shown(p.vms[0]!))?.lastSeenUnix, BigInt(t0 / 1000));
      // …after it, the time moves; another sender is written at once.
      await seen.record(vm, "node_exporter via vmagent", t0 + SEEN_WRITE_MS, fail);
      assert.equal((await shown(p.vms[0]!))?.lastSeenUnix, BigInt((t0 + SEEN_WRITE_MS) / 1000));
      await seen.record(vm, "OpenTelemetry Collector (OTLP)", t0 + SEEN_WRITE_MS + 1000, fail);
      assert.equal((await shown(p.vms[0]!))?.name, "OpenTelemetry Collector (OTLP)");
      assert.equal(await shown(p.vms[1]!), undefined, "another VM is untouched");
      // Every replica reads it from the row: a second tracker (another replica) sees the same.
      const other = createGuestSeen(t.app.db.db);
      await other.record(vm, "svc-agent", t0 + SEEN_WRITE_MS + 2000, fail);
      assert.equal((await shown(p.vms[0]!))?.name, "svc-agent");
    });
  });
}
