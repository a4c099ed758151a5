import type { DeliveryTable, DestinationTable, SilenceTable } from "../db/schema.ts";
import { type Skipped, skipped as skip } from "./channels/channel.ts";
import { silenceName, silencesMutingIncident } from "./silences.ts";

/** An incident as the recheck sees it. */
export interface IncidentState {
  readonly state: string;
  readonly snooze_until: number | null;
  readonly rule_id: string;
  readonly vm_name: string;
  /** The destination ids its rule's applied revision names now; null when the rule row is gone. */
  readonly destinations: ReadonlySet<string> | null;
}

/** What a delivery is rechecked against, read from the database (queue-state.ts readQueueStates). */
export interface RecheckState {
  /** The destination's row; undefined when it no longer exists. */
  readonly dest: DestinationTable | undefined;
  /** The destination's project's silences in force. */
  readonly silences: readonly SilenceTable[];
  /** Incidents by id: null when the row no longer exists. */
  readonly incidents: ReadonlyMap<string, IncidentState | null>;
}

/** Messages that are pointless once the incident closed (an acknowledgement included). */
const FIRING_TYPES = new Set(["incident.opened", "incident.repeat", "incident.acknowledged"]);

/**
 * Whether a claimed delivery is still to be sent at `atMs`: undefined when it is, else the skip (final)
 * with its reason and why. Checks in order (docs/notifications.md#the-recheck-before-every-attempt); the
 * email channel adds its own (NO_VERIFIED_RECIPIENT) when it reads the recipients. Pure.
 */
export function recheck(
  d: Pick<DeliveryTable, "incident_id" | "event_type" | "expire_time" | "destination_id">,
  st: RecheckState,
  atMs: number,
): Skipped | undefined {
  const dest = st.dest;
  if (!dest || dest.delete_time !== null) return skip("DESTINATION_DELETED", "the destination was deleted");
  if (dest.paused === 1) return skip("DESTINATION_PAUSED", "the destination is paused");
  if (dest.unconfirmed_by !== "")
    return skip("DESTINATION_UNCONFIRMED", "a person has not yet confirmed the URL a key or CI token set");
  if (atMs > d.expire_time) return skip("EXPIRED", "the message is older than its retry period");
  if (!d.incident_id) return undefined;
  const inc = st.incidents.get(d.incident_id);
  if (inc === null || inc === undefined) return skip("INCIDENT_GONE", "the incident no longer exists");
  if (FIRING_TYPES.has(d.event_type) && inc.state === "RESOLVED")
    return skip("INCIDENT_RECOVERED", "the incident recovered before this firing message was sent");
  if (FIRING_TYPES.has(d.event_type) && inc.state === "RETIRED")
    return skip("INCIDENT_RETIRED", "the incident was retired before this firing message was sent");
  if (inc.destinations !== null && !inc.destinations.has(d.destination_id))
    return skip(
      "DESTINATION_NOT_IN_RULE",
      "the incident's rule no longer names this destination (removed from the rule since)",
    );
  // One rule for every message and every ordering (silences.ts silencesMutingIncident).
  const [silence] = silencesMutingIncident(st.silences, { ruleId: inc.rule_id, vmName: inc.vm_name }, atMs);
  if (silence)
    return skip(
      "SILENCED",
      `muted by ${silenceName(silence.project_id, silence.id)} until ${new Date(silence.end_time).toISOString()}`,
    );
  if (inc.snooze_until !== null && inc.snooze_until > atMs)
    return skip(
      "INCIDENT_SNOOZED",
      `notifications are snoozed until ${new Date(inc.snooze_until).toISOString()}`,
    );
  return undefined;
}
