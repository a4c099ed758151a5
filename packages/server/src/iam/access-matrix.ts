/**
 * The expected outcome of every RPC for every kind of caller (issue 35), kept beside the capability
 * table (capabilities.ts) and checked by access-matrix.test.ts: a new RPC, or a changed row, without a
 * decided outcome here fails the suite.
 */
export const callers = [
  "anonymous",
  "garbage",
  "revokedKey",
  "rotatedOutKey",
  "disabledAccountKey",
  "otherProjectKey",
  "otherProjectMember",
  "readKey",
  "writeKey",
  "personalReadKey",
  "viewer",
  "owner",
  "collector",
  "operator",
] as const;
export type Caller = (typeof callers)[number];

/**
 * `ok`: authorized, the method answers for itself (the test's requests name a resource and nothing
 * else, so that is 200, or 400 / 404 for what the body lacks); `401`: unauthenticated; the others are
 * permission_denied with that reason: PROJECT_BOUNDARY, CAPABILITY, IDENTITY_DISABLED, GRANT_REMOVED,
 * HUMAN_ONLY, OPERATOR_ONLY.
 */
export type Outcome = "ok" | "401" | "BOUNDARY" | "CAPABILITY" | "DISABLED" | "GRANT" | "HUMAN" | "OPERATOR";

/**
 * One row per RPC, one column per caller in the order of {@link callers}. Read with the capability table:
 * keys and CI tokens are refused before their project is looked at when they lack the row's capability
 * (CAPABILITY) or their identity is disabled (IDENTITY_DISABLED); the operator token is outside every
 * project (PROJECT_BOUNDARY); a collector's remote-write token is no RPC credential (401). Destinations
 * and deliveries are read by people and notifications.write, not by read or write keys (issue 35,
 * finding 4). Silences are made, edited and expired by people and silences.write, not by write keys
 * (issue 41, item 6). RecoverLostKey names no project: it acts on the caller's own earlier requests.
 */
