import type { HandlerContext } from "@connectrpc/connect";
import { createContextKey } from "@connectrpc/connect";
import { SvcError } from "../errors.ts";
import type { Principal } from "../iam/principal.ts";

/** The authenticated principal of an RPC, set by the guard (auth.ts) before the body is decoded. */
export const principalKey = createContextKey<Principal | undefined>(undefined, {
  description: "svc principal",
});

/** The caller's socket address (Fastify's req.ip), for per-source rate limits of public methods. */
export const remoteAddressKey = createContextKey<string>("unknown", { description: "svc remote address" });

export function principalOf(ctx: HandlerContext): Principal {
  const p = ctx.values.get(principalKey);
  if (!p) throw new SvcError("unauthenticated", "missing credential", { reason: "UNAUTHENTICATED" });
  return p;
}

/** The human behind a console session (human-only methods). */
export function humanOf(ctx: HandlerContext): { userId: string; sessionId: string } {
  const p = principalOf(ctx);
  if (p.kind !== "HUMAN_SESSION") {
    throw new SvcError("permission_denied", "this operation needs a console session", {
      reason: "HUMAN_ONLY",
    });
  }
  return p;
}
