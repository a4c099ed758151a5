/**
 * The OTLP mapping as it was before svc decoded protobuf itself (otlp.ts up to the hand-written
 * decoder, wire.ts): over protobuf-es' ExportMetricsServiceRequest, attributes looked up per data
 * point. Kept, unchanged but for the Direction lookups (own keys only), as the oracle of the
 * differential tests and the decoder's A/B count (bench/ingest/otlp-decode.ts).
 */
import { gunzipSync } from "node:zlib";
import { fromBinary } from "@bufbuild/protobuf";
import {
  diskLeftOut,
  filesystemLeftOut,
  interfaceLeftOut,
  leaveOut,
  type MapResult,
  NOT_BUSY,
  type Part,
  refuse,
} from "../src/ingest/guest-map.ts";
import {
  type ExportMetricsServiceRequest,
  ExportMetricsServiceRequestSchema,
} from "../src/ingest/otlp/gen/opentelemetry/proto/collector/metrics/v1/metrics_service_pb.ts";
import type { KeyValue } from "../src/ingest/otlp/gen/opentelemetry/proto/common/v1/common_pb.ts";
import {
  AggregationTemporality,
  DataPointFlags,
  type NumberDataPoint,
} from "../src/ingest/otlp/gen/opentelemetry/proto/metrics/v1/metrics_pb.ts";
import type { OtlpParts } from "../src/ingest/otlp/otlp.ts";

/** The old protobuf path: gunzip when gzip'd, protobuf-es' reflective fromBinary. */
export function referenceDecode(body: Uint8Array, gzip: boolean): ExportMetricsServiceRequest {
  return fromBinary(ExportMetricsServiceRequestSchema, gzip ? gunzipSync(body) : body);
}
type Direction = { [k: string]: string };

const DISK_IO: Direction = {
  read: "svc_vm_guest_disk_read_bytes_total",
  write: "svc_vm_guest_disk_written_bytes_total",
};
const DISK_OPS: Direction = {
  read: "svc_vm_guest_disk_reads_completed_total",
  write: "svc_vm_guest_disk_writes_completed_total",
};
const NET_IO: Direction = {
  receive: "svc_vm_guest_network_receive_bytes_total",
  transmit: "svc_vm_guest_network_transmit_bytes_total",
};
const NET_PACKETS: Direction = {
  receive: "svc_vm_guest_network_receive_packets_total",
  transmit: "svc_vm_guest_network_transmit_packets_total",
};

/** The mapped metrics; any other is refused as unknown_metric. */
const MAPPED = new Set([
  "system.cpu.time",
  "system.memory.usage",
  "system.memory.limit",
  "system.filesystem.usage",
  "system.disk.io",
  "system.disk.operations",
  "system.network.io",
  "system.network.packets",
]);

export function referenceOtlpParts(req: ExportMetricsServiceRequest, out: MapResult): OtlpParts {
  const parts: Part[] = [];
  let dataPoints = 0;
  let deltaPoints = 0;
  let deltaExample = "";
  for (const rm of req.resourceMetrics) {
    for (const sm of rm.scopeMetrics) {
      for (const metric of sm.metrics) {
        const data = metric.data;
        const points: NumberDataPoint[] =
          data.case === "sum" || data.case === "gauge" ? data.value.dataPoints : [];
        const n = data.case === undefined ? 0 : data.value.dataPoints.length;
        dataPoints += n;
        if (!MAPPED.has(metric.name) || (data.case !== "sum" && data.case !== "gauge")) {
          if (n > 0) {
            refuse(
              out,
              "unknown_metric",
              n,
              `"${metric.name.slice(0, 100)}" (${data.case ?? "no data"}) is not an OpenTelemetry host metric svc maps (docs/agent.md)`,
            );
          }
          continue;
        }
        if (data.case === "sum" && data.value.aggregationTemporality === AggregationTemporality.DELTA) {
          deltaPoints += n;
          deltaExample ||= `${metric.name} has delta temporality; svc takes cumulative sums only`;
          continue;
        }
        for (const dp of points) mapPoint(metric.name, dp, parts, out);
      }
    }
  }
  return { parts, dataPoints, deltaPoints, deltaExample };
}