// biome-ignore format: one row per RPC, one column per caller, so a row reads across
export const expectedOutcomes: Readonly<Record<string, readonly Outcome[]>> = {
  "svc.monitoring.v1.MonitoringService/QueryVMMonitoring": ["401", "401", "401", "401", "DISABLED", "BOUNDARY", "BOUNDARY", "ok", "ok", "ok", "ok", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.MonitoringService/ListVMMonitoring": ["401", "401", "401", "401", "DISABLED", "BOUNDARY", "BOUNDARY", "ok", "ok", "ok", "ok", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.MonitoringService/EnableExpandedMonitoring": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.AlertService/SaveAlertRule": ["401", "401", "401", "401", "DISABLED", "BOUNDARY", "BOUNDARY", "CAPABILITY", "ok", "CAPABILITY", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.AlertService/PreviewAlertRule": ["401", "401", "401", "401", "DISABLED", "BOUNDARY", "BOUNDARY", "ok", "ok", "ok", "ok", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.AlertService/GetAlertRule": ["401", "401", "401", "401", "DISABLED", "BOUNDARY", "BOUNDARY", "ok", "ok", "ok", "ok", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.AlertService/ListAlertRules": ["401", "401", "401", "401", "DISABLED", "BOUNDARY", "BOUNDARY", "ok", "ok", "ok", "ok", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.AlertService/DeleteAlertRule": ["401", "401", "401", "401", "DISABLED", "BOUNDARY", "BOUNDARY", "CAPABILITY", "ok", "CAPABILITY", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.AlertService/ListAlertRuleTemplates": ["401", "401", "401", "401", "DISABLED", "BOUNDARY", "BOUNDARY", "ok", "ok", "ok", "ok", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.SilenceService/ListSilences": ["401", "401", "401", "401", "DISABLED", "BOUNDARY", "BOUNDARY", "ok", "ok", "ok", "ok", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.SilenceService/GetSilence": ["401", "401", "401", "401", "DISABLED", "BOUNDARY", "BOUNDARY", "ok", "ok", "ok", "ok", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.SilenceService/CreateSilence": ["401", "401", "401", "401", "CAPABILITY", "CAPABILITY", "BOUNDARY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.SilenceService/UpdateSilence": ["401", "401", "401", "401", "CAPABILITY", "CAPABILITY", "BOUNDARY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.SilenceService/ExpireSilence": ["401", "401", "401", "401", "CAPABILITY", "CAPABILITY", "BOUNDARY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.IncidentService/ListIncidents": ["401", "401", "401", "401", "DISABLED", "BOUNDARY", "BOUNDARY", "ok", "ok", "ok", "ok", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.IncidentService/GetIncident": ["401", "401", "401", "401", "DISABLED", "BOUNDARY", "BOUNDARY", "ok", "ok", "ok", "ok", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.IncidentService/AcknowledgeIncident": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.IncidentService/SnoozeIncident": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.IncidentService/UnsnoozeIncident": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.DestinationService/CreateDestination": ["401", "401", "401", "401", "CAPABILITY", "CAPABILITY", "BOUNDARY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.DestinationService/GetDestination": ["401", "401", "401", "401", "CAPABILITY", "CAPABILITY", "BOUNDARY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "ok", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.DestinationService/ListDestinations": ["401", "401", "401", "401", "CAPABILITY", "CAPABILITY", "BOUNDARY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "ok", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.DestinationService/UpdateDestination": ["401", "401", "401", "401", "CAPABILITY", "CAPABILITY", "BOUNDARY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.DestinationService/DeleteDestination": ["401", "401", "401", "401", "CAPABILITY", "CAPABILITY", "BOUNDARY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.DestinationService/VerifyDestination": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "ok", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.DestinationService/SendTestNotification": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.DestinationService/RotateWebhookSecret": ["401", "401", "401", "401", "CAPABILITY", "CAPABILITY", "BOUNDARY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.DestinationService/ConfirmDestination": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.DestinationService/ListDeliveries": ["401", "401", "401", "401", "CAPABILITY", "CAPABILITY", "BOUNDARY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "ok", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.DestinationService/GetDelivery": ["401", "401", "401", "401", "CAPABILITY", "CAPABILITY", "BOUNDARY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "ok", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.AuditService/ListAuditEvents": ["401", "401", "401", "401", "CAPABILITY", "CAPABILITY", "BOUNDARY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.monitoring.v1.DestinationService/ListMembers": ["401", "401", "401", "401", "CAPABILITY", "CAPABILITY", "BOUNDARY", "CAPABILITY", "CAPABILITY", "CAPABILITY", "ok", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.SessionService/Login": ["ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok"],
  "svc.iam.v1.SessionService/WhoAmI": ["401", "401", "401", "401", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "401", "ok"],
  "svc.iam.v1.ServiceAccountService/CreateServiceAccount": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.ServiceAccountService/GetServiceAccount": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "ok", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.ServiceAccountService/ListServiceAccounts": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "ok", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.ServiceAccountService/DisableServiceAccount": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.ServiceAccountService/EnableServiceAccount": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.KeyService/CreateKey": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.KeyService/ListKeys": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.KeyService/RotateKey": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.KeyService/RevokeKey": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.KeyService/RecoverLostKey": ["401", "401", "401", "401", "HUMAN", "HUMAN", "ok", "HUMAN", "HUMAN", "HUMAN", "ok", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.AutomationService/StartCITrustSetup": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.AutomationService/VerifyCITrustSetup": ["ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok"],
  "svc.iam.v1.AutomationService/ApproveCITrust": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.AutomationService/GetCITrust": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "ok", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.AutomationService/ListCITrusts": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "ok", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.AutomationService/UpdateCITrustPermissions": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.AutomationService/DisableCITrust": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.AutomationService/DeleteCITrust": ["401", "401", "401", "401", "HUMAN", "HUMAN", "BOUNDARY", "HUMAN", "HUMAN", "HUMAN", "CAPABILITY", "ok", "401", "BOUNDARY"],
  "svc.iam.v1.AutomationService/ExchangeCIToken": ["ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok"],
  "svc.admin.v1.ProjectService/CreateProject": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.ProjectService/GetProject": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.ProjectService/ListProjects": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.ProjectService/SetMember": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.ProjectService/RemoveMember": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.ProjectService/ListMembers": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.UserService/CreateUser": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.UserService/ListUsers": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.VMService/CreateVM": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.VMService/GetVM": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.VMService/UpdateVM": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.VMService/DeleteVM": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.VMService/ListVMs": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.VMService/RecordVMStateEvent": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.VMService/ListVMStateEvents": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.VMService/CreateMaintenanceWindow": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.VMService/ListMaintenanceWindows": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.OperationsService/Backup": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.OperationsService/ListDeliveryBacklog": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.OperationsService/ListProjectUsage": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.admin.v1.AuditService/ListAuditEvents": ["401", "401", "401", "401", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "OPERATOR", "401", "ok"],
  "svc.iam.v1.SessionService/Logout": ["401", "401", "401", "401", "HUMAN", "HUMAN", "ok", "HUMAN", "HUMAN", "HUMAN", "ok", "ok", "401", "BOUNDARY"],
};
