/**
 * Capabilities and the one table that says who may call each RPC. A method absent from the table is
 * refused to everyone: adding a method means deciding its row here.
 */
export const capabilities = [
  "monitoring.read",
  "monitoring.write",
  "notifications.write",
  "silences.write",
  "audit.read",
] as const;
export type Capability = (typeof capabilities)[number];

export function isCapability(s: string): s is Capability {
  return (capabilities as readonly string[]).includes(s);
}

/**
 * Who may call a method; every row is checked before the request body is decoded (http/auth.ts), in the
 * project the request names (its `name`, `parent`, `projectName` or `serviceAccount`, see
 * {@link resourceFields}), before anything is loaded.
 *
 * - `public`: no credential (login, CI exchange; each method authenticates what it receives).
 * - `authenticated`: any valid credential.
 * - `operator`: the provider's operator token only.
 * - a capability: members whose role grants it, and keys / CI tokens carrying it (intersected with
 *   the identity's current permissions on every request).
 * - `{people, credentials}`: members whose role grants `people`, keys / CI tokens carrying `credentials`.
 * - `{human}`: a console session only (keys and CI tokens: HUMAN_ONLY), of a member of the named project
 *   (`member`), of an owner (`owner`), of an owner for a service account's keys and any member for their
 *   own personal keys (`keyOwner`), or of a member whose role grants a capability.
 */
export type MethodAccess =
  | "public"
  | "authenticated"
  | "operator"
  | Capability
  | { readonly people: Capability; readonly credentials: Capability }
  | { readonly human: "member" | "owner" | "keyOwner" | Capability };

/** The request fields that name the resource, and so its project, in the order they are looked for. */
export const resourceFields = ["name", "parent", "projectName", "serviceAccount"] as const;

const member = { human: "member" } as const;
const owner = { human: "owner" } as const;
const keyOwner = { human: "keyOwner" } as const;
/**
 * Where alerts go, and what was sent there (recipients' addresses, webhook URLs, delivery records), is for
 * the people of the project and for credentials that manage notifications, not for a read key pasted
 * into a dashboard (issue 35): monitoring.read is queries, previews and inventory (docs/api.md#capabilities).
 */
export const notificationRead = { people: "monitoring.read", credentials: "notifications.write" } as const;

