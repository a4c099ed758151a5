import type { ConnectRouter } from "@connectrpc/connect";
import { KeyService } from "@svc/sdk/gen/svc/iam/v1/key_pb";
import { ServiceAccountService } from "@svc/sdk/gen/svc/iam/v1/service_account_pb";
import { SessionService } from "@svc/sdk/gen/svc/iam/v1/session_pb";
import { noteActor } from "../../audit/context.ts";
import type { Db } from "../../db/database.ts";
import * as keys from "../../iam/keys.ts";
import * as sa from "../../iam/service-accounts.ts";
import * as sessions from "../../iam/sessions.ts";
import type { SignInLimits } from "../../iam/sign-in-limits.ts";
import { humanOf, principalOf, remoteAddressKey } from "../context.ts";

export function registerIamServices(
  router: ConnectRouter,
  deps: { db: Db; now: () => number; signInLimits: SignInLimits },
): void {
  const { db, now } = deps;
  router.service(SessionService, {
    login: async (r, ctx) => {
      const address = ctx.values.get(remoteAddressKey);
      const s = await deps.signInLimits.attempt(address, r.email, () =>
        sessions.login(db, r.email, r.password, now()),
      );
      noteActor(ctx.values, { kind: "USER", name: `users/${s.userId}`, detail: {} });
      return {
        sessionToken: s.sessionToken,
        expireTimeUnix: BigInt(Math.floor(s.expireTimeMs / 1000)),
        user: `users/${s.userId}`,
      };
    },
    logout: async (_r, ctx) => {
      await sessions.logout(db, humanOf(ctx).sessionId, now());
      return {};
    },
    whoAmI: async (_r, ctx) => {
      const p = principalOf(ctx);
      switch (p.kind) {
        case "OPERATOR":
          return { principal: "operator", kind: p.kind, grants: [] };
        case "HUMAN_SESSION": {
          const rows = await db
            .selectFrom("memberships")
            .select(["project_id", "role"])
            .where("user_id", "=", p.userId)
            .execute();
          return {
            principal: `users/${p.userId}`,
            kind: p.kind,
            grants: rows.map((r) => `projects/${r.project_id}:${r.role}`),
          };
        }
        default: {
          const effective = p.keyCapabilities.filter((c) => p.identityPermissions.includes(c));
          return {
            principal: p.identityId,
            kind: p.kind,
            grants: effective.map((c) => `projects/${p.projectId}:${c}`),
          };
        }
      }
    },
  });
  router.service(ServiceAccountService, {
    createServiceAccount: (r, ctx) => sa.createServiceAccount(db, humanOf(ctx), r, now()),
    getServiceAccount: (r, ctx) => sa.getServiceAccount(db, humanOf(ctx), r.name),
    listServiceAccounts: async (r, ctx) => ({
      serviceAccounts: await sa.listServiceAccounts(db, humanOf(ctx), r.parent),
    }),
    disableServiceAccount: (r, ctx) => sa.setServiceAccountState(db, humanOf(ctx), r.name, "DISABLED"),
    enableServiceAccount: (r, ctx) => sa.setServiceAccountState(db, humanOf(ctx), r.name, "ACTIVE"),
  });
  router.service(KeyService, {
    createKey: (r, ctx) => keys.createKey(db, humanOf(ctx), r, now()),
    listKeys: async (r, ctx) => ({ keys: await keys.listKeys(db, humanOf(ctx), r.parent, now()) }),
    rotateKey: (r, ctx) => keys.rotateKey(db, humanOf(ctx), r, now()),
    revokeKey: (r, ctx) => keys.revokeKey(db, humanOf(ctx), r.name, now()),
    recoverLostKey: (r, ctx) => keys.recoverLostKey(db, humanOf(ctx), r, now()),
  });
}
