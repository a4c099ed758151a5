import type { DescService } from "@bufbuild/protobuf";
import { type Client, Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { ErrorInfoSchema } from "@gen/google/rpc/error_details_pb.ts";
import { AutomationService } from "@gen/svc/iam/v1/automation_pb.ts";
import { KeyService } from "@gen/svc/iam/v1/key_pb.ts";
import { ServiceAccountService } from "@gen/svc/iam/v1/service_account_pb.ts";
import { AlertService, IncidentService } from "@gen/svc/monitoring/v1/alerts_pb.ts";
import { AuditService } from "@gen/svc/monitoring/v1/audit_pb.ts";
import { DestinationService } from "@gen/svc/monitoring/v1/destinations_pb.ts";
import { MonitoringService } from "@gen/svc/monitoring/v1/monitoring_pb.ts";

/**
 * The console's only credential is the HttpOnly session cookie, which the browser attaches itself; the
 * page never sees the session token. Every call carries the CSRF token from GET /console/api/session.
 */
let csrfToken = "";

export function setCsrfToken(token: string): void {
  csrfToken = token;
}

const csrf: Interceptor = (next) => (req) => {
  req.header.set("x-svc-csrf", csrfToken);
  return next(req);
};

/** Called when any call says the session is gone, so the app can show the login page. */
let onSignedOut: () => void = () => {};
export function whenSignedOut(f: () => void): void {
  onSignedOut = f;
}
const signedOut: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (err) {
    if (err instanceof ConnectError && err.code === Code.Unauthenticated) onSignedOut();
    throw err;
  }
};

const transport = createConnectTransport({
  baseUrl: window.location.origin,
  interceptors: [signedOut, csrf],
  fetch: (input, init) => fetch(input, { ...init, credentials: "same-origin" }),
});

function client<T extends DescService>(service: T): Client<T> {
  return createClient(service, transport);
}

export const api = {
  monitoring: client(MonitoringService),
  alerts: client(AlertService),
  incidents: client(IncidentService),
  destinations: client(DestinationService),
  keys: client(KeyService),
  serviceAccounts: client(ServiceAccountService),
  automation: client(AutomationService),
  audit: client(AuditService),
};

/** What a failed call says, for people: the server's message plus its reason and field. */
export interface ErrorView {
  message: string;
  reason?: string;
  field?: string;
  metadata: Record<string, string>;
  code: string;
}

export function describeError(err: unknown): ErrorView {
  if (err instanceof ConnectError) {
    const info = err.findDetails(ErrorInfoSchema)[0];
    return {
      message: err.rawMessage.replace(/ \[[A-Z_]+\]$/, ""),
      reason: info?.reason,
      field: info?.metadata.field,
      metadata: { ...(info?.metadata ?? {}) },
      code: Code[err.code] ?? "unknown",
    };
  }
  if (err instanceof Error) return { message: err.message, metadata: {}, code: "unknown" };
  return { message: String(err), metadata: {}, code: "unknown" };
}

export interface ConsoleSession {
  user: string;
  email: string;
  displayName: string;
  csrfToken: string;
  expireTime: string;
  apiOrigin: string;
  projects: { name: string; displayName: string; role: string }[];
}

async function sessionCall(method: string, body?: unknown): Promise<Response> {
  return fetch("/console/api/session", {
    method,
    credentials: "same-origin",
    headers: {
      ...(body ? { "content-type": "application/json" } : {}),
      ...(method === "DELETE" ? { "x-svc-csrf": csrfToken } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
}

export async function readSession(): Promise<ConsoleSession | undefined> {
  const r = await sessionCall("GET");
  if (r.status === 401) return undefined;
  if (!r.ok) throw new Error(`session check failed: HTTP ${r.status}`);
  const s = (await r.json()) as ConsoleSession;
  setCsrfToken(s.csrfToken);
  return s;
}

export async function signIn(email: string, password: string): Promise<ConsoleSession> {
  const r = await sessionCall("POST", { email, password });
  const body = (await r.json()) as ConsoleSession | { message: string };
  if (!r.ok) throw new Error("message" in body ? body.message : `HTTP ${r.status}`);
  const s = body as ConsoleSession;
  setCsrfToken(s.csrfToken);
  return s;
}

export async function signOut(): Promise<void> {
  await sessionCall("DELETE");
  setCsrfToken("");
}
