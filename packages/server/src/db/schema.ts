import type { Generated } from "kysely";

/**
 * Control-plane tables. Times are Unix **milliseconds** (BIGINT in PostgreSQL, INTEGER in SQLite);
 * lists are JSON text so both dialects store them alike.
 */
export interface Database {
  projects: ProjectTable;
  users: UserTable;
  memberships: MembershipTable;
  sessions: SessionTable;
  vms: VmTable;
  vm_state_events: VmStateEventTable;
  maintenance_windows: MaintenanceWindowTable;
  service_accounts: ServiceAccountTable;
  api_keys: ApiKeyTable;
  idempotency_records: IdempotencyTable;
  agent_tokens: AgentTokenTable;
  ci_trusts: CiTrustTable;
  ci_tokens: CiTokenTable;
  ci_assertion_jtis: CiAssertionJtiTable;
  alert_rules: AlertRuleTable;
  alert_rule_revisions: AlertRuleRevisionTable;
  alert_instances: AlertInstanceTable;
  incidents: IncidentTable;
  incident_events: IncidentEventTable;
  destinations: DestinationTable;
  destination_recipients: DestinationRecipientTable;
  destination_secrets: DestinationSecretTable;
  deliveries: DeliveryTable;
  delivery_attempts: DeliveryAttemptTable;
  leases: LeaseTable;
  rate_buckets: RateBucketTable;
  silences: SilenceTable;
  audit_events: AuditEventTable;
  auth_revision: AuthRevisionTable;
  eval_revision: EvalRevisionTable;
}

/**
 * Two rows bumped by triggers (migration 0016_eval_revision): id 1 on any change to the columns of
 * `alert_rules` the evaluator's rule list reads, id 2 on any change to the columns of `vms` its VM read
 * selects.
 */
export interface EvalRevisionTable {
  id: number;
  revision: number;
}

/** One row (id 1): bumped by triggers on any change to a key's grants (migration 0015_auth_revision). */
export interface AuthRevisionTable {
  id: number;
  revision: number;
}

/** A silence (notify/silences.ts): mutes matching notifications in [start_time, end_time). */
export interface SilenceTable {
  id: string;
  project_id: string;
  start_time: number;
  end_time: number;
  comment: string;
  /** JSON array of rule ids; [] matches every rule. */
  rule_ids: string;
  /** JSON array of full VM names; [] matches every VM. */
  vm_names: string;
  /** users/<id>, keys/<id>, ciTokens/<id>. */
  creator: string;
  updated_by: string;
  version: number;
  create_time: number;
  update_time: number;
}

/** One audited call (audit/events.ts); lists are JSON text. */
export interface AuditEventTable {
  id: string;
  time: number;
  project_id: string;
  actor_kind: string;
  actor: string;
  actor_detail: string;
  method: string;
  resource: string;
  request_id: string;
  replay: Generated<number>;
  outcome: string;
  client_address: string;
  user_agent: string;
  changed_fields: string;
}

/** A token bucket shared by replicas (cluster/shared-buckets.ts). */
export interface RateBucketTable {
  /** The family, e.g. "console.email". */
  scope: string;
  key: string;
  /** Tokens left at `at`, fractional. */
  tokens: number;
  at: number;
  /** When the bucket is full again (ms); a row past it is pruned. */
  full_time: number;
}

export interface LeaseTable {
  name: string;
  /** Which process holds it (host:pid:random). */
  holder: string;
  expire_time: number;
}

export interface ProjectTable {
  id: string;
  display_name: string;
  create_time: number;
}

export interface UserTable {
  id: string;
  email: string;
  display_name: string;
  password_hash: string;
  create_time: number;
}

export interface MembershipTable {
  project_id: string;
  user_id: string;
  role: "owner" | "editor" | "viewer";
  create_time: number;
}

export interface SessionTable {
  id: string;
  user_id: string;
  token_hash: string;
  create_time: number;
  expire_time: number;
  revoke_time: number | null;
}

export interface VmTable {
  project_id: string;
  vm_id: string;
  location: string;
  display_name: string;
  state: string;
  distribution: string;
  monitoring_level: string;
  vcpus: number;
  memory_bytes: number;
  create_time: number;
  delete_time: number | null;
  /** The sender that last fed the VM's guest series (ingest/guest-seen.ts), null before any. */
  guest_sender: string | null;
  guest_seen_time: number | null;
}

