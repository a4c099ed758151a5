/**
 * `tsx bench/ingest/otlp-decode.ts [rounds]`: CPU of decoding and mapping the OTLP bodies of
 * `bench:ingest -- --guest` (the hostmetrics receiver's export, gzip'd protobuf), the old way (gunzip +
 * protobuf-es' fromBinary + the mapping over its message, testing/otlp-reference.ts) against svc's
 * (decodeOtlp with wire.ts + otlpParts), interleaved A B B A in one process so the machine's load falls
 * on both alike; gunzip alone and remote write's decode + map (snappy + decodeWriteRequestCompact +
 * node_exporter mapping) are counted beside them. CPU is process.cpuUsage (user + system).
 * Does not replace bench:ingest's figure (whole requests through svc); it isolates the decoding.
 * ONLY=<prefix> runs the arms whose name starts so (e.g. `ONLY=new` under `node --import tsx --cpu-prof`).
 */
import { gunzipSync } from "node:zlib";
import { decodeRemoteWriteBodyCompact } from "@svc/remotewrite";
import { newMapResult, type Part } from "../../packages/server/src/ingest/guest-map.ts";
import { remoteWriteParts } from "../../packages/server/src/ingest/guest-senders.ts";
import { decodeOtlp, otlpParts } from "../../packages/server/src/ingest/otlp/otlp.ts";
import { referenceDecode, referenceOtlpParts } from "../../packages/server/testing/otlp-reference.ts";
import { guestReadings, otlpBody, remoteWriteBody } from "./guest.ts";

const VMS = 50;
const STEPS = 20;
const rounds = Number(process.argv[2] ?? 20);

const endMs = Math.floor(Date.now() / 30_000) * 30_000;
const readings = Array.from({ length: VMS }, (_, i) => guestReadings(1000 + i, STEPS, endMs)).flat();
const otlp = readings.map(otlpBody);
const rw = readings.map(remoteWriteBody);

const arms: Record<string, (body: Uint8Array) => number> = {
  "old: gunzip + fromBinary + map": (body) => {
    const out = newMapResult();
    return referenceOtlpParts(referenceDecode(body, true), out).parts.length;
  },
  "new: gunzip + wire.ts + map": (body) => {
    const out = newMapResult();
    const metrics = decodeOtlp(
      Buffer.from(body.buffer, body.byteOffset, body.byteLength),
      "protobuf",
      "gzip",
      1 << 24,
    );
    return otlpParts(metrics, out).parts.length;
  },
  "gunzip alone": (body) => gunzipSync(body).length,
};

function remoteWrite(body: Uint8Array): number {
  const parts: Part[] = [];
  remoteWriteParts(decodeRemoteWriteBodyCompact(body), parts, newMapResult());
  return parts.length;
}

function cpuOf(run: () => void): number {
  const c = process.cpuUsage();
  run();
  const d = process.cpuUsage(c);
  return d.user + d.system;
}

const totals = new Map<string, number>();
const names = [...Object.keys(arms), "remote write: snappy + decode + map"].filter(
  (n) => !process.env.ONLY || n.startsWith(process.env.ONLY),
);
const once = (name: string) => {
  const f = name in arms ? arms[name]! : remoteWrite;
  const bodies = name in arms ? otlp : rw;
  let sink = 0;
  const us = cpuOf(() => {
    for (const b of bodies) sink += f(b);
  });
  if (sink === 0) throw new Error(`${name} mapped nothing`);
  totals.set(name, (totals.get(name) ?? 0) + us);
};
// Warm-up (JIT), not counted.
for (const n of names) for (let i = 0; i < 3; i++) once(n);
totals.clear();
for (let r = 0; r < rounds; r++) for (const n of r % 2 === 0 ? names : [...names].reverse()) once(n);
const requests = rounds * otlp.length;
console.log(
  `${otlp.length} bodies (OTLP ${otlp[0]!.length} B gzip, remote write ${rw[0]!.length} B snappy) × ${rounds} rounds, A B B A`,
);
for (const n of names)
  console.log(`${n.padEnd(40)} ${(totals.get(n)! / requests).toFixed(1).padStart(7)} µs CPU per request`);
