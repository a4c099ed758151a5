import type { Migration } from "kysely";
import * as m0001 from "./0001_foundation.ts";
import * as m0002 from "./0002_ci_trust.ts";
import * as m0003 from "./0003_agent_tokens.ts";
import * as m0004 from "./0004_alerts.ts";
import * as m0005 from "./0005_notifications.ts";
import * as m0006 from "./0006_leases.ts";
import * as m0007 from "./0007_fanout_order.ts";
import * as m0008 from "./0008_rate_buckets.ts";
import * as m0009 from "./0009_notification_rights.ts";
import * as m0010 from "./0010_silences.ts";
import * as m0011 from "./0011_destination_keys.ts";
import * as m0012 from "./0012_audit.ts";
import * as m0013 from "./0013_agent_token_first_use.ts";
import * as m0014 from "./0014_guest_sender.ts";
import * as m0015 from "./0015_auth_revision.ts";
import * as m0016 from "./0016_eval_revision.ts";

/**
 * Every migration, in order. Add one file per schema change and list it here; names sort by their
 * four-digit prefix and are never renamed once shipped.
 */
export const migrations: Record<string, Migration> = {
  "0001_foundation": m0001,
  "0002_ci_trust": m0002,
  "0003_agent_tokens": m0003,
  "0004_alerts": m0004,
  "0005_notifications": m0005,
  "0006_leases": m0006,
  "0007_fanout_order": m0007,
  "0008_rate_buckets": m0008,
  "0009_notification_rights": m0009,
  "0010_silences": m0010,
  "0011_destination_keys": m0011,
  "0012_audit": m0012,
  "0013_agent_token_first_use": m0013,
  "0014_guest_sender": m0014,
  "0015_auth_revision": m0015,
  "0016_eval_revision": m0016,
};
