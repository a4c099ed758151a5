import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import { AutomationService } from "@svc/sdk/gen/svc/iam/v1/automation_pb";
import { noteActor } from "../../audit/context.ts";
import { ciTokenActor } from "../../iam/actor.ts";
import type { CiAutomation } from "../../iam/ci/service.ts";
import { humanOf, remoteAddressKey } from "../context.ts";

export interface AutomationDeps {
  readonly ci: CiAutomation;
  /** Public API origin shown at setup; when unset, the origin the console called. */
  readonly apiOrigin?: string;
}

function originOf(ctx: HandlerContext, configured: string | undefined): string {
  if (configured) return configured.replace(/\/+$/, "");
  const host = ctx.requestHeader.get("host") ?? "127.0.0.1";
  const proto = ctx.requestHeader.get("x-forwarded-proto") === "https" ? "https" : "http";
  return `${proto}://${host}`;
}

/** svc.iam.v1.AutomationService: thin mapping onto iam/ci. */
export function registerAutomationService(router: ConnectRouter, deps: AutomationDeps): void {
  const { ci } = deps;
  const source = (ctx: HandlerContext) => ctx.values.get(remoteAddressKey);
  router.service(AutomationService, {
    startCITrustSetup: async (r, ctx) => {
      const s = await ci.startSetup(humanOf(ctx).userId, {
        serviceAccount: r.serviceAccount,
        intended: r.intended,
        issuer: r.issuer,
        trust: r.trust,
      });
      return {
        setupId: s.setupId,
        pairingCode: s.pairingCode,
        audience: s.audience,
        apiOrigin: originOf(ctx, deps.apiOrigin),
        expireTimeUnix: BigInt(Math.floor(s.expireTimeMs / 1000)),
        trust: s.trust,
      };
    },
    verifyCITrustSetup: async (r, ctx) => {
      const { trust } = await ci.verifySetup(r, source(ctx));
      return { trustName: trust.name, state: trust.state, observed: trust.observed };
    },
    approveCITrust: (r, ctx) => ci.approve(humanOf(ctx).userId, r),
    getCITrust: (r, ctx) => ci.get(humanOf(ctx).userId, r.name),
    listCITrusts: async (r, ctx) => ({ trusts: await ci.list(humanOf(ctx).userId, r.parent) }),
    updateCITrustPermissions: (r, ctx) => ci.updatePermissions(humanOf(ctx).userId, r),
    disableCITrust: (r, ctx) => ci.disable(humanOf(ctx).userId, r.name),
    deleteCITrust: async (r, ctx) => {
      await ci.delete(humanOf(ctx).userId, r.name);
      return {};
    },
    exchangeCIToken: async (r, ctx) => {
      const t = await ci.exchange(r, source(ctx));
      // The call carried no credential; the workflow whose identity token verified is who exchanged.
      noteActor(ctx.values, ciTokenActor(t.identity));
      return { accessToken: t.accessToken, projectName: t.projectName };
    },
  });
}
