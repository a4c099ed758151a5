/**
 * The ingest side of "use the agent you already run": a guest-agent token's request that carries
 * node_exporter series (remote write) or OpenTelemetry host metrics (OTLP) is mapped onto svc's guest
 * series and handed to the same ingester as svc's own agent, with the VM taken from the token. What
 * the mapping refuses is merged into the ingester's answer; what a rule leaves out is only counted.
 */
import {
  type CompactWriteRequest,
  decodeWriteRequestCompact,
  encodeWriteRequest,
  labelsOfKeyBytes,
  type TimeSeries,
} from "@svc/remotewrite";
import { vmName } from "../inventory/names.ts";
import { isStaleNaNValue } from "../storage/interface.ts";
import type { IngestPrincipal } from "./credentials.ts";
import {
  emitGroups,
  type GuestMapState,
  type MapResult,
  newGuestMapState,
  newMapResult,
  type Part,
} from "./guest-map.ts";
import type { Ingester, IngestResult } from "./ingest.ts";
import type { IngestMetrics } from "./instrumentation.ts";
import { nodeExporterParts } from "./node-exporter.ts";

/** A Label's `name: "__name__"` field followed by its value's tag, as a WriteRequest carries it. */
const NAME_FIELD = Buffer.from("\x0a\x08__name__\x12", "latin1");
const SVC_PREFIX = Buffer.from("svc_", "latin1");

export type AgentPrincipal = Extract<IngestPrincipal, { kind: "agent" }>;

export interface GuestSenders {
  /** True when a guest agent's remote-write request carries series other than svc's own. */
  needsMapping(req: CompactWriteRequest): boolean;
  /** Maps and ingests a remote-write request of node_exporter series (svc's own series pass as they are). */
  ingestRemoteWrite(principal: AgentPrincipal, req: CompactWriteRequest): Promise<IngestResult>;
  /** Ingests parts already taken from another format (OTLP), with what that step refused. */
  ingestParts(principal: AgentPrincipal, parts: readonly Part[], out: MapResult): Promise<IngestResult>;
}

export function createGuestSenders(deps: { ingester: Ingester; metrics?: IngestMetrics }): GuestSenders {
  const states = new Map<string, GuestMapState>();

  function stateOf(vm: string): GuestMapState {
    let s = states.get(vm);
    if (!s) {
      if (states.size > 100_000) states.clear();
      s = newGuestMapState();
      states.set(vm, s);
    }
    return s;
  }

  async function finish(
    principal: AgentPrincipal,
    parts: readonly Part[],
    out: MapResult,
  ): Promise<IngestResult> {
    const vm = vmName(principal.vm);
    emitGroups(stateOf(vm), parts, vm, Date.now(), out);
    const m = deps.metrics;
    if (m) for (const [reason, n] of out.leftOut) m.leftOutSeries.inc({ reason }, n);
    let result: IngestResult;
    if (out.series.length > 0) {
      // Through the wire format, so the mapped series meet exactly the checks svc's agent's do.
      const req = decodeWriteRequestCompact(encodeWriteRequest({ timeseries: out.series }));
      result = await deps.ingester.ingest(principal, req);
    } else {
      result = { acceptedSamples: 0, refused: {}, examples: [] };
    }
    for (const [reason, r] of out.refused) {
      const into = result.refused[reason] ?? { series: 0, samples: 0 };
      result.refused[reason] = into;
      into.series += r.series;
      into.samples += r.samples;
      if (result.examples.length < 5) result.examples.unshift(`${reason}: ${r.example}`);
      if (m) {
        m.refusedSeries.inc({ reason }, r.series);
        m.refusedSamples.inc({ reason }, r.samples);
      }
    }
    return result;
  }

  return {
    needsMapping(req) {
      // On svc's own agent's every request: a byte scan for each series' name, no label decoding.
      const buf = Buffer.from(req.labelBytes.buffer, req.labelBytes.byteOffset, req.labelBytes.byteLength);
      for (let i = 0; i < req.seriesCount; i++) {
        const end = req.labelKeyEnd[i]!;
        const at = buf.indexOf(NAME_FIELD, req.labelKeyStart[i]);
        if (at < 0 || at >= end) return true;
        let k = at + NAME_FIELD.length;
        while (k < end && (buf[k]! & 0x80) !== 0) k++; // the value's length (a varint)
        k++;
        if (
          k + SVC_PREFIX.length > end ||
          buf.compare(SVC_PREFIX, 0, SVC_PREFIX.length, k, k + SVC_PREFIX.length) !== 0
        ) {
          return true;
        }
      }
      return false;
    },

    async ingestRemoteWrite(principal, req) {
      const out = newMapResult();
      const parts: Part[] = [];
      remoteWriteParts(req, parts, out);
      return finish(principal, parts, out);
    },

    ingestParts: finish,
  };
}

/**
 * A guest's remote-write request as guest-map parts: node_exporter's series mapped (node-exporter.ts),
 * svc's own series (as svc's agent sends them) passed on whole to `out.series` for the ingester's checks.
 */
export function remoteWriteParts(req: CompactWriteRequest, parts: Part[], out: MapResult): void {
  const { timestampsMs, values, sampleStart } = req;
  const stale = (k: number) => isStaleNaNValue(values[k]!);
  for (let i = 0; i < req.seriesCount; i++) {
    const labels = labelsOfKeyBytes(req.labelBytes, req.labelKeyStart[i], req.labelKeyEnd[i]);
    const name = labels.find((l) => l.name === "__name__")?.value ?? "";
    const start = sampleStart[i]!;
    const end = sampleStart[i + 1]!;
    if (name.startsWith("svc_")) {
      // svc's own series, as svc's agent sends them: checked by the ingester as usual.
      const ts: TimeSeries = {
        labels,
        samples: Array.from({ length: end - start }, (_, j) => ({
          value: values[start + j]!,
          timestampMs: timestampsMs[start + j]!,
        })),
      };
      out.series.push(ts);
      continue;
    }
    nodeExporterParts(labels, { t: timestampsMs, v: values, stale, start, end }, parts, out);
  }
}
