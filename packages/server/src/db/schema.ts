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
  revoke_time: number | null;
}