export const methodAccess: Readonly<Record<string, MethodAccess>> = {
  // Read rows, each with its reason (docs/api.md#capabilities: monitoring.read = queries, previews, inventory listing).
  // Metric queries and the inventory: the capability's own definition.
  "svc.monitoring.v1.MonitoringService/QueryVMMonitoring": "monitoring.read",
  "svc.monitoring.v1.MonitoringService/ListVMMonitoring": "monitoring.read",
  "svc.monitoring.v1.MonitoringService/EnableExpandedMonitoring": { human: "monitoring.write" },

  "svc.monitoring.v1.AlertService/SaveAlertRule": "monitoring.write",
  "svc.monitoring.v1.AlertService/DeleteAlertRule": "monitoring.write",
  // Previews: named by docs/api.md#capabilities. Rules and templates: what is being watched, a monitoring read (a rule
  // shows the destinations it notifies by name only).
  "svc.monitoring.v1.AlertService/PreviewAlertRule": "monitoring.read",
  "svc.monitoring.v1.AlertService/GetAlertRule": "monitoring.read",
  "svc.monitoring.v1.AlertService/ListAlertRules": "monitoring.read",
  "svc.monitoring.v1.AlertService/ListAlertRuleTemplates": "monitoring.read",

  // Incidents: the monitoring state of the VMs (in-app notifications); they hold no recipient or URL.
  "svc.monitoring.v1.IncidentService/ListIncidents": "monitoring.read",
  "svc.monitoring.v1.IncidentService/GetIncident": "monitoring.read",
  // Human attention: keys and CI tokens are refused (docs/api.md: human dashboard operations).
  "svc.monitoring.v1.IncidentService/AcknowledgeIncident": { human: "monitoring.write" },
  "svc.monitoring.v1.IncidentService/SnoozeIncident": { human: "monitoring.write" },
  "svc.monitoring.v1.IncidentService/UnsnoozeIncident": { human: "monitoring.write" },

  // Silences (issue 30): read keys list them. Muting the people who should be woken is not "saving alert
  // rules" (docs/api.md#capabilities) either (issue 41): creating, editing and expiring need silences.write, which owners'
  // and editors' roles grant and a key or CI token carries only when chosen explicitly (a key's silence
  // is bounded in length, notify/silences.ts).
  "svc.monitoring.v1.SilenceService/ListSilences": "monitoring.read",
  "svc.monitoring.v1.SilenceService/GetSilence": "monitoring.read",
  "svc.monitoring.v1.SilenceService/CreateSilence": "silences.write",
  "svc.monitoring.v1.SilenceService/UpdateSilence": "silences.write",
  "svc.monitoring.v1.SilenceService/ExpireSilence": "silences.write",

  // Where alerts go is not "saving alert rules" (docs/api.md#capabilities): a rule-saving key must not redirect or
  // silence notifications, so these need their own capability, never implied by monitoring.write.
  "svc.monitoring.v1.DestinationService/CreateDestination": "notifications.write",
  "svc.monitoring.v1.DestinationService/UpdateDestination": "notifications.write",
  "svc.monitoring.v1.DestinationService/DeleteDestination": "notifications.write",
  "svc.monitoring.v1.DestinationService/RotateWebhookSecret": "notifications.write",
  // Destinations (recipients' addresses, webhook URLs) and deliveries: people and notifications.write,
  // never monitoring.read alone (see notificationRead).
  "svc.monitoring.v1.DestinationService/GetDestination": notificationRead,
  "svc.monitoring.v1.DestinationService/ListDestinations": notificationRead,
  "svc.monitoring.v1.DestinationService/ListDeliveries": notificationRead,
  "svc.monitoring.v1.DestinationService/GetDelivery": notificationRead,
  // Members' names and emails, to pick email recipients by name (issue 27): whoever reads destinations.
  "svc.monitoring.v1.DestinationService/ListMembers": notificationRead,
  // Human dashboard operations (docs/api.md): a recipient verifies their own address; test sends.
  "svc.monitoring.v1.DestinationService/VerifyDestination": member,
  "svc.monitoring.v1.DestinationService/SendTestNotification": { human: "notifications.write" },
  // A person vouches for a URL a key or CI token set (issue 34): a leaked key cannot start sending alone.
  "svc.monitoring.v1.DestinationService/ConfirmDestination": { human: "notifications.write" },

  // Who did what (issue 29): owners and keys carrying audit.read, never implied by another capability.
  "svc.monitoring.v1.AuditService/ListAuditEvents": "audit.read",

  "svc.iam.v1.SessionService/Login": "public",
  "svc.iam.v1.SessionService/Logout": member,
  "svc.iam.v1.SessionService/WhoAmI": "authenticated",

  "svc.iam.v1.ServiceAccountService/CreateServiceAccount": owner,
  "svc.iam.v1.ServiceAccountService/GetServiceAccount": member,
  "svc.iam.v1.ServiceAccountService/ListServiceAccounts": member,
  "svc.iam.v1.ServiceAccountService/DisableServiceAccount": owner,
  "svc.iam.v1.ServiceAccountService/EnableServiceAccount": owner,

  "svc.iam.v1.KeyService/CreateKey": keyOwner,
  "svc.iam.v1.KeyService/ListKeys": keyOwner,
  "svc.iam.v1.KeyService/RotateKey": keyOwner,
  "svc.iam.v1.KeyService/RevokeKey": keyOwner,
  "svc.iam.v1.KeyService/RecoverLostKey": member,

  "svc.iam.v1.AutomationService/StartCITrustSetup": owner,
  "svc.iam.v1.AutomationService/VerifyCITrustSetup": "public",
  "svc.iam.v1.AutomationService/ApproveCITrust": owner,
  "svc.iam.v1.AutomationService/GetCITrust": member,
  "svc.iam.v1.AutomationService/ListCITrusts": member,
  "svc.iam.v1.AutomationService/UpdateCITrustPermissions": owner,
  "svc.iam.v1.AutomationService/DisableCITrust": owner,
  "svc.iam.v1.AutomationService/DeleteCITrust": owner,
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
  "svc.admin.v1.OperationsService/Backup": "operator",
  "svc.admin.v1.OperationsService/ListDeliveryBacklog": "operator",
  "svc.admin.v1.OperationsService/ListProjectUsage": "operator",
  "svc.admin.v1.AuditService/ListAuditEvents": "operator",
};

export type Role = "owner" | "editor" | "viewer";
export const roles: readonly Role[] = ["owner", "editor", "viewer"];

/** What a membership role grants in its project. */
export const rolePermissions: Readonly<Record<Role, readonly Capability[]>> = {
  owner: ["monitoring.read", "monitoring.write", "notifications.write", "silences.write", "audit.read"],
  editor: ["monitoring.read", "monitoring.write", "notifications.write", "silences.write"],
  viewer: ["monitoring.read"],
};

/**
 * Service-account permission templates (docs/api.md#capabilities). `notifications.write` and `silences.write` come only
 * from their own templates, chosen explicitly: the templates that existed before them never imply them.
 */
export const serviceAccountTemplates: Readonly<Record<string, readonly Capability[]>> = {
  "Metrics scraper": ["monitoring.read"],
  "Alert manager": ["monitoring.read", "monitoring.write"],
  "Notification manager": ["monitoring.read", "notifications.write"],
  "Silence manager": ["monitoring.read", "silences.write"],
  Auditor: ["audit.read"],
};
