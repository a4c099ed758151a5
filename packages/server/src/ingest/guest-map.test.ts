import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isStaleNaNValue } from "../storage/interface.ts";
import { emitGroups, GROUP_HOLD_MS, newGuestMapState, newMapResult, type Part } from "./guest-map.ts";

const VM = "projects/p/locations/dc-1/vms/a";

/** node_cpu_seconds_total-like parts: per CPU, user (busy) and idle. */
function cpuParts(t: number, cpus: number[], busy: number, stale = false): Part[] {
  return cpus.flatMap((c) => [
    { kind: "cpu" as const, dev: "", comp: `${c}\u0000busy\u0000user`, t, v: busy, stale },
    { kind: "cpu" as const, dev: "", comp: `${c}\u0000idle\u0000idle`, t, v: 1000, stale },
  ]);
}

function emitted(parts: Part[], state = newGuestMapState(), now = 0) {
  const out = newMapResult();
  emitGroups(state, parts, VM, now, out);
  const byName = new Map(out.series.map((s) => [s.labels[0]!.value, s.samples]));
  return { out, byName, state };
}

describe("guest-map: parts grouped per timestamp", () => {
  it("sums busy CPU over CPUs and counts them; idle is left out of the sum", () => {
    const { byName } = emitted(cpuParts(1000, [0, 1, 2], 5));
    assert.deepEqual(byName.get("svc_vm_guest_cpu_seconds_total"), [{ value: 15, timestampMs: 1000 }]);
    assert.deepEqual(byName.get("svc_vm_guest_vcpus"), [{ value: 3, timestampMs: 1000 }]);
  });

  it("a scrape split over two requests is stored once, whole, never as a partial sum", () => {
    const state = emitted(cpuParts(1000, [0, 1], 5)).state; // learns 4 parts
    const first = emitted(cpuParts(2000, [0], 7), state, 10);
    assert.equal(first.out.series.length, 0, "half a scrape waits");
    const second = emitted(cpuParts(2000, [1], 7), state, 20);
    assert.deepEqual(second.byName.get("svc_vm_guest_cpu_seconds_total"), [{ value: 14, timestampMs: 2000 }]);
  });

  it("a group that never completes is dropped after the hold and the smaller count expected next", () => {
    const state = emitted(cpuParts(1000, [0, 1], 5)).state;
    assert.equal(emitted(cpuParts(2000, [0], 7), state, 0).out.series.length, 0);
    // A CPU went offline: the held half expires, and from then on 2 parts are a whole scrape.
    const next = emitted(cpuParts(3000, [0], 8), state, GROUP_HOLD_MS + 1);
    assert.deepEqual(next.byName.get("svc_vm_guest_cpu_seconds_total"), [{ value: 8, timestampMs: 3000 }]);
    assert.deepEqual(next.byName.get("svc_vm_guest_vcpus"), [{ value: 1, timestampMs: 3000 }]);
    assert.equal(state.pending.size, 0, "the scrape at 2000 is dropped, never stored as a partial sum");
  });

  it("a staleness marker on the parts ends the svc series with one", () => {
    const state = emitted(cpuParts(1000, [0, 1], 5)).state;
    const { byName } = emitted(cpuParts(2000, [0], 0, true), state);
    const s = byName.get("svc_vm_guest_cpu_seconds_total")!;
    assert.equal(s.length, 1);
    assert.ok(isStaleNaNValue(s[0]!.value));
  });

  it("filesystem: used = size − free, available as sent; a read-only mount is not stored", () => {
    const fs = (dev: string, comp: string, v: number): Part => ({
      kind: "filesystem",
      dev,
      comp,
      t: 1,
      v,
      stale: false,
    });
    const rw = "/\u0000ext4\u0000/dev/vda1";
    const ro = "/mnt\u0000ext4\u0000/dev/vdb";
    const { byName, out } = emitted([
      fs(rw, "size", 1000),
      fs(rw, "free", 300),
      fs(rw, "avail", 250),
      fs(ro, "size", 500),
      fs(ro, "free", 0),
      fs(ro, "readonly", 1),
    ]);
    assert.deepEqual(byName.get("svc_vm_filesystem_used_bytes"), [{ value: 700, timestampMs: 1 }]);
    assert.deepEqual(byName.get("svc_vm_filesystem_avail_bytes"), [{ value: 250, timestampMs: 1 }]);
    assert.equal(out.series.filter((s) => s.labels.some((l) => l.value === "/mnt")).length, 0);
  });

  it("a device mounted twice (bind mounts) is reported once, under its shortest mount point", () => {
    const fs = (dev: string, comp: string, v: number): Part => ({
      kind: "filesystem",
      dev,
      comp,
      t: 1,
      v,
      stale: false,
    });
    const hosts = "/etc/hosts\u0000ext4\u0000/dev/vda";
    const root = "/\u0000ext4\u0000/dev/vda";
    const { out } = emitted([
      fs(hosts, "size", 1000),
      fs(hosts, "free", 300),
      fs(root, "size", 1000),
      fs(root, "free", 300),
    ]);
    const mounts = out.series.map((s) => s.labels.find((l) => l.name === "mountpoint")?.value);
    assert.deepEqual([...new Set(mounts)], ["/"]);
    assert.equal(out.leftOut.get("excluded_filesystem"), 2);
  });
});
