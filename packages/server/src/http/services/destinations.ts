import type { ConnectRouter } from "@connectrpc/connect";
import { type Destination, DestinationService } from "@svc/sdk/gen/svc/monitoring/v1/destinations_pb";
import type { Db } from "../../db/database.ts";
import { getDelivery, listDeliveries } from "../../notify/deliveries.ts";
import {
  confirmDestination,
  createDestination,
  type DestinationsDeps,
  type DestinationView,
  deleteDestination,
  getDestination,
  listDestinations,
  listMembers,
  rotateWebhookSecret,
  sendTestNotification,
  updateDestination,
  verifyDestination,
} from "../../notify/destinations.ts";
import { humanOf, principalOf } from "../context.ts";

export interface DestinationServiceDeps extends DestinationsDeps {
  readonly pageKey: Buffer;
  readonly db: Db;
  /** The evaluator's nudge, when a delete detached the destination from rules. */
  readonly onRulesChanged?: () => void;
}

function message(v: DestinationView): Destination {
  return {
    $typeName: "svc.monitoring.v1.Destination",
    ...v,
    recipients: v.recipients.map((r) => ({ $typeName: "svc.monitoring.v1.EmailRecipient", ...r })),
    secrets: v.secrets.map((s) => ({ $typeName: "svc.monitoring.v1.WebhookSecretInfo", ...s })),
  };
}

export function registerDestinationService(router: ConnectRouter, deps: DestinationServiceDeps): void {
  const { db } = deps;
  router.service(DestinationService, {
    createDestination: async (r, ctx) => {
      const c = await createDestination(deps, principalOf(ctx), r);
      return { destination: message(c.destination), webhookSecret: c.webhookSecret, replayed: c.replayed };
    },
    getDestination: async (r, ctx) => message(await getDestination(deps, principalOf(ctx), r.name)),
    listDestinations: async (r, ctx) => ({
      destinations: (await listDestinations(deps, principalOf(ctx), r.projectName)).map(message),
    }),
    updateDestination: async (r, ctx) => message(await updateDestination(deps, principalOf(ctx), r)),
    deleteDestination: async (r, ctx) => deleteDestination(deps, principalOf(ctx), r),
    confirmDestination: async (r, ctx) => message(await confirmDestination(deps, humanOf(ctx), r.name)),
    verifyDestination: async (r, ctx) => message(await verifyDestination(deps, humanOf(ctx), r.name, r.code)),
    sendTestNotification: async (r, ctx) => {
      const p = principalOf(ctx);
      const id = await sendTestNotification(deps, humanOf(ctx), r.name);
      return getDelivery(db, p, `${r.name}/deliveries/${id}`);
    },
    rotateWebhookSecret: async (r, ctx) => {
      const x = await rotateWebhookSecret(deps, principalOf(ctx), r.name, r.overlapSeconds);
      return { destination: message(x.destination), webhookSecret: x.webhookSecret };
    },
    listMembers: async (r, ctx) => ({
      members: (await listMembers(db, principalOf(ctx), r.projectName)).map((m) => ({
        $typeName: "svc.monitoring.v1.ProjectMember" as const,
        ...m,
      })),
    }),
    listDeliveries: async (r, ctx) => listDeliveries(db, principalOf(ctx), deps.pageKey, r),
    getDelivery: async (r, ctx) => getDelivery(db, principalOf(ctx), r.name),
  });
}
