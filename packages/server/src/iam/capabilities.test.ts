import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";
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
import { methodAccess } from "./capabilities.ts";

const services: DescService[] = [
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

it("every RPC of every service has exactly one row in the access table, and no row names a missing RPC", () => {
  const rpcs = services.flatMap((s) => s.methods.map((m) => `${s.typeName}/${m.name}`));
  assert.deepEqual([...rpcs].sort(), Object.keys(methodAccess).sort());
});

it("docs/api.md documents every RPC", () => {
  const doc = readFileSync(join(import.meta.dirname, "../../../../docs/api.md"), "utf8");
  for (const key of Object.keys(methodAccess)) {
    const method = key.split("/")[1];
    assert.ok(doc.includes(method), `${key} is not in docs/api.md`);
  }
});
