import type { Interceptor } from "@connectrpc/connect";
import type { Logger } from "pino";
import { CSRF_HEADER, checkCsrf, sessionTokenFromCookie } from "../console/session-cookie.ts";
import type { Db } from "../db/database.ts";
import { capabilityDenied, permissionDenied } from "../errors.ts";
import { type MethodAccess, methodAccess } from "../iam/capabilities.ts";
import { authenticate, bearerToken, type Principal, type TokenResolver } from "../iam/principal.ts";
import { principalKey } from "./context.ts";
import { toConnectError } from "./errors.ts";

export interface AuthDeps {
  readonly db: Db;
  readonly operatorToken: string;
  readonly now: () => number;
  readonly log: Logger;
  /** Resolves svct_ CI tokens once the CI exchange is wired in. */
  readonly ciTokenResolver?: TokenResolver;
  /** Signs the console's CSRF tokens (console/session-cookie.ts). */
  readonly consoleKey: Buffer;
}

/**
 * Authenticates every RPC and applies the method table (iam/capabilities.ts): the credential kind must
 * be allowed, and a capability method needs the capability on the credential. Project-level checks
 * (boundary, current grants) happen in the handler, which knows the project. It also maps every error
 * thrown below it to a Connect error, so it is the outermost interceptor.
 */
export function authInterceptor(deps: AuthDeps): Interceptor {
  return (next) => async (req) => {
    const method = `${req.service.typeName}/${req.method.name}`;
    try {
      const access = methodAccess[method];
      if (access === undefined) throw permissionDenied("CAPABILITY", `${method} is not callable`);
      if (access !== "public") {
        const principal = await authenticate(deps.db, credentialOf(req.header, deps.consoleKey), deps.now(), {
          operatorToken: deps.operatorToken,
          ciTokenResolver: deps.ciTokenResolver,
        });
        checkKind(access, principal);
        req.contextValues.set(principalKey, principal);
      }
      return await next(req);
    } catch (err) {
      throw toConnectError(err, deps.log, method);
    }
  };
}

/**
 * The bearer token, or else the console's session cookie with its CSRF header. An Authorization
 * header wins, so an automation client never needs (or gets) the cookie path.
 */
function credentialOf(header: Headers, consoleKey: Buffer): string | undefined {
  const authorization = header.get("authorization");
  if (authorization) return bearerToken(authorization);
  const session = sessionTokenFromCookie(header.get("cookie"));
  if (session) checkCsrf(consoleKey, session, header.get(CSRF_HEADER));
  return session;
}

function checkKind(access: MethodAccess, p: Principal): void {
  if (access === "authenticated" || access === "public") return;
  if (access === "operator") {
    if (p.kind !== "OPERATOR")
      throw permissionDenied("OPERATOR_ONLY", "this provider operation needs the operator token");
    return;
  }
  if (p.kind === "OPERATOR")
    throw permissionDenied("PROJECT_BOUNDARY", "the operator token has no access to customer operations");
  if (access === "human") {
    if (p.kind !== "HUMAN_SESSION")
      throw permissionDenied(
        "HUMAN_ONLY",
        "this operation is for humans in the console, not for keys or CI tokens",
      );
    return;
  }
  // A capability method: a key or CI token must carry the capability at all; the project check follows.
  if (p.kind !== "HUMAN_SESSION" && !p.keyCapabilities.includes(access)) {
    throw capabilityDenied(access, `the credential does not carry ${access}`);
  }
}
