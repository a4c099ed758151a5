import type { ConnectRouter } from "@connectrpc/connect";
import { AuditService as AdminAuditService } from "@svc/sdk/gen/svc/admin/v1/audit_pb";
import {
  type AuditEvent,
  AuditService,
  type ListAuditEventsRequest,
  type ListAuditEventsResponse,
} from "@svc/sdk/gen/svc/monitoring/v1/audit_pb";
import type { AuditFilter, AuditEvent as Event } from "../../audit/events.ts";
import { listAuditEvents } from "../../audit/events.ts";
import type { Db } from "../../db/database.ts";
import { invalidArgument } from "../../errors.ts";
import { authorizeProject, projectOfRequest } from "../../iam/principal.ts";
import { parseProjectName } from "../../inventory/names.ts";
import { principalOf } from "../context.ts";

/** svc.monitoring.v1.AuditService (one project) and svc.admin.v1.AuditService (every project). */
export function registerAuditServices(router: ConnectRouter, deps: { db: Db; pageKey: Buffer }): void {
  const { db, pageKey } = deps;
  router.service(AuditService, {
    listAuditEvents: async (r, ctx) => {
      const p = principalOf(ctx);
      const projectId = projectOfRequest(p, r.projectName);
      await authorizeProject(db, p, projectId, "audit.read");
      const named = /^projects\/([^/]+)/.exec(r.resource)?.[1];
      if (r.resource && named !== projectId)
        throw invalidArgument("resource", `must name a resource of projects/${projectId}`);
      return answer(await listAuditEvents(db, pageKey, filterOf(r, projectId)));
    },
  });
  router.service(AdminAuditService, {
    listAuditEvents: async (r) => {
      const projectId = r.projectName ? parseProjectName(r.projectName) : undefined;
      return answer(await listAuditEvents(db, pageKey, filterOf(r, projectId)));
    },
  });
}

function filterOf(r: ListAuditEventsRequest, projectId: string | undefined): AuditFilter {
  const time = (v: bigint, field: string) => {
    if (v < 0n) throw invalidArgument(field, "must be a Unix time in milliseconds, or 0 for unbounded");
    return v === 0n ? undefined : Number(v);
  };
  return {
    projectId,
    actor: r.actor,
    method: r.method,
    resource: r.resource,
    startTime: time(r.startTimeUnixMs, "startTimeUnixMs"),
    endTime: time(r.endTimeUnixMs, "endTimeUnixMs"),
    pageSize: r.pageSize,
    pageToken: r.pageToken,
  };
}

function answer(page: { events: Event[]; nextPageToken: string }): ListAuditEventsResponse {
  return {
    $typeName: "svc.monitoring.v1.ListAuditEventsResponse",
    events: page.events.map(
      (e): AuditEvent => ({
        $typeName: "svc.monitoring.v1.AuditEvent",
        name: e.projectId ? `projects/${e.projectId}/auditEvents/${e.id}` : `auditEvents/${e.id}`,
        timeUnixMs: BigInt(e.time),
        projectName: e.projectId ? `projects/${e.projectId}` : "",
        actorKind: e.actor.kind,
        actor: e.actor.name,
        actorDetail: { ...e.actor.detail },
        method: e.method,
        resource: e.resource,
        requestId: e.requestId,
        replay: e.replay,
        outcome: e.outcome,
        clientAddress: e.clientAddress,
        userAgent: e.userAgent,
        changedFields: [...e.changedFields],
      }),
    ),
    nextPageToken: page.nextPageToken || undefined,
  };
}
