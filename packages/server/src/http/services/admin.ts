import type { ConnectRouter } from "@connectrpc/connect";
import {
  OperationsService,
  ProjectService,
  UserService,
  VMService,
} from "@svc/sdk/gen/svc/admin/v1/admin_pb";
import { type BackupSources, takeBackup } from "../../backup/backup.ts";
import type { BackupMetrics } from "../../backup/instrumentation.ts";
import type { Db } from "../../db/database.ts";
import * as users from "../../iam/users.ts";
import * as projects from "../../inventory/projects.ts";
import * as vms from "../../inventory/vms.ts";
import type { MetricsBackend } from "../../metrics/backend.ts";
import { listProjectUsage, type UsageSources } from "../../metrics/usage.ts";
import { listDeliveryBacklog } from "../../notify/backlog.ts";

/** svc.admin.v1: provider-side inventory. Thin: the operator check is in the guard (http/auth.ts). */
export function registerAdminServices(
  router: ConnectRouter,
  deps: {
    db: Db;
    now: () => number;
    backup: BackupSources;
    backupMetrics?: BackupMetrics;
    metrics: MetricsBackend;
    usage: UsageSources;
  },
): void {
  const { db, now } = deps;
  router.service(OperationsService, {
    backup: async (r) => {
      const take = () => takeBackup(deps.backup, r.directory);
      const {
        directory,
        manifest: m,
        linkedBytes,
      } = await (deps.backupMetrics?.measure(now, take) ?? take());
      return {
        directory,
        snapshotTimeUnixMs: BigInt(m.snapshotTimeUnixMs),
        files: BigInt(m.files.length),
        totalBytes: BigInt(m.totalBytes),
        linkedBytes: BigInt(linkedBytes),
        tsdbWalFormat: m.formats.tsdbWal,
        tsdbBlockFormat: m.formats.tsdbBlock,
        schemaVersion: m.formats.schema,
        schemaMigration: m.formats.schemaMigration,
      };
    },
    listDeliveryBacklog: (r) => listDeliveryBacklog(db, now(), r),
    listProjectUsage: (r) => listProjectUsage(db, deps.metrics, deps.usage, now(), r),
  });
  router.service(ProjectService, {
    createProject: (r) => projects.createProject(db, r, now()),
    getProject: (r) => projects.getProject(db, r.name),
    listProjects: async () => ({ projects: await projects.listProjects(db) }),
    setMember: (r) => users.setMember(db, r, now()),
    removeMember: async (r) => {
      await users.removeMember(db, r);
      return {};
    },
    listMembers: async (r) => ({ members: await users.listMembers(db, r.project) }),
  });
  router.service(UserService, {
    createUser: (r) => users.createUser(db, r, now()),
    listUsers: async () => ({ users: await users.listUsers(db) }),
  });
  router.service(VMService, {
    createVM: (r) => vms.createVm(db, r, now()),
    getVM: (r) => vms.getVm(db, r.name),
    updateVM: (r) => vms.updateVm(db, r),
    deleteVM: (r) => vms.deleteVm(db, r.name, now()),
    listVMs: async (r) => ({ vms: await vms.listVms(db, r.parent) }),
    recordVMStateEvent: (r) => vms.recordStateEvent(db, r, now()),
    listVMStateEvents: async (r) => ({ events: await vms.listStateEvents(db, r.vm) }),
    createMaintenanceWindow: (r) => vms.createMaintenanceWindow(db, r),
    listMaintenanceWindows: async (r) => ({ windows: await vms.listMaintenanceWindows(db, r.parent) }),
  });
}
