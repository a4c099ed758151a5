/**
 * Which sender feeds a VM's guest series and when it was last seen (docs/agent.md, "Which sender
 * feeds the VM"): svc-agent, node_exporter by remote write (named by the sender's User-Agent), or
 * OTLP. Kept on the VM's row, so every replica's API answers the same; written at most every
 * SEEN_WRITE_MS per VM (and at once when the sender changes), so a sender's every request costs a
 * map look-up, not a database write.
 */
import type { Db } from "../db/database.ts";
import { type VmRef, vmName } from "../inventory/names.ts";

/** How stale "last seen" may be on the VM's row: well under the 30 s sampling interval. */
export const SEEN_WRITE_MS = 10_000;

export type GuestSenderKind = "svc-agent" | "node_exporter" | "otlp";

/**
 * The sender's name as the console shows it. Only fixed names are stored, never the User-Agent's
 * text (a sender's free text): an unknown one is named by its protocol only.
 */
export function guestSenderName(kind: GuestSenderKind, userAgent: string | undefined): string {
  const ua = (userAgent ?? "").slice(0, 200);
  if (kind === "svc-agent") return "svc-agent";
  if (kind === "node_exporter") {
    if (/^vmagent\b/i.test(ua)) return "node_exporter via vmagent";
    if (/^Prometheus\//.test(ua)) return "node_exporter via Prometheus";
    if (/^Alloy\//i.test(ua)) return "node_exporter via Grafana Alloy";
    if (/^GrafanaAgent\//i.test(ua)) return "node_exporter via Grafana Agent";
    return "node_exporter via remote write";
  }
  if (/^OpenTelemetry Collector/i.test(ua)) return "OpenTelemetry Collector (OTLP)";
  const sdk = /^OTel-OTLP-Exporter-(JavaScript|Java|Go|Python|DotNet|Ruby|Rust|PHP|Cpp)\//.exec(ua);
  if (sdk) return `OpenTelemetry ${sdk[1]} SDK (OTLP)`;
  return "OpenTelemetry (OTLP)";
}

export interface GuestSeen {
  /** Notes that `sender` fed the VM's guest series now; a failed write is reported, never thrown. */
  record(vm: VmRef, sender: string, nowMs: number, warn: (err: unknown) => void): Promise<void>;
}

export function createGuestSeen(db: Db): GuestSeen {
  const written = new Map<string, { sender: string; atMs: number }>();
  return {
    async record(vm, sender, nowMs, warn) {
      const key = vmName(vm);
      const last = written.get(key);
      if (last && last.sender === sender && nowMs - last.atMs < SEEN_WRITE_MS) return;
      if (written.size > 100_000) written.clear();
      written.set(key, { sender, atMs: nowMs });
      try {
        await db
          .updateTable("vms")
          .set({ guest_sender: sender, guest_seen_time: nowMs })
          .where("project_id", "=", vm.projectId)
          .where("vm_id", "=", vm.vmId)
          .execute();
      } catch (err) {
        written.delete(key); // tried again on the next request
        warn(err);
      }
    },
  };
}