function attr(attrs: readonly KeyValue[], ...keys: string[]): string | undefined {
  for (const key of keys) {
    const v = attrs.find((a) => a.key === key)?.value?.value;
    if (v === undefined || v.case === undefined) continue;
    if (v.case === "stringValue") return v.value;
    if (v.case === "intValue" || v.case === "doubleValue" || v.case === "boolValue") return String(v.value);
  }
  return undefined;
}

function mapPoint(name: string, dp: NumberDataPoint, parts: Part[], out: MapResult): void {
  const a = dp.attributes;
  const t = Number(dp.timeUnixNano / 1_000_000n);
  const stale = (dp.flags & DataPointFlags.NO_RECORDED_VALUE_MASK) !== 0;
  const v =
    dp.value.case === "asInt" ? Number(dp.value.value) : dp.value.case === "asDouble" ? dp.value.value : 0;
  if (!stale && dp.value.case === undefined) {
    refuse(out, "bad_labels", 1, `${name}: a data point without a value`);
    return;
  }
  const push = (kind: Part["kind"], dev: string, comp: string) =>
    parts.push({ kind, dev, comp, t, v, stale });
  const need = (what: string, value: string | undefined): value is string => {
    if (value === undefined || value === "")
      refuse(out, "bad_labels", 1, `${name}: attribute ${what} is required`);
    else if (value.length > 256)
      refuse(out, "bad_labels", 1, `${name}: attribute ${what} is longer than 256 bytes`);
    else return true;
    return false;
  };
  switch (name) {
    case "system.cpu.time": {
      const state = attr(a, "cpu.mode", "system.cpu.state", "state");
      const cpu = attr(a, "cpu.logical_number", "system.cpu.logical_number", "cpu") ?? "";
      if (!need("cpu.mode", state)) return;
      push("cpu", "", `${cpu}\u0000${NOT_BUSY.has(state) ? "idle" : "busy"}\u0000${state}`);
      return;
    }
    case "system.memory.usage": {
      const state = attr(a, "system.memory.state", "state");
      if (!need("system.memory.state", state)) return;
      // `shared` and `slab_unreclaimable` are parts of `used`: not added to the capacity.
      if (["used", "free", "buffers", "cached", "slab_reclaimable"].includes(state))
        push("memory", "", state);
      return;
    }
    case "system.memory.limit":
      push("memory", "", "total");
      return;
    case "system.filesystem.usage": {
      const state = attr(a, "system.filesystem.state", "state");
      const mountpoint = attr(a, "system.filesystem.mountpoint", "mountpoint");
      const device = attr(a, "system.device", "device");
      const fstype = attr(a, "system.filesystem.type", "type") ?? "";
      if (!need("system.filesystem.state", state) || !need("system.filesystem.mountpoint", mountpoint))
        return;
      if (!need("system.device", device)) return;
      if (attr(a, "system.filesystem.mode", "mode") === "ro" || filesystemLeftOut(mountpoint, fstype)) {
        leaveOut(out, "excluded_filesystem");
        return;
      }
      push("filesystem", `${mountpoint}\u0000${fstype}\u0000${device}`, `otel_${state}`);
      return;
    }
    case "system.disk.io":
    case "system.disk.operations": {
      const device = attr(a, "system.device", "device");
      const dir = attr(a, "disk.io.direction", "direction") ?? "";
      const series = Object.hasOwn(DISK_IO, dir)
        ? (name === "system.disk.io" ? DISK_IO : DISK_OPS)[dir]
        : undefined;
      if (!need("system.device", device)) return;
      if (!series) {
        refuse(out, "bad_labels", 1, `${name}: disk.io.direction must be read or write`);
        return;
      }
      if (diskLeftOut(device)) {
        leaveOut(out, "excluded_device");
        return;
      }
      push("disk", device, series);
      return;
    }
    default: {
      // system.network.io, system.network.packets
      const device = attr(a, "system.device", "network.interface.name", "device");
      const dir = attr(a, "network.io.direction", "direction") ?? "";
      const series = Object.hasOwn(NET_IO, dir)
        ? (name === "system.network.io" ? NET_IO : NET_PACKETS)[dir]
        : undefined;
      if (!need("system.device", device)) return;
      if (!series) {
        refuse(out, "bad_labels", 1, `${name}: network.io.direction must be receive or transmit`);
        return;
      }
      if (interfaceLeftOut(device)) {
        leaveOut(out, "excluded_device");
        return;
      }
      push("network", device, series);
    }
  }
}
