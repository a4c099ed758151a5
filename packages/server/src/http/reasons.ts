import type { ErrorCode } from "../errors.ts";

/**
 * Every ErrorInfo reason svc sends, with its code and metadata keys. docs/errors.md documents the same
 * list and a test keeps the two equal. Retired reasons stay here, marked, so they are never reused.
 */
export const reasons: Readonly<Record<string, { code: ErrorCode; metadata: readonly string[] }>> = {
  INVALID_FIELD: { code: "invalid_argument", metadata: ["field"] },
  REQUEST_ID_REUSED: { code: "invalid_argument", metadata: ["field"] },
  EXPIRY_TOO_LONG: { code: "invalid_argument", metadata: ["field", "maxDays"] },
  REQUEST_TOO_LARGE: { code: "invalid_argument", metadata: [] },
  INVALID_PAGE_TOKEN: { code: "invalid_argument", metadata: ["field"] },
  POINT_BUDGET_EXCEEDED: {
    code: "invalid_argument",
    metadata: ["field", "maxPoints", "requestedPoints", "suggestedStepSeconds"],
  },
  RANGE_OUTSIDE_RETENTION: { code: "invalid_argument", metadata: ["field", "retentionSeconds"] },
  EXPRESSION_TOO_LONG: { code: "invalid_argument", metadata: ["maxBytes"] },
  UNKNOWN_METRIC: { code: "invalid_argument", metadata: ["field", "metricId"] },
  NOT_FOUND: { code: "not_found", metadata: [] },
  ALREADY_EXISTS: { code: "already_exists", metadata: [] },
  UNAUTHENTICATED: { code: "unauthenticated", metadata: [] },
  CREDENTIAL_EXPIRED: { code: "unauthenticated", metadata: [] },
  CREDENTIAL_REVOKED: { code: "unauthenticated", metadata: [] },
  PROJECT_BOUNDARY: { code: "permission_denied", metadata: [] },
  CAPABILITY: { code: "permission_denied", metadata: ["capability"] },
  IDENTITY_DISABLED: { code: "permission_denied", metadata: [] },
  GRANT_REMOVED: { code: "permission_denied", metadata: [] },
  HUMAN_ONLY: { code: "permission_denied", metadata: [] },
  OPERATOR_ONLY: { code: "permission_denied", metadata: [] },
  VERSION_CONFLICT: { code: "aborted", metadata: ["currentVersion"] },
  RATE_LIMITED: { code: "resource_exhausted", metadata: ["retryAfterSeconds"] },
  QUERY_TIMEOUT: { code: "deadline_exceeded", metadata: ["timeoutSeconds"] },
  EXPANDED_UNAVAILABLE: { code: "failed_precondition", metadata: ["why"] },
  EXPANDED_MONITORING_REQUIRED: { code: "failed_precondition", metadata: [] },
  CI_CLAIM_MISMATCH: { code: "permission_denied", metadata: ["claim", "expected"] },
  CI_EVENT_REJECTED: { code: "permission_denied", metadata: ["claim", "expected"] },
  CI_ASSERTION_INVALID: { code: "unauthenticated", metadata: ["problem"] },
  CI_ASSERTION_REPLAYED: { code: "unauthenticated", metadata: ["claim"] },
  CI_PAIRING_INVALID: { code: "permission_denied", metadata: [] },
  CI_SETUP_EXPIRED: { code: "failed_precondition", metadata: ["expireTimeUnix"] },
  CI_TRUST_DISABLED: { code: "permission_denied", metadata: [] },
  CI_TRUST_STATE: { code: "failed_precondition", metadata: ["state"] },
  INCIDENT_CLOSED: { code: "failed_precondition", metadata: ["state"] },
  DESTINATION_LIMIT_EXCEEDED: { code: "failed_precondition", metadata: ["limit", "count"] },
  RULE_LIMIT_EXCEEDED: { code: "failed_precondition", metadata: ["limit", "count"] },
  INSTANCE_LIMIT_EXCEEDED: { code: "failed_precondition", metadata: ["limit", "count"] },
  INTERNAL: { code: "internal", metadata: [] },
};
