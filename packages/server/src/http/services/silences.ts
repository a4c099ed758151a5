import type { ConnectRouter } from "@connectrpc/connect";
import { SilenceService } from "@svc/sdk/gen/svc/monitoring/v1/silences_pb";
import {
  createSilence,
  expireSilence,
  getSilence,
  listSilences,
  type SilencesDeps,
  updateSilence,
} from "../../notify/silences.ts";
import { principalOf } from "../context.ts";

export function registerSilenceService(router: ConnectRouter, deps: SilencesDeps): void {
  router.service(SilenceService, {
    createSilence: async (r, ctx) => createSilence(deps, principalOf(ctx), r),
    getSilence: async (r, ctx) => getSilence(deps, principalOf(ctx), r.name),
    listSilences: async (r, ctx) => listSilences(deps, principalOf(ctx), r),
    updateSilence: async (r, ctx) => updateSilence(deps, principalOf(ctx), r),
    expireSilence: async (r, ctx) => expireSilence(deps, principalOf(ctx), r.name),
  });
}