export interface VmStateEventTable {
  id: string;
  project_id: string;
  vm_id: string;
  state: string;
  stop_reason: string;
  time: number;
}

export interface MaintenanceWindowTable {
  id: string;
  project_id: string;
  vm_ids: string;
  start_time: number;
  end_time: number;
  reason: string;
}

export interface ServiceAccountTable {
  id: string;
  project_id: string;
  display_name: string;
  template: string;
  permissions: string;
  state: "ACTIVE" | "DISABLED";
  create_time: number;
  last_used_time: number | null;
  last_used_address: string;
}

export interface ApiKeyTable {
  id: string;
  project_id: string;
  kind: "PERSONAL" | "SERVICE_ACCOUNT";
  service_account_id: string | null;
  owner_user_id: string | null;
  creator_user_id: string;
  display_name: string;
  capabilities: string;
  secret_hash: string;
  secret_hint: string;
  rotation_group: string;
  create_time: number;
  expire_time: number;
  revoke_time: number | null;
  /** Written at most once a minute per key (audit/last-use.ts). */
  last_used_time: number | null;
  last_used_address: string;
}

export interface IdempotencyTable {
  scope: string;
  request_id: string;
  body_hash: string;
  result: string;
  create_time: number;
}

/** A CI trust connection and its current verification window (iam/ci/trusts.ts). */
export interface CiTrustTable {
  id: string;
  project_id: string;
  service_account_id: string;
  state: "VERIFICATION_PENDING" | "IDENTITY_OBSERVED" | "APPROVED" | "DISABLED" | "DELETED";
  issuer: string;
  audience: string;
  intended_repository: string;
  intended_workflow: string;
  intended_branch: string | null;
  intended_environment: string | null;
  intended_event: string;
  setup_id: string | null;
  pairing_hash: string | null;
  setup_expire_time: number | null;
  observed: string | null;
  observe_time: number | null;
  permissions: string;
  /** Bumped on every change that must invalidate outstanding tokens. */
  permissions_version: number;
  approver_user_id: string | null;
  approve_time: number | null;
  creator_user_id: string;
  create_time: number;
  update_time: number;
}

/** An exchanged 15-minute token; only the hash of the secret is stored. */
export interface CiTokenTable {
  id: string;
  trust_id: string;
  project_id: string;
  service_account_id: string;
  token_hash: string;
  capabilities: string;
  permissions_version: number;
  create_time: number;
  expire_time: number;
  repository: Generated<string>;
  workflow: Generated<string>;
  ref: Generated<string>;
}

/** Used assertion ids, kept past the assertion's expiry so a replay is refused. */
export interface CiAssertionJtiTable {
  issuer: string;
  jti: string;
  expire_time: number;
}

export interface AgentTokenTable {
  id: string;
  project_id: string;
  vm_id: string;
  token_hash: string;
  create_time: number;
  /** A time still ahead is a re-issue's grace period: the token works until then. */
  revoke_time: number | null;
  /** When the token first authenticated; null until then (its first use revokes the VM's older tokens). */
  first_use_time: number | null;
}

/** An alert rule: its desired (latest) and applied versions (alerts/rules.ts). */
export interface AlertRuleTable {
  id: string;
  project_id: string;
  latest_version: number;
  /** 0 until the evaluator applied a revision. */
  applied_version: number;
  sync_status: "PENDING" | "APPLIED" | "FAILED";
  sync_reason: string;
  create_time: number;
  update_time: number;
  /** Set when deleted: the row stays (its instances and incidents point at it) until purged. */
  delete_time: number | null;
  last_eval_time: number | null;
  last_eval_error: string;
}

/** One accepted save: immutable. */
export interface AlertRuleRevisionTable {
  rule_id: string;
  version: number;
  project_id: string;
  /** The normalized spec as JSON (alerts/spec.ts RuleSpec). */
  spec: string;
  /** Hash of the fields that decide what fires: a change retires the instances. */
  condition_key: string;
  actor: string;
  request_id: string;
  create_time: number;
}

