import type { DescService } from "@bufbuild/protobuf";
import {
  OperationsService,
  ProjectService,
  UserService,
  VMService,
} from "@svc/sdk/gen/svc/admin/v1/admin_pb";
import { AuditService as AdminAuditService } from "@svc/sdk/gen/svc/admin/v1/audit_pb";
import { AutomationService } from "@svc/sdk/gen/svc/iam/v1/automation_pb";
import { KeyService } from "@svc/sdk/gen/svc/iam/v1/key_pb";
import { ServiceAccountService } from "@svc/sdk/gen/svc/iam/v1/service_account_pb";
import { SessionService } from "@svc/sdk/gen/svc/iam/v1/session_pb";
import { AlertService, IncidentService } from "@svc/sdk/gen/svc/monitoring/v1/alerts_pb";
import { AuditService } from "@svc/sdk/gen/svc/monitoring/v1/audit_pb";
import { DestinationService } from "@svc/sdk/gen/svc/monitoring/v1/destinations_pb";
import { MonitoringService } from "@svc/sdk/gen/svc/monitoring/v1/monitoring_pb";
import { SilenceService } from "@svc/sdk/gen/svc/monitoring/v1/silences_pb";

/**
 * Every service of svc's protos, for the tests that walk every RPC (the capability table, the access
 * matrix, the audit log): a service added to the protos and not here makes their tables disagree.
 */
export const allServices: DescService[] = [
  MonitoringService,
  AlertService,
  IncidentService,
  DestinationService,
  SilenceService,
  SessionService,
  ServiceAccountService,
  KeyService,
  AutomationService,
  ProjectService,
  UserService,
  VMService,
  OperationsService,
  AuditService,
  AdminAuditService,
];
