/**
 * OTLP/HTTP metrics (opentelemetry-proto v1.11.0, vendored under proto/opentelemetry): decoding the
 * body (protobuf or JSON, gzip or not) and turning the OpenTelemetry host-metrics conventions into
 * guest-map parts (docs/agent.md, "How svc maps them"). Resource attributes are ignored: the VM is
 * the token's. Protobuf bodies are read by a decoder of their own (wire.ts), JSON ones by protobuf-es
 * and brought to the same shape (metricsOfMessage).
 */
import { gunzipSync } from "node:zlib";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import {
  diskLeftOut,
  filesystemLeftOut,
  interfaceLeftOut,
  leaveOut,
  type MapResult,
  NOT_BUSY,
  type Part,
  refuse,
} from "../guest-map.ts";
import {
  type ExportMetricsServiceRequest,
  ExportMetricsServiceRequestSchema,
} from "./gen/opentelemetry/proto/collector/metrics/v1/metrics_service_pb.ts";
import {
  AggregationTemporality,
  DataPointFlags,
  type NumberDataPoint,
} from "./gen/opentelemetry/proto/metrics/v1/metrics_pb.ts";
import { ATTR, ATTR_KEYS, decodeMetricsRequest, type OtlpMetric, type OtlpPoint } from "./wire.ts";

/** A body svc cannot take whole: answered with `status` and this message. */
export class OtlpBodyError extends Error {
  constructor(
    readonly status: 400 | 413 | 415,
    message: string,
  ) {
    super(message);
  }
}

export type OtlpFormat = "protobuf" | "json";

/**
 * Decodes one export request into the metrics the mapping reads: protobuf by wire.ts' decoder, JSON
 * through protobuf-es. Throws OtlpBodyError naming what is wrong.
 */
export function decodeOtlp(
  body: Buffer,
  format: OtlpFormat,
  encoding: string | undefined,
  maxDecompressedBytes: number,
): OtlpMetric[] {
  let bytes = body;
  if (encoding === "gzip") {
    try {
      bytes = gunzipSync(body, { maxOutputLength: maxDecompressedBytes });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE") {
        throw new OtlpBodyError(413, `the gzip body inflates to more than ${maxDecompressedBytes} bytes`);
      }
      throw new OtlpBodyError(400, "Content-Encoding gzip, but the body is not valid gzip");
    }
  } else if (encoding !== undefined && encoding !== "identity") {
    throw new OtlpBodyError(
      415,
      `Content-Encoding ${encoding.slice(0, 40)} is not supported; use gzip or none`,
    );
  }
  try {
    if (format === "protobuf") return decodeMetricsRequest(bytes);
    return metricsOfMessage(
      fromJson(ExportMetricsServiceRequestSchema, JSON.parse(bytes.toString("utf8")) as JsonValue, {
        ignoreUnknownFields: true,
      }),
    );
  } catch (err) {
    const why = err instanceof Error ? err.message.slice(0, 200) : "undecodable";
    throw new OtlpBodyError(400, `not an OTLP ExportMetricsServiceRequest (${format}): ${why}`);
  }
}

