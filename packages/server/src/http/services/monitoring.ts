import type { ConnectRouter } from "@connectrpc/connect";
import { MonitoringService } from "@svc/sdk/gen/svc/monitoring/v1/monitoring_pb";
import type { Db } from "../../db/database.ts";
import { SvcError } from "../../errors.ts";
import { authorizeProject } from "../../iam/principal.ts";
import { parseProjectName, parseVmName } from "../../inventory/names.ts";
import { type LatestVmMetrics, listVmMonitoring } from "../../metrics/list.ts";
import { principalOf } from "../context.ts";

export interface MonitoringDeps {
  db: Db;
  pageKey: Buffer;
  latest?: LatestVmMetrics;
}

export function registerMonitoringService(router: ConnectRouter, deps: MonitoringDeps): void {
  const { db } = deps;
  router.service(MonitoringService, {
    listVMMonitoring: async (r, ctx) => {
      await authorizeProject(db, principalOf(ctx), parseProjectName(r.projectName), "monitoring.read");
      return listVmMonitoring(db, deps.pageKey, r, deps.latest);
    },
    queryVMMonitoring: async (r, ctx) => {
      await authorizeProject(db, principalOf(ctx), parseVmName(r.name).projectId, "monitoring.read");
      // TODO(#5): served once the metrics store and query engine are wired in.
      throw new SvcError("unimplemented", "QueryVMMonitoring is not available yet");
    },
  });
}
