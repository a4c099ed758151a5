/**
 * Capabilities and the one table that says who may call each RPC. A method absent from the table is
 * refused to everyone: adding a method means deciding its row here.
 */
export const capabilities = ["monitoring.read", "monitoring.write"] as const;
export type Capability = (typeof capabilities)[number];

export function isCapability(s: string): s is Capability {
  return (capabilities as readonly string[]).includes(s);
}

/**
 * - `public`: no credential (login, CI exchange; each method authenticates what it receives).
 * - `authenticated`: any valid credential.
 * - `human`: a console session only; keys and CI tokens are refused (HUMAN_ONLY).
 * - `operator`: the provider's operator token only.
 * - a capability: humans with a role granting it, and keys / CI tokens carrying it (intersected with
 *   the identity's current permissions on every request).
 */
export type MethodAccess = "public" | "authenticated" | "human" | "operator" | Capability;

export const methodAccess: Readonly<Record<string, MethodAccess>> = {
  "svc.monitoring.v1.MonitoringService/QueryVMMonitoring": "monitoring.read",
  "svc.monitoring.v1.MonitoringService/ListVMMonitoring": "monitoring.read",
  "svc.monitoring.v1.MonitoringService/EnableExpandedMonitoring": "human",

  "svc.monitoring.v1.AlertService/SaveAlertRule": "monitoring.write",
  "svc.monitoring.v1.AlertService/DeleteAlertRule": "monitoring.write",
  "svc.monitoring.v1.AlertService/PreviewAlertRule": "monitoring.read",
  "svc.monitoring.v1.AlertService/GetAlertRule": "monitoring.read",
  "svc.monitoring.v1.AlertService/ListAlertRules": "monitoring.read",
  "svc.monitoring.v1.AlertService/ListAlertRuleTemplates": "monitoring.read",

  "svc.monitoring.v1.IncidentService/ListIncidents": "monitoring.read",
  "svc.monitoring.v1.IncidentService/GetIncident": "monitoring.read",
  // Human attention: keys and CI tokens are refused (SPEC §4, "human dashboard operations").
  "svc.monitoring.v1.IncidentService/AcknowledgeIncident": "human",
  "svc.monitoring.v1.IncidentService/SnoozeIncident": "human",
  "svc.monitoring.v1.IncidentService/UnsnoozeIncident": "human",

  // Silences (issue 30): read keys list them; humans whose role grants monitoring.write and write keys
  // create, edit and expire them.
  "svc.monitoring.v1.SilenceService/ListSilences": "monitoring.read",
  "svc.monitoring.v1.SilenceService/GetSilence": "monitoring.read",
  "svc.monitoring.v1.SilenceService/CreateSilence": "monitoring.write",
  "svc.monitoring.v1.SilenceService/UpdateSilence": "monitoring.write",
  "svc.monitoring.v1.SilenceService/ExpireSilence": "monitoring.write",

  "svc.monitoring.v1.DestinationService/CreateDestination": "monitoring.write",
  "svc.monitoring.v1.DestinationService/UpdateDestination": "monitoring.write",
  "svc.monitoring.v1.DestinationService/DeleteDestination": "monitoring.write",
  "svc.monitoring.v1.DestinationService/RotateWebhookSecret": "monitoring.write",
  "svc.monitoring.v1.DestinationService/GetDestination": "monitoring.read",
  "svc.monitoring.v1.DestinationService/ListDestinations": "monitoring.read",
  "svc.monitoring.v1.DestinationService/ListDeliveries": "monitoring.read",
  "svc.monitoring.v1.DestinationService/GetDelivery": "monitoring.read",
  // Human dashboard operations (SPEC §4): a recipient verifies their own address; test sends.
  "svc.monitoring.v1.DestinationService/VerifyDestination": "human",
  "svc.monitoring.v1.DestinationService/SendTestNotification": "human",

  "svc.iam.v1.SessionService/Login": "public",
  "svc.iam.v1.SessionService/Logout": "human",
  "svc.iam.v1.SessionService/WhoAmI": "authenticated",

  "svc.iam.v1.ServiceAccountService/CreateServiceAccount": "human",
  "svc.iam.v1.ServiceAccountService/GetServiceAccount": "human",
  "svc.iam.v1.ServiceAccountService/ListServiceAccounts": "human",
  "svc.iam.v1.ServiceAccountService/DisableServiceAccount": "human",
  "svc.iam.v1.ServiceAccountService/EnableServiceAccount": "human",

  "svc.iam.v1.KeyService/CreateKey": "human",
  "svc.iam.v1.KeyService/ListKeys": "human",
  "svc.iam.v1.KeyService/RotateKey": "human",
  "svc.iam.v1.KeyService/RevokeKey": "human",
  "svc.iam.v1.KeyService/RecoverLostKey": "human",

  "svc.iam.v1.AutomationService/StartCITrustSetup": "human",
  "svc.iam.v1.AutomationService/VerifyCITrustSetup": "public",
  "svc.iam.v1.AutomationService/ApproveCITrust": "human",
  "svc.iam.v1.AutomationService/GetCITrust": "human",
  "svc.iam.v1.AutomationService/ListCITrusts": "human",
  "svc.iam.v1.AutomationService/UpdateCITrustPermissions": "human",
  "svc.iam.v1.AutomationService/DisableCITrust": "human",
  "svc.iam.v1.AutomationService/DeleteCITrust": "human",
  "svc.iam.v1.AutomationService/ExchangeCIToken": "public",

  "svc.admin.v1.ProjectService/CreateProject": "operator",
  "svc.admin.v1.ProjectService/GetProject": "operator",
  "svc.admin.v1.ProjectService/ListProjects": "operator",
  "svc.admin.v1.ProjectService/SetMember": "operator",
  "svc.admin.v1.ProjectService/RemoveMember": "operator",
  "svc.admin.v1.ProjectService/ListMembers": "operator",
  "svc.admin.v1.UserService/CreateUser": "operator",
  "svc.admin.v1.UserService/ListUsers": "operator",
  "svc.admin.v1.VMService/CreateVM": "operator",
  "svc.admin.v1.VMService/GetVM": "operator",
  "svc.admin.v1.VMService/UpdateVM": "operator",
  "svc.admin.v1.VMService/DeleteVM": "operator",
  "svc.admin.v1.VMService/ListVMs": "operator",
  "svc.admin.v1.VMService/RecordVMStateEvent": "operator",
  "svc.admin.v1.VMService/ListVMStateEvents": "operator",
  "svc.admin.v1.VMService/CreateMaintenanceWindow": "operator",
  "svc.admin.v1.VMService/ListMaintenanceWindows": "operator",
};

export type Role = "owner" | "editor" | "viewer";
export const roles: readonly Role[] = ["owner", "editor", "viewer"];

/** What a membership role grants in its project. */
export const rolePermissions: Readonly<Record<Role, readonly Capability[]>> = {
  owner: ["monitoring.read", "monitoring.write"],
  editor: ["monitoring.read", "monitoring.write"],
  viewer: ["monitoring.read"],
};

/** Service-account permission templates (DESIGN §9). */
export const serviceAccountTemplates: Readonly<Record<string, readonly Capability[]>> = {
  "Metrics scraper": ["monitoring.read"],
  "Alert manager": ["monitoring.read", "monitoring.write"],
};