/** What a request held besides its mappable parts. */
export interface OtlpParts {
  readonly parts: Part[];
  readonly dataPoints: number;
  /** Data points of delta-temporality sums: refused (docs/ingest.md), the request answered 400. */
  readonly deltaPoints: number;
  readonly deltaExample: string;
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

/** The metrics of a decoded JSON request, as the protobuf decoder gives them (wire.ts). */
export function metricsOfMessage(req: ExportMetricsServiceRequest): OtlpMetric[] {
  const out: OtlpMetric[] = [];
  for (const rm of req.resourceMetrics) {
    for (const sm of rm.scopeMetrics) {
      for (const metric of sm.metrics) {
        const data = metric.data;
        out.push({
          name: metric.name,
          kind: data.case,
          temporality: data.case === "sum" ? data.value.aggregationTemporality : 0,
          count: data.case === undefined ? 0 : data.value.dataPoints.length,
          points:
            data.case === "sum" || data.case === "gauge" ? data.value.dataPoints.map(pointOfMessage) : [],
        });
      }
    }
  }
  return out;
}

const ATTR_INDEX = new Map<string, number>(ATTR_KEYS.map((k, i) => [k, i]));

function pointOfMessage(dp: NumberDataPoint): OtlpPoint {
  const attrs: (string | undefined)[] = [];
  const seen = new Set<number>();
  for (const a of dp.attributes) {
    const index = ATTR_INDEX.get(a.key);
    if (index === undefined || seen.has(index)) continue;
    seen.add(index);
    const v = a.value?.value;
    attrs[index] =
      v?.case === "stringValue"
        ? v.value
        : v?.case === "intValue" || v?.case === "doubleValue" || v?.case === "boolValue"
          ? String(v.value)
          : undefined;
  }
  return {
    attrs,
    t: Number(dp.timeUnixNano / 1_000_000n),
    stale: (dp.flags & DataPointFlags.NO_RECORDED_VALUE_MASK) !== 0,
    v:
      dp.value.case === "asInt"
        ? Number(dp.value.value)
        : dp.value.case === "asDouble"
          ? dp.value.value
          : undefined,
  };
}

export function otlpParts(metrics: readonly OtlpMetric[], out: MapResult): OtlpParts {
  const parts: Part[] = [];
  let dataPoints = 0;
  let deltaPoints = 0;
  let deltaExample = "";
  for (const metric of metrics) {
    const n = metric.count;
    dataPoints += n;
    if (!MAPPED.has(metric.name) || (metric.kind !== "sum" && metric.kind !== "gauge")) {
      if (n > 0) {
        refuse(
          out,
          "unknown_metric",
          n,
          `"${metric.name.slice(0, 100)}" (${metric.kind ?? "no data"}) is not an OpenTelemetry host metric svc maps (docs/agent.md)`,
        );
      }
      continue;
    }
    if (metric.kind === "sum" && metric.temporality === AggregationTemporality.DELTA) {
      deltaPoints += n;
      deltaExample ||= `${metric.name} has delta temporality; svc takes cumulative sums only`;
      continue;
    }
    for (const dp of metric.points) mapPoint(metric.name, dp, parts, out);
  }
  return { parts, dataPoints, deltaPoints, deltaExample };
}

const MEMORY_STATES = new Set(["used", "free", "buffers", "cached", "slab_reclaimable"]);

function mapPoint(name: string, dp: OtlpPoint, parts: Part[], out: MapResult): void {
  // No closures here: one point at a time, and each closure costs (tsx names every one it creates).
  const a = dp.attrs;
  if (!dp.stale && dp.v === undefined) {
    refuse(out, "bad_labels", 1, `${name}: a data point without a value`);
    return;
  }
  switch (name) {
    case "system.cpu.time": {
      const state = a[ATTR["cpu.mode"]] ?? a[ATTR["system.cpu.state"]] ?? a[ATTR.state];
      const cpu = a[ATTR["cpu.logical_number"]] ?? a[ATTR["system.cpu.logical_number"]] ?? a[ATTR.cpu] ?? "";
      if (!need(out, name, "cpu.mode", state)) return;
      push(parts, dp, "cpu", "", `${cpu}\u0000${NOT_BUSY.has(state) ? "idle" : "busy"}\u0000${state}`);
      return;
    }
    case "system.memory.usage": {
      const state = a[ATTR["system.memory.state"]] ?? a[ATTR.state];
      if (!need(out, name, "system.memory.state", state)) return;
      // `shared` and `slab_unreclaimable` are parts of `used`: not added to the capacity.
      if (MEMORY_STATES.has(state)) push(parts, dp, "memory", "", state);
      return;
    }
    case "system.memory.limit":
      push(parts, dp, "memory", "", "total");
      return;
    case "system.filesystem.usage": {
      const state = a[ATTR["system.filesystem.state"]] ?? a[ATTR.state];
      const mountpoint = a[ATTR["system.filesystem.mountpoint"]] ?? a[ATTR.mountpoint];
      const device = a[ATTR["system.device"]] ?? a[ATTR.device];
      const fstype = a[ATTR["system.filesystem.type"]] ?? a[ATTR.type] ?? "";
      if (
        !need(out, name, "system.filesystem.state", state) ||
        !need(out, name, "system.filesystem.mountpoint", mountpoint)
      )
        return;
      if (!need(out, name, "system.device", device)) return;
      if (
        (a[ATTR["system.filesystem.mode"]] ?? a[ATTR.mode]) === "ro" ||
        filesystemLeftOut(mountpoint, fstype)
      ) {
        leaveOut(out, "excluded_filesystem");
        return;
      }
      push(parts, dp, "filesystem", `${mountpoint}\u0000${fstype}\u0000${device}`, `otel_${state}`);
      return;
    }
    case "system.disk.io":
    case "system.disk.operations": {
      const device = a[ATTR["system.device"]] ?? a[ATTR.device];
      const dir = a[ATTR["disk.io.direction"]] ?? a[ATTR.direction] ?? "";
      const series = Object.hasOwn(DISK_IO, dir)
        ? (name === "system.disk.io" ? DISK_IO : DISK_OPS)[dir]
        : undefined;
      if (!need(out, name, "system.device", device)) return;
      if (!series) {
        refuse(out, "bad_labels", 1, `${name}: disk.io.direction must be read or write`);
        return;
      }
      if (diskLeftOut(device)) {
        leaveOut(out, "excluded_device");
        return;
      }
      push(parts, dp, "disk", device, series);
      return;
    }
    default: {
      // system.network.io, system.network.packets
      const device = a[ATTR["system.device"]] ?? a[ATTR["network.interface.name"]] ?? a[ATTR.device];
      const dir = a[ATTR["network.io.direction"]] ?? a[ATTR.direction] ?? "";
      const series = Object.hasOwn(NET_IO, dir)
        ? (name === "system.network.io" ? NET_IO : NET_PACKETS)[dir]
        : undefined;
      if (!need(out, name, "system.device", device)) return;
      if (!series) {
        refuse(out, "bad_labels", 1, `${name}: network.io.direction must be receive or transmit`);
        return;
      }
      if (interfaceLeftOut(device)) {
        leaveOut(out, "excluded_device");
        return;
      }
      push(parts, dp, "network", device, series);
    }
  }
}

function push(parts: Part[], dp: OtlpPoint, kind: Part["kind"], dev: string, comp: string): void {
  parts.push({ kind, dev, comp, t: dp.t, v: dp.v ?? 0, stale: dp.stale });
}

/** True when an attribute the mapping needs is there and not too long; else refuses the point. */
function need(out: MapResult, name: string, what: string, value: string | undefined): value is string {
  if (value === undefined || value === "")
    refuse(out, "bad_labels", 1, `${name}: attribute ${what} is required`);
  else if (value.length > 256)
    refuse(out, "bad_labels", 1, `${name}: attribute ${what} is longer than 256 bytes`);
  else return true;
  return false;
}