/** One (rule, VM[, mountpoint]) instance; an absent row is INACTIVE with no flag. */
export interface AlertInstanceTable {
  rule_id: string;
  instance_key: string;
  project_id: string;
  vm_name: string;
  mountpoint: string;
  /** The applied version it was last evaluated under. */
  revision: number;
  state: "INACTIVE" | "PENDING" | "FIRING" | "RESOLVED" | "RETIRED";
  state_since: number;
  pending_since: number | null;
  fired_at: number | null;
  resolved_at: number | null;
  retire_reason: string;
  /** "" | "NO_DATA" | "ERROR": the last evaluation's problem, which froze the state. */
  flag: string;
  flag_since: number | null;
  flag_message: string;
  last_eval_time: number | null;
  last_value: number | null;
  incident_id: string | null;
  update_time: number;
}

/** One firing episode of an instance. */
export interface IncidentTable {
  id: string;
  project_id: string;
  rule_id: string;
  rule_version: number;
  instance_key: string;
  vm_name: string;
  mountpoint: string;
  state: "OPEN" | "RESOLVED" | "RETIRED";
  retire_reason: string;
  rule_display_name: string;
  severity: string;
  metric_id: string;
  operator: string;
  threshold: number;
  open_time: number;
  close_time: number | null;
  firing_value: number | null;
  last_value: number | null;
  /** 0 / 1 */
  no_data: number;
  evaluation_error: number;
  ack_user_id: string | null;
  ack_time: number | null;
  snooze_until: number | null;
  snooze_user_id: string | null;
  repeat_interval_ms: number;
  next_notify_time: number | null;
  update_time: number;
}

/** A durable transition of an incident; notifications are delivered from these rows. */
export interface IncidentEventTable {
  id: string;
  project_id: string;
  incident_id: string;
  rule_id: string;
  kind: "OPENED" | "RESOLVED" | "RETIRED" | "ACKNOWLEDGED" | "SNOOZED" | "UNSNOOZED" | "REPEAT_DUE";
  time: number;
  actor: string;
  /** JSON object with the event's facts (value, reason, snooze until…). */
  detail: string;
  /** When the outbox turned it into deliveries; null until then. */
  fanout_time: number | null;
}

/** A notification destination (notify/destinations.ts). */
export interface DestinationTable {
  id: string;
  project_id: string;
  kind: "EMAIL" | "WEBHOOK" | "SLACK" | "TEAMS" | "DISCORD" | "PAGERDUTY" | "OPSGENIE";
  display_name: string;
  /** 0 / 1 */
  paused: number;
  /** What may be shown: the webhook URL, or only the host of a chat URL. */
  url_display: string;
  /** The URL sealed (notify/seal.ts); "" for email. */
  sealed_url: string;
  /** PagerDuty's routing key or Opsgenie's API key, sealed; "" for the other kinds. */
  sealed_key: string;
  create_time: number;
  update_time: number;
  delete_time: number | null;
  /** users/<id>, a key's name, or a CI token's service account; "" for destinations made before 0009. */
  creator: string;
  /** The key or CI token whose new URL awaits a person's confirmation; "" when none does. */
  unconfirmed_by: string;
}

/** An email recipient and its double opt-in. */
export interface DestinationRecipientTable {
  destination_id: string;
  user_id: string;
  code_hash: string;
  code_expire_time: number;
  verify_time: number | null;
  create_time: number;
}

/** A webhook signing secret, sealed; expire_time null while current. */
export interface DestinationSecretTable {
  id: string;
  destination_id: string;
  sealed_secret: string;
  create_time: number;
  expire_time: number | null;
}

/** One (event, destination) message of the outbox; its id is the DeliveryID. */
export interface DeliveryTable {
  id: string;
  project_id: string;
  destination_id: string;
  /** The incident event, or "test:<uuid>" for a test send. */
  event_id: string;
  incident_id: string | null;
  event_type: string;
  /** The NotificationMessage as JSON (notify/message.ts). */
  message: string;
  state: "PENDING" | "SENT" | "FAILED" | "SKIPPED";
  skip_reason: string;
  create_time: number;
  expire_time: number;
  next_attempt_time: number;
  attempt_count: number;
  /** Claimed by a dispatcher until this time (a crashed claim expires and the delivery is retried). */
  lease_until: number | null;
  update_time: number;
}

export interface DeliveryAttemptTable {
  /** The attempt ID (svc-attempt-id). */
  id: string;
  delivery_id: string;
  time: number;
  status: "SENT" | "FAILED" | "SKIPPED";
  response_code: number;
  detail: string;
  duration_ms: number;
}
