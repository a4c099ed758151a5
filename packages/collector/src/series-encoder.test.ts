import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { encodeWriteRequest, type TimeSeries } from "@svc/remotewrite";
import type { TypedValue } from "./libvirt/remote.ts";
import { mapDomainStats, mapGuestFilesystems } from "./mapping.ts";
import { SeriesEncoder } from "./series-encoder.ts";

const T = 1_800_000_000_000;

const params = (cpuNs: bigint, tap: string): Map<string, TypedValue> =>
  new Map<string, TypedValue>([
    ["state.state", 1],
    ["state.reason", 1],
    ["cpu.time", cpuNs],
    ["vcpu.current", 1],
    ["balloon.available", 1000000n],
    ["balloon.unused", 0n], // a +0 value: proto3 omits it
    ["block.count", 1],
    ["block.0.name", "vda"],
    ["block.0.rd.bytes", 4096n],
    ["net.count", 1],
    ["net.0.name", tap],
    ["net.0.rx.bytes", 100n],
  ]);

function cycle(vm: string, cpuNs: bigint, tap: string, ts: number): TimeSeries[] {
  const fs = new Map<string, TypedValue>([
    ["fs.count", 1],
    ["fs.0.mountpoint", "/données"], // not ASCII
    ["fs.0.fstype", "ext4"],
    ["fs.0.name", "vdb"],
    ["fs.0.used-bytes", 123n],
    ["fs.0.total-bytes", 456n],
  ]);
  return [...mapDomainStats(vm, params(cpuNs, tap), ts).series, ...mapGuestFilesystems(vm, fs, ts)];
}

describe("SeriesEncoder", () => {
  it("writes the bytes encodeWriteRequest writes, cycle after cycle, with the label sets kept", () => {
    const enc = new SeriesEncoder();
    const vm = "projects/acme/locations/dc-1/vms/web-1";
    for (let i = 0; i < 3; i++) {
      const series = cycle(vm, 12_500_000_000n + BigInt(i) * 1_000_000n, "vnet0", T + i * 30_000);
      assert.deepEqual(enc.encode(series), encodeWriteRequest({ timeseries: series }), `cycle ${i}`);
      enc.endCycle();
    }
    // A staleness marker's NaN payload and a sample at time 0 are written as encodeWriteRequest does.
    const odd: TimeSeries[] = [
      {
        labels: [{ name: "__name__", value: "x" }],
        samples: [
          { value: new Float64Array(new Uint32Array([2, 0x7ff00000]).buffer)[0], timestampMs: 0 },
          { value: -0, timestampMs: 1 },
        ],
      },
    ];
    assert.deepEqual(enc.encode(odd), encodeWriteRequest({ timeseries: odd }));
  });

  it("tells label sets apart by their strings, not by a joined text", () => {
    const enc = new SeriesEncoder();
    const a: TimeSeries = { labels: [{ name: "a", value: "b:c" }], samples: [{ value: 1, timestampMs: T }] };
    const b: TimeSeries = {
      labels: [
        { name: "a", value: "b" },
        { name: "c", value: "" },
      ],
      samples: [],
    };
    const both = [a, { ...b, samples: [{ value: 2, timestampMs: T }] }];
    assert.deepEqual(enc.encode(both), encodeWriteRequest({ timeseries: both }));
  });

  it("forgets a label set at the end of a cycle that did not use it", () => {
    const enc = new SeriesEncoder();
    const vm = "projects/acme/locations/dc-1/vms/web-1";
    const n = cycle(vm, 1n, "vnet0", T).length;
    enc.encode(cycle(vm, 1n, "vnet0", T));
    enc.endCycle();
    assert.equal(enc.size, n);
    // The domain restarted on another tap: its interface series is a new label set, the old one goes.
    const renamed = cycle(vm, 2n, "vnet7", T + 30_000);
    assert.deepEqual(enc.encode(renamed), encodeWriteRequest({ timeseries: renamed }));
    assert.equal(enc.size, n + 1, "during the cycle: the old tap's set is still there");
    enc.endCycle();
    assert.equal(enc.size, n, "after it: forgotten");
    // A cycle without the domain (libvirt read, domain gone): all of its sets go.
    enc.encode([]);
    enc.endCycle();
    assert.equal(enc.size, 0);
  });
});
