import type { GuestSender } from "@gen/svc/monitoring/v1/monitoring_pb.ts";

/**
 * A guest sender is silent when svc has not heard from it for more than three 30 s sampling intervals
 * (the staleness rule of docs/api.md#queryvmmonitoring; its last-seen time is kept to within 10 s), or
 * never did. The VM list and the VM page say so for an expanded VM (issue 43, item 6).
 */
export function agentSilent(sender: GuestSender | undefined, nowMs = Date.now()): boolean {
  return !sender || nowMs / 1000 - Number(sender.lastSeenUnix) > 90;
}
