import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@svc/sdk/gen/google/rpc/error_details_pb";
import { buildAgentPackage } from "../../testing/agent-package.ts";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { pushAll, rwSeries } from "../../testing/remote-write.ts";

const [sqlite] = await testDialects();
const S = 1000;

async function refusal(p: Promise<unknown>): Promise<{ code: string; reason?: string }> {
  try {
    await p;
  } catch (e) {
    const err = ConnectError.from(e);
    return { code: Code[err.code], reason: err.findDetails(ErrorInfoSchema)[0]?.reason };
  }
  assert.fail("expected a refusal");
}

describe("expanded guest monitoring opt-in", () => {
  let t: TestApp;
  let p: SeededProject;
  let nowMs: number;
  before(async () => {
    t = await startTestApp(sqlite.dialect, { agentPackageDir: buildAgentPackage() });
    p = await t.seedProject("opt", ["vm-a"]);
    nowMs = t.clock.now();
  });
  after(() => t?.close());

  const agentTokens = () =>
    t.app.db.db.selectFrom("agent_tokens").select("id").where("project_id", "=", "opt").execute();
  const query = (token: string) =>
    t.clients(token).monitoring.queryVMMonitoring({
      name: p.vms[0],
      metricIds: ["filesystem_used_pct", "memory_available_bytes"],
      startTimeUnix: BigInt(nowMs / S - 600),
      endTimeUnix: BigInt(nowMs / S),
      stepSeconds: 30,
    });

  it("reading a BASELINE VM's monitoring installs nothing and says why expanded metrics are absent", async () => {
    const r = await query(p.owner.session);
    assert.deepEqual(
      r.quality?.errors.map((e) => [e.metricId, e.reason]),
      // Filesystems are baseline too (the hypervisor collector reads them through the QEMU guest agent).
      [["memory_available_bytes", "EXPANDED_MONITORING_REQUIRED"]],
    );
    assert.match(r.quality?.errors[0].message ?? "", /BASELINE/);
    assert.equal((await agentTokens()).length, 0);
    const vm = await t.admin.vms.getVM({ name: p.vms[0] });
    assert.equal(vm.monitoringLevel, "BASELINE");
    assert.equal(vm.state, "RUNNING");
  });

  it("is refused to keys, outside DC-1 and for unsupported distributions", async () => {
    const key = await t.clients(p.owner.session).keys.createKey({
      parent: p.projectName,
      displayName: "auto",
      capabilities: ["monitoring.read", "monitoring.write"],
      requestId: randomUUID(),
    });
    assert.ok(key.secret);
    assert.deepEqual(
      await refusal(t.clients(key.secret).monitoring.enableExpandedMonitoring({ name: p.vms[0] })),
      { code: "PermissionDenied", reason: "HUMAN_ONLY" },
    );
    for (const [vmId, location, distribution] of [
      ["far", "dc-2", "debian-12"],
      ["win", "dc-1", "windows-2022"],
    ]) {
      const vm = await t.admin.vms.createVM({
        parent: p.projectName,
        vmId,
        location,
        distribution,
        vcpus: 1,
        memoryBytes: 1n << 30n,
      });
      assert.deepEqual(
        await refusal(t.clients(p.owner.session).monitoring.enableExpandedMonitoring({ name: vm.name })),
        { code: "FailedPrecondition", reason: "EXPANDED_UNAVAILABLE" },
      );
    }
  });

  it("returns the install command and token once; the agent's filesystem metrics are then served", async () => {
    const res = await t.clients(p.owner.session).monitoring.enableExpandedMonitoring({ name: p.vms[0] });
    assert.equal(res.vm?.monitoringLevel, "EXPANDED");
    assert.match(res.agentToken, /^svca_/);
    assert.equal(res.installCommand.includes(res.agentToken), false, "the command holds no secret");
    // Fetch the published package, check its SHA-256, install it, write server and VM, read the token.
    const pkg = t.app.config.agentPackageDir;
    const sums = readFileSync(join(pkg, "SHA256SUMS"), "utf8").split(/\s+/);
    assert.ok(res.installCommand.includes(`${t.app.config.baseUrl ?? ""}`));
    assert.match(
      res.installCommand,
      new RegExp(`curl -fsSLo /tmp/${sums[1]} \\S+/v1/agent/packages/${sums[1]}`),
    );
    assert.ok(res.installCommand.includes(`echo '${sums[0]}  /tmp/${sums[1]}' | sha256sum -c -`));
    assert.match(res.installCommand, /SVC_AGENT_VM=%s.*'projects\/opt\/locations\/dc-1\/vms\/vm-a'/);
    assert.match(res.installCommand, /read -rs SVC_AGENT_TOKEN/);
    const samples = (v: number) =>
      Array.from({ length: 10 }, (_, i) => [nowMs - (9 - i) * 30 * S, v] as [number, number]);
    const fs = { vm: p.vms[0], mountpoint: "/", fstype: "ext4", device: "/dev/vda1" };
    // An agent before available bytes were sent: used ÷ size, as it always was.
    const old = { vm: p.vms[0], mountpoint: "/srv", fstype: "ext4", device: "/dev/vdb" };
    await pushAll(t.baseUrl, res.agentToken, [
      // 1000 bytes, 250 used, 75 reserved for root: df shows Avail 675 and Use% 250 ÷ 925 = 27 %.
      rwSeries("svc_vm_filesystem_used_bytes", fs, samples(250)),
      rwSeries("svc_vm_filesystem_size_bytes", fs, samples(1000)),
      rwSeries("svc_vm_filesystem_avail_bytes", fs, samples(675)),
      rwSeries("svc_vm_filesystem_used_bytes", old, samples(250)),
      rwSeries("svc_vm_filesystem_size_bytes", old, samples(1000)),
      rwSeries("svc_vm_memory_available_bytes", { vm: p.vms[0] }, samples(2048)),
    ]);
    const r = await query(p.owner.session);
    assert.deepEqual(r.quality?.errors, []);
    const pcts = r.series.filter((s) => s.metricId === "filesystem_used_pct");
    assert.deepEqual(
      pcts.map((s) => [s.source, s.labels.mountpoint, s.labels.device, s.labels.fstype]),
      [
        ["GUEST_AGENT", "/", "/dev/vda1", "ext4"],
        ["GUEST_AGENT", "/srv", "/dev/vdb", "ext4"],
      ],
    );
    const [pct, oldPct] = pcts;
    assert.ok(pct.points.length > 0 && pct.points.every((pt) => pt.value === (100 * 250) / 925));
    assert.ok(oldPct.points.length > 0 && oldPct.points.every((pt) => pt.value === 25));
    // A second call issues a new token; the first works until the new one is used (docs/agent.md).
    const again = await t.clients(p.owner.session).monitoring.enableExpandedMonitoring({ name: p.vms[0] });
    assert.notEqual(again.agentToken, res.agentToken);
    await pushAll(t.baseUrl, res.agentToken, []);
    await pushAll(t.baseUrl, again.agentToken, []);
    await assert.rejects(pushAll(t.baseUrl, res.agentToken, []), /401/);
  });

  it("is refused, changing nothing, when the server publishes no agent package", async () => {
    const bare = await startTestApp(sqlite.dialect);
    try {
      const q = await bare.seedProject("nopkg", ["vm-a"]);
      assert.deepEqual(
        await refusal(bare.clients(q.owner.session).monitoring.enableExpandedMonitoring({ name: q.vms[0] })),
        { code: "FailedPrecondition", reason: "EXPANDED_UNAVAILABLE" },
      );
      const list = await bare
        .clients(q.owner.session)
        .monitoring.listVMMonitoring({ projectName: q.projectName, inventoryOnly: true });
      assert.equal(list.vms[0].monitoringLevel, "BASELINE");
    } finally {
      await bare.close();
    }
  });
});
