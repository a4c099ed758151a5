import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import { IncidentService } from "@svc/sdk/gen/svc/monitoring/v1/alerts_pb";
import {
  acknowledgeIncident,
  getIncident,
  listIncidents,
  parseIncidentName,
  snoozeIncident,
  unsnoozeIncident,
} from "../../alerts/incidents.ts";
import type { Db } from "../../db/database.ts";
import { authorizeProject } from "../../iam/principal.ts";
import { parseProjectName } from "../../inventory/names.ts";
import { silencesMuting } from "../../notify/silences.ts";
import { humanOf, principalOf } from "../context.ts";

export interface IncidentDeps {
  db: Db;
  pageKey: Buffer;
  now: () => number;
}

export function registerIncidentService(router: ConnectRouter, deps: IncidentDeps): void {
  const { db, now } = deps;

  /**
   * Acknowledge and snooze: a console session (the access table already refuses keys and CI tokens)
   * of a member whose role grants monitoring.write (owner, editor); a viewer is refused (CAPABILITY).
   */
  async function writer(ctx: HandlerContext, name: string): Promise<string> {
    const { userId } = humanOf(ctx);
    await authorizeProject(db, principalOf(ctx), parseIncidentName(name).projectId, "monitoring.write");
    return userId;
  }

  router.service(IncidentService, {
    listIncidents: async (r, ctx) => {
      await authorizeProject(db, principalOf(ctx), parseProjectName(r.projectName), "monitoring.read");
      return listIncidents(db, deps.pageKey, r);
    },
    getIncident: async (r, ctx) => {
      const { projectId } = parseIncidentName(r.name);
      await authorizeProject(db, principalOf(ctx), projectId, "monitoring.read");
      const inc = await getIncident(db, r.name);
      const ruleId = inc.rule.slice(inc.rule.lastIndexOf("/") + 1);
      return { ...inc, silencedBy: await silencesMuting(db, projectId, ruleId, inc.vmName, now()) };
    },
    acknowledgeIncident: async (r, ctx) => acknowledgeIncident(db, await writer(ctx, r.name), r.name, now()),
    snoozeIncident: async (r, ctx) => {
      const userId = await writer(ctx, r.name);
      // int64 seconds: anything beyond 2^53 ms is far past the 30-day limit and refused as such.
      return snoozeIncident(db, userId, r.name, Number(r.snoozeUntilUnix) * 1000, now());
    },
    unsnoozeIncident: async (r, ctx) => unsnoozeIncident(db, await writer(ctx, r.name), r.name, now()),
  });
}
