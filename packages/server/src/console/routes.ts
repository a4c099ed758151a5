import { existsSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import fastifyStatic from "@fastify/static";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import { CONSOLE_SIGN_IN, CONSOLE_SIGN_OUT, recordAuditEvent } from "../audit/events.ts";
import type { Db } from "../db/database.ts";
import {
  HTTP_STATUS_OF_CODE,
  invalidArgument,
  permissionDenied,
  SvcError,
  unauthenticated,
} from "../errors.ts";
import { inProcessRateLimiters } from "../iam/ci/ratelimit.ts";
import { authenticate } from "../iam/principal.ts";
import { login, logout } from "../iam/sessions.ts";
import { createSignInLimits, type SignInLimits } from "../iam/sign-in-limits.ts";
import {
  CSRF_HEADER,
  checkCsrf,
  clearedSessionCookie,
  csrfTokenFor,
  sessionCookie,
  sessionTokenFromCookie,
} from "./session-cookie.ts";

export interface ConsoleDeps {
  readonly db: Db;
  readonly log: Logger;
  readonly now: () => number;
  /** Signs CSRF tokens; the same key on every replica. */
  readonly consoleKey: Buffer;
  /** The public origin; cookies are Secure when it is HTTPS. */
  readonly publicOrigin: string;
  /** The built console (packages/console/dist); undefined or missing answers a page that says so. */
  readonly distDir: string | undefined;
  /** The sign-in limits, shared with the API's Login; in this process by default (iam/sign-in-limits.ts). */
  readonly signInLimits?: SignInLimits;
}

/** The console's only script, style and data sources are its own origin. */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

/** Files the build precompresses (and their .br and .gz). */
const COMPRESSED = /\.(js|css|html|svg|json|txt)(\.br|\.gz)?$/;

/** Paths that belong to APIs: an unknown one is a 404, never the console's page. */
const API_PREFIXES = ["/v1/", "/api/", "/console/api/", "/svc.", "/metrics", "/healthz", "/readyz"];

/**
 * The console in its own Fastify scope: the session endpoints (login sets the cookie, the session
 * read hands the page its CSRF token, logout revokes) and the built single-page app, with a CSP and
 * caching fit for hashed assets. Every RPC the page makes goes to the Connect routes with the cookie.
 */
export function consoleRoutes(deps: ConsoleDeps): FastifyPluginAsync {
  const secure = deps.publicOrigin.startsWith("https:");
  // Password guessing is slowed per client address and per account, the same buckets as the API's
  // Login: a wrong password costs the same as a right one (iam/sessions.ts), so only the rate helps.
  const limits = deps.signInLimits ?? createSignInLimits(inProcessRateLimiters(deps.now));
  const built = deps.distDir !== undefined && existsSync(join(deps.distDir, "index.html"));

  const fail = (reply: FastifyReply, err: unknown) => {
    if (!(err instanceof SvcError)) {
      deps.log.error({ err }, "console session endpoint: unexpected error");
      return reply.code(500).send({ code: "internal", message: "internal error" });
    }
    if (err.retryAfterSeconds !== undefined) reply.header("retry-after", String(err.retryAfterSeconds));
    return reply.code(HTTP_STATUS_OF_CODE[err.code] ?? 500).send({
      code: err.code,
      message: err.message,
      reason: err.reason,
    });
  };

  /** Refuses a cross-site caller before any work: the browser says where a request comes from. */
  const sameOrigin = (req: FastifyRequest) => {
    const site = req.headers["sec-fetch-site"];
    const origin = req.headers.origin;
    const crossSite =
      (site !== undefined && site !== "same-origin" && site !== "none") ||
      (origin !== undefined &&
        origin !== "null" &&
        origin !== deps.publicOrigin &&
        // An Origin that is not a URL is no origin of ours either (and never a 500).
        (!URL.canParse(origin) || new URL(origin).host !== (req.headers.host ?? "")));
    if (crossSite)
      throw permissionDenied("CSRF_REJECTED", "console requests must come from the console's own origin");
  };

  const currentSession = async (req: FastifyRequest) => {
    const token = sessionTokenFromCookie(req.headers.cookie);
    if (!token) throw unauthenticated("not signed in");
    const p = await authenticate(deps.db, token, deps.now());
    if (p.kind !== "HUMAN_SESSION") throw unauthenticated("not signed in");
    return { token, principal: p };
  };

  /** Sign-in and sign-out in the audit log; a failed sign-in names no one and records its reason. */
  const audit = async (
    req: FastifyRequest,
    method: string,
    user: { userId: string; sessionId: string } | undefined,
    err?: unknown,
  ): Promise<void> => {
    await recordAuditEvent(deps.db, {
      time: deps.now(),
      projectId: "",
      actor: user
        ? {
            kind: "USER",
            name: `users/${user.userId}`,
            detail: user.sessionId ? { session: user.sessionId } : {},
          }
        : { kind: "ANONYMOUS", name: "anonymous", detail: {} },
      method,
      resource: user ? `users/${user.userId}` : "",
      requestId: "",
      outcome: err === undefined ? "ok" : err instanceof SvcError ? (err.reason ?? err.code) : "internal",
      clientAddress: req.ip,
      userAgent: req.headers["user-agent"] ?? "",
      changedFields: [],
    }).catch((e: unknown) => req.log.error({ err: e }, "audit event not recorded"));
  };

  return async (scope) => {
    scope.addHook("onSend", async (_req, reply) => {
      reply.header("content-security-policy", CONTENT_SECURITY_POLICY);
      reply.header("x-content-type-options", "nosniff");
      reply.header("referrer-policy", "same-origin");
      reply.header("x-frame-options", "DENY");
    });

    scope.post<{ Body: { email?: unknown; password?: unknown } }>(
      "/console/api/session",
      async (req, reply) => {
        try {
          sameOrigin(req);
          const body = req.body ?? {};
          if (typeof body.email !== "string") throw invalidArgument("email", "is required");
          if (typeof body.password !== "string") throw invalidArgument("password", "is required");
          const { email, password } = body;
          const s = await limits.attempt(req.ip, email, () =>
            login(deps.db, email, password, deps.now()).catch(async (err) => {
              await audit(req, CONSOLE_SIGN_IN, undefined, err);
              throw err;
            }),
          );
          await audit(req, CONSOLE_SIGN_IN, { userId: s.userId, sessionId: "" });
          const maxAge = Math.floor((s.expireTimeMs - deps.now()) / 1000);
          reply.header("set-cookie", sessionCookie(s.sessionToken, maxAge, secure));
          reply.header("cache-control", "no-store");
          return await describeSession(deps, s.sessionToken, s.userId, s.expireTimeMs);
        } catch (err) {
          return fail(reply, err);
        }
      },
    );

    scope.get("/console/api/session", async (req, reply) => {
      try {
        reply.header("cache-control", "no-store");
        // Not being signed in is this probe's ordinary answer, not an error: a 401 here would put an error
        // in the console of every signed-out page load. A stale cookie is cleared.
        const session = await currentSession(req).catch((err: unknown) => {
          if (err instanceof SvcError && err.code === "unauthenticated") return undefined;
          throw err;
        });
        if (!session) {
          if (req.headers.cookie?.includes("svc_session="))
            reply.header("set-cookie", clearedSessionCookie(secure));
          return { signedIn: false };
        }
        const { token, principal } = session;
        const row = await deps.db
          .selectFrom("sessions")
          .select("expire_time")
          .where("id", "=", principal.sessionId)
          .executeTakeFirstOrThrow();
        reply.header("cache-control", "no-store");
        return await describeSession(deps, token, principal.userId, row.expire_time);
      } catch (err) {
        return fail(reply, err);
      }
    });

    scope.delete("/console/api/session", async (req, reply) => {
      try {
        sameOrigin(req);
        const { token, principal } = await currentSession(req);
        checkCsrf(deps.consoleKey, token, req.headers[CSRF_HEADER] as string | undefined);
        await logout(deps.db, principal.sessionId, deps.now());
        await audit(req, CONSOLE_SIGN_OUT, principal);
        reply.header("set-cookie", clearedSessionCookie(secure));
        return reply.code(204).send();
      } catch (err) {
        // A stale cookie is cleared whatever went wrong.
        if (err instanceof SvcError && err.code === "unauthenticated")
          reply.header("set-cookie", clearedSessionCookie(secure));
        return fail(reply, err);
      }
    });

    // The built files, found at start-up, are served by the one GET route below (a route per file cost
    // ~100 routes to insert at every start: docs/performance.md, "Start-up"); it answers the rest with
    // the page. fastify-static only provides reply.sendFile (serve: false), with the options below.
    const files = built && deps.distDir ? builtFiles(deps.distDir) : new Set<string>();
    if (built && deps.distDir) {
      await scope.register(fastifyStatic, {
        root: deps.distDir,
        serve: false,
        index: false,
        // The headers below decide caching, not send's defaults.
        cacheControl: false,
        // The build writes <file>.br and <file>.gz (scripts/build-console.mjs): sent by Accept-Encoding
        // (br first), the file itself to a client that accepts neither.
        preCompressed: true,
        setHeaders: (res, path) => {
          // Vite names assets by content hash: they never change, so they are cached for a year.
          const immutable = path.includes(`${join(deps.distDir ?? "", "assets")}`);
          res.setHeader("cache-control", immutable ? "public, max-age=31536000, immutable" : "no-cache");
          // The answer depends on Accept-Encoding whichever coding this one used: caches must key on it.
          if (COMPRESSED.test(path)) res.setHeader("vary", "Accept-Encoding");
        },
      });
    }

    const page = async (req: FastifyRequest, reply: FastifyReply) => {
      const path = req.url.split("?")[0];
      if (files.has(path)) return reply.sendFile(path.slice(1));
      const wantsHtml = (req.headers.accept ?? "").includes("text/html");
      if (API_PREFIXES.some((p) => path.startsWith(p)) || !wantsHtml || /\.[a-z0-9]+$/i.test(path)) {
        return reply.code(404).send({ code: "not_found", message: `${req.method} ${path} not found` });
      }
      if (!built) {
        return reply
          .code(503)
          .type("text/html; charset=utf-8")
          .header("cache-control", "no-store")
          .send(
            "<!doctype html><title>svc</title><p>The console is not built. Run <code>npm run build:console</code> (npm start does it) and reload.</p>",
          );
      }
      reply.header("cache-control", "no-cache");
      return reply.sendFile("index.html", { cacheControl: false });
    };
    scope.get("/", page);
    scope.get("/*", page);
  };
}

/** Every file under `dir` as the URL path that serves it ("/assets/app-1a2b.js"), dot files left out. */
function builtFiles(dir: string): Set<string> {
  const found = new Set<string>();
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const path = `/${relative(dir, join(e.parentPath, e.name)).split("\\").join("/")}`;
    if (e.isFile() && !path.includes("/.")) found.add(path);
  }
  return found;
}

async function describeSession(deps: ConsoleDeps, token: string, userId: string, expireTimeMs: number) {
  const user = await deps.db
    .selectFrom("users")
    .select(["email", "display_name"])
    .where("id", "=", userId)
    .executeTakeFirstOrThrow();
  const projects = await deps.db
    .selectFrom("memberships as m")
    .innerJoin("projects as p", "p.id", "m.project_id")
    .select(["m.project_id", "m.role", "p.display_name"])
    .where("m.user_id", "=", userId)
    .orderBy("m.project_id")
    .execute();
  return {
    signedIn: true,
    user: `users/${userId}`,
    email: user.email,
    displayName: user.display_name,
    csrfToken: csrfTokenFor(deps.consoleKey, token),
    expireTime: new Date(expireTimeMs).toISOString(),
    apiOrigin: deps.publicOrigin,
    projects: projects.map((p) => ({
      name: `projects/${p.project_id}`,
      displayName: p.display_name,
      role: p.role,
    })),
  };
}
