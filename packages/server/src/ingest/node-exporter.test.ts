import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { pushRemoteWrite } from "@svc/remotewrite";
import { buildAgentPackage } from "../../testing/agent-package.ts";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { rwSeries } from "../../testing/remote-write.ts";
import { generateSecret } from "../iam/secrets.ts";
import type { SeriesData } from "../storage/interface.ts";

/**
 * What svc answers a guest-agent token's remote write of node_exporter's series it cannot take whole:
 * unknown series, an exploding label set, another VM's series, an unknown token. (The real senders,
 * node_exporter scraped by vmagent and by Prometheus in agent mode, run in the Debian 12 root:
 * test/node-exporter-senders.test.ts.)
 */
const [sqlite] = await testDialects();
const S = 1000;

describe("node_exporter's series by remote write that svc refuses", () => {
  let t: TestApp;
  let p: SeededProject;
  const tokens: string[] = [];
  before(async () => {
    t = await startTestApp(sqlite.dialect, { agentPackageDir: buildAgentPackage() }, { wallClock: true });
    p = await t.seedProject("nxp", ["via-vmagent", "via-prom", "other"]);
    for (const vm of p.vms) {
      const r = await t.clients(p.owner.session).monitoring.enableExpandedMonitoring({ name: vm });
      tokens.push(r.agentToken);
    }
  });
  after(async () => {
    await t?.close();
  });

  const read = (vm: string, name: string, fromMs: number): Promise<SeriesData[]> =>
    t.app.metrics.select(
      "nxp",
      [
        { type: "=", name: "__name__", value: name },
        { type: "=", name: "vm", value: vm },
      ],
      fromMs,
      Date.now(),
    );

  it("refuses unknown series and exploding interfaces with reasons, stores the valid rest", async () => {
    const vm = p.vms[2]!;
    const now = Date.now();
    const url = `${t.baseUrl}/v1/ingest/prometheus/api/v1/write`;
    const nics = Array.from({ length: 40 }, (_, i) =>
      rwSeries("node_network_receive_bytes_total", { device: `eth${i}`, instance: "x:9100" }, [
        [now, 1000 + i],
      ]),
    );
    const res = await pushRemoteWrite(url, tokens[2]!, {
      timeseries: [
        rwSeries("node_memory_MemTotal_bytes", { instance: "elsewhere:9100", job: "node" }, [[now, 4096]]),
        rwSeries("node_memory_MemFree_bytes", { instance: "elsewhere:9100", job: "node" }, [[now, 1024]]),
        rwSeries("node_load1", { instance: "x:9100" }, [[now, 0.5]]),
        rwSeries("node_network_receive_bytes_total", { device: "lo" }, [[now, 5]]),
        // svc's own series beside node_exporter's, as svc's agent would send them.
        rwSeries("svc_vm_memory_cached_bytes", { vm }, [[now, 512]]),
        ...nics,
      ],
      metadata: [],
    });
    assert.equal(res.status, 400, res.body);
    assert.match(res.body, /unknown_metric: 1 series, 1 samples/);
    assert.match(res.body, /"node_load1" is not a svc VM metric/);
    assert.match(res.body, /too_many_series: 8 series/);
    assert.match(res.body, /more than 32 network devices from one VM/);
    assert.equal(
      (await read(vm, "svc_vm_memory_used_bytes", now - S))[0]?.values[0],
      3072,
      "the valid rest is stored, used derived",
    );
    assert.equal((await read(vm, "svc_vm_guest_network_receive_bytes_total", now - S)).length, 32);
    assert.equal((await read(vm, "svc_vm_memory_cached_bytes", now - S))[0]?.values[0], 512);
    assert.equal((await read(vm, "node_load1", now - S)).length, 0);
    // Another VM's token writes only its own VM: the memory above landed on the token's VM, never the other's.
    assert.equal(
      (await read(p.vms[0]!, "svc_vm_memory_total_bytes", now - S)).some((s) => s.values.includes(4096)),
      false,
    );
    const theirs = await pushRemoteWrite(url, tokens[2]!, {
      timeseries: [rwSeries("svc_vm_memory_total_bytes", { vm: p.vms[0]! }, [[now, 1]])],
      metadata: [],
    });
    assert.equal(theirs.status, 400);
    assert.match(theirs.body, /not_permitted: 1 series.*a guest agent writes only its own VM/);
    const stranger = generateSecret("agent");
    const unknown = await pushRemoteWrite(url, stranger, { timeseries: [], metadata: [] });
    assert.equal(unknown.status, 401);
    assert.match(unknown.body, /unknown or revoked/);
    assert.equal(unknown.body.includes(stranger), false, "the token is never echoed");
  });
});
