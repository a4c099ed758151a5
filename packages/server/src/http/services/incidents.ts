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
import { silencedBy } from "../../notify/silences.ts";
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

  /**
   * Every incident the service answers carries `silencedBy` now, by the rule the dispatcher applies
   * (notify/silences.ts silencesMutingIncident): a page, a list, or an acknowledgement's answer never
   * says otherwise than the deliveries made at that time.
   */
  async function withSilences<I extends { rule: string; vmName: string }>(projectId: string, incidents: I[]) {
    const by = await silencedBy(
      db,
      projectId,
      incidents.map((i) => ({ ruleId: i.rule.slice(i.rule.lastIndexOf("/") + 1), vmName: i.vmName })),
      now(),
    );
    return incidents.map((i, k) => ({ ...i, silencedBy: by[k] }));
  }
  const one = async <I extends { name: string; rule: string; vmName: string }>(inc: I) =>
    (await withSilences(parseIncidentName(inc.name).projectId, [inc]))[0];

  router.service(IncidentService, {
    listIncidents: async (r, ctx) => {
      const projectId = parseProjectName(r.projectName);
      await authorizeProject(db, principalOf(ctx), projectId, "monitoring.read");
      const page = await listIncidents(db, deps.pageKey, r);
      return { ...page, incidents: await withSilences(projectId, page.incidents) };
    },
    getIncident: async (r, ctx) => {
      await authorizeProject(db, principalOf(ctx), parseIncidentName(r.name).projectId, "monitoring.read");
      return one(await getIncident(db, r.name));
    },
    acknowledgeIncident: async (r, ctx) =>
      one(await acknowledgeIncident(db, await writer(ctx, r.name), r.name, now())),
    snoozeIncident: async (r, ctx) => {
      const userId = await writer(ctx, r.name);
      // int64 seconds: anything beyond 2^53 ms is far past the 30-day limit and refused as such.
      return one(await snoozeIncident(db, userId, r.name, Number(r.snoozeUntilUnix) * 1000, now()));
    },
    unsnoozeIncident: async (r, ctx) =>
      one(await unsnoozeIncident(db, await writer(ctx, r.name), r.name, now())),
  });
}
