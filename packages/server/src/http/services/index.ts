/**
 * Every Connect service of the API role, registered on one router. Loaded at the first RPC, with
 * Connect and the protobuf descriptors (http/rpc.ts); ../rpc-routes.ts lists the routes it adds, which
 * a start registers without loading it (rpc-routes.test.ts compares the two).
 */
import type { ConnectRouter } from "@connectrpc/connect";
import { registerAdminServices } from "./admin.ts";
import { registerAlertService } from "./alerts.ts";
import { registerAuditServices } from "./audit.ts";
import { registerAutomationService } from "./automation.ts";
import { registerDestinationService } from "./destinations.ts";
import { registerIamServices } from "./iam.ts";
import { registerIncidentService } from "./incidents.ts";
import { registerMonitoringService } from "./monitoring.ts";
import { registerSilenceService } from "./silences.ts";

export interface ServicesDeps {
  readonly monitoring: Parameters<typeof registerMonitoringService>[1];
  readonly iam: Parameters<typeof registerIamServices>[1];
  readonly audit: Parameters<typeof registerAuditServices>[1];
  readonly admin: Parameters<typeof registerAdminServices>[1];
  readonly automation: Parameters<typeof registerAutomationService>[1];
  readonly alerts: Parameters<typeof registerAlertService>[1];
  readonly destinations: Parameters<typeof registerDestinationService>[1];
  readonly incidents: Parameters<typeof registerIncidentService>[1];
  readonly silences: Parameters<typeof registerSilenceService>[1];
}

export function registerServices(router: ConnectRouter, deps: ServicesDeps): void {
  registerMonitoringService(router, deps.monitoring);
  registerIamServices(router, deps.iam);
  registerAuditServices(router, deps.audit);
  registerAdminServices(router, deps.admin);
  registerAutomationService(router, deps.automation);
  registerAlertService(router, deps.alerts);
  registerDestinationService(router, deps.destinations);
  registerIncidentService(router, deps.incidents);
  registerSilenceService(router, deps.silences);
}
