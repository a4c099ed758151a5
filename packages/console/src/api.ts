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
import { SilenceService } from "@gen/svc/monitoring/v1/silences_pb.ts";
import { csrfToken, sessionEnded } from "./session-api.ts";

/**
 * The Connect clients, loaded with the signed-in console (not by the sign-in page). The console's only
 * credential is the HttpOnly session cookie, which the browser attaches itself; every call carries the
 * CSRF token from GET /console/api/session (session-api.ts).
 */
const csrf: Interceptor = (next) => (req) => {
  req.header.set("x-svc-csrf", csrfToken());
  return next(req);
};

const signedOut: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (err) {
    if (err instanceof ConnectError && err.code === Code.Unauthenticated) sessionEnded();
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
  silences: client(SilenceService),
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
