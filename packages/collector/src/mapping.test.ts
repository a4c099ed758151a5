import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { TimeSeries } from "@svc/remotewrite";
import { vmNameFromMetadata } from "./identity.ts";
import type { TypedValue } from "./libvirt/remote.ts";
import { mapDomainStats, mapGuestFilesystems, mapState } from "./mapping.ts";

const VM = "projects/acme/locations/dc-1/vms/web-1";
const T = 1_800_000_000_000;

function flat(series: TimeSeries[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of series) {
    const name = s.labels.find((l) => l.name === "__name__")?.value;
    const dev = s.labels
      .filter((l) => ["device", "interface", "mountpoint"].includes(l.name))
      .map((l) => l.value);
    assert.ok(s.labels.some((l) => l.name === "vm" && l.value === VM));
    assert.deepEqual(
      s.samples.map((x) => x.timestampMs),
      [T],
    );
    out[[name, ...dev].join("/")] = s.samples[0].value;
  }
  return out;
}

const running: [string, TypedValue][] = [
  ["state.state", 1],
  ["state.reason", 1],
  ["cpu.time", 12_500_000_000n],
  ["vcpu.current", 2],
  ["balloon.current", 1048576n],
  ["balloon.available", 1000000n],
  ["balloon.unused", 400000n],
  ["balloon.disk_caches", 100000n],
  ["block.count", 1],
  ["block.0.name", "vda"],
  ["block.0.rd.bytes", 4096n],
  ["block.0.wr.bytes", 8192n],
  ["block.0.rd.reqs", 1n],
  ["block.0.wr.reqs", 2n],
  ["net.count", 1],
  ["net.0.name", "vnet0"],
  ["net.0.rx.bytes", 100n],
  ["net.0.tx.bytes", 200n],
  ["net.0.rx.pkts", 3n],
  ["net.0.tx.pkts", 4n],
];

describe("libvirt fields → svc series", () => {
  it("maps a running domain: CPU seconds, vCPUs, balloon memory, per-device disk and network counters", () => {
    const m = mapDomainStats(VM, new Map(running), T);
    assert.deepEqual(m.state, { state: "RUNNING", stopReason: "" });
    assert.equal(m.active, true);
    assert.deepEqual(flat(m.series), {
      svc_vm_cpu_seconds_total: 12.5,
      svc_vm_vcpus: 2,
      svc_vm_memory_total_bytes: 1000000 * 1024,
      svc_vm_memory_free_bytes: 400000 * 1024,
      svc_vm_memory_cached_bytes: 100000 * 1024,
      "svc_vm_disk_read_bytes_total/vda": 4096,
      "svc_vm_disk_written_bytes_total/vda": 8192,
      "svc_vm_disk_reads_completed_total/vda": 1,
      "svc_vm_disk_writes_completed_total/vda": 2,
      "svc_vm_network_receive_bytes_total/vnet0": 100,
      "svc_vm_network_transmit_bytes_total/vnet0": 200,
      "svc_vm_network_receive_packets_total/vnet0": 3,
      "svc_vm_network_transmit_packets_total/vnet0": 4,
    });
  });

  it("sends no memory when the guest reports no balloon stats, never currentMemory as a guess", () => {
    const noStats = running.filter(
      ([k]) => !["balloon.available", "balloon.unused", "balloon.disk_caches"].includes(k),
    );
    const names = Object.keys(flat(mapDomainStats(VM, new Map(noStats), T).series));
    assert.ok(!names.some((n) => n.startsWith("svc_vm_memory")), names.join(","));
    // One side alone is no reading either.
    const half = running.filter(([k]) => k !== "balloon.unused");
    assert.ok(
      !Object.keys(flat(mapDomainStats(VM, new Map(half), T).series)).some((n) =>
        n.startsWith("svc_vm_memory_"),
      ),
    );
  });

  it("sends no samples for a shut-off domain, only its state", () => {
    const m = mapDomainStats(
      VM,
      new Map<string, TypedValue>([
        ["state.state", 5],
        ["state.reason", 2],
      ]),
      T,
    );
    assert.deepEqual(
      [m.series, m.state, m.active],
      [[], { state: "STOPPED", stopReason: "UNEXPECTED" }, false],
    );
  });

  it("classifies libvirt's stop reasons: shutdown, save and migration intentional; destroy, crash, failure unexpected", () => {
    const cases: [number, number, string][] = [
      [5, 1, "STOPPED/USER"], // shutoff: shutdown (guest or virsh shutdown)
      [5, 2, "STOPPED/UNEXPECTED"], // destroyed from the host
      [5, 3, "STOPPED/UNEXPECTED"], // crashed (QEMU died)
      [5, 4, "STOPPED/USER"], // migrated away
      [5, 5, "STOPPED/USER"], // saved
      [5, 6, "STOPPED/UNEXPECTED"], // failed to start
      [5, 0, "STOPPED/USER"], // defined, never started
      [6, 0, "STOPPED/UNEXPECTED"], // crashed state
      [3, 1, "STOPPED/USER"], // paused by the provider
      [3, 5, "STOPPED/UNEXPECTED"], // paused on an I/O error
      [3, 11, "STARTING/"],
      [4, 1, "STOPPING/"],
      [1, 1, "RUNNING/"],
      [7, 1, "STOPPED/USER"], // guest suspended itself (PM)
    ];
    for (const [state, reason, want] of cases) {
      const got = mapState(state, reason);
      assert.equal(got && `${got.state}/${got.stopReason}`, want, `state ${state} reason ${reason}`);
    }
    assert.equal(mapState(0, 0), undefined);
  });

  it("maps the guest agent's filesystems per mount, and nothing for one without sizes", () => {
    const info = new Map<string, TypedValue>([
      ["fs.count", 2],
      ["fs.0.name", "vdb"],
      ["fs.0.mountpoint", "/data"],
      ["fs.0.fstype", "ext4"],
      ["fs.0.total-bytes", 7702528n],
      ["fs.0.used-bytes", 2449408n],
      ["fs.1.name", "sr0"],
      ["fs.1.mountpoint", "/media/cd"],
      ["fs.1.fstype", "iso9660"],
    ]);
    assert.deepEqual(flat(mapGuestFilesystems(VM, info, T)), {
      "svc_vm_filesystem_used_bytes//data/vdb": 2449408,
      "svc_vm_filesystem_size_bytes//data/vdb": 7702528,
    });
  });

  it("reads the VM name from the domain's metadata element and refuses anything else", () => {
    assert.deepEqual(vmNameFromMetadata(`<vm name="${VM}"/>`), { vm: VM });
    assert.deepEqual(vmNameFromMetadata(`<svc:vm xmlns:svc="urn:svc:collector:1" name='${VM}'></svc:vm>`), {
      vm: VM,
    });
    assert.match(vmNameFromMetadata("<vm/>").problem ?? "", /no name attribute/);
    assert.match(vmNameFromMetadata('<vm name="web-1"/>').problem ?? "", /is not projects/);
  });
});
