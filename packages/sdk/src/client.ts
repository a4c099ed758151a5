import type { DescService } from "@bufbuild/protobuf";
import {
  type Client,
  Code,
  ConnectError,
  createClient,
  type Interceptor,
  type Transport,
} from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { svcErrorInterceptor } from "./errors.ts";
import { OperationsService, ProjectService, UserService, VMService } from "./gen/svc/admin/v1/admin_pb.ts";
import { AuditService as AdminAuditService } from "./gen/svc/admin/v1/audit_pb.ts";
import { AutomationService } from "./gen/svc/iam/v1/automation_pb.ts";
import { KeyService } from "./gen/svc/iam/v1/key_pb.ts";
import { ServiceAccountService } from "./gen/svc/iam/v1/service_account_pb.ts";
import { SessionService } from "./gen/svc/iam/v1/session_pb.ts";
import { AlertService, IncidentService } from "./gen/svc/monitoring/v1/alerts_pb.ts";
import { AuditService } from "./gen/svc/monitoring/v1/audit_pb.ts";
import { DestinationService } from "./gen/svc/monitoring/v1/destinations_pb.ts";
import { MonitoringService } from "./gen/svc/monitoring/v1/monitoring_pb.ts";
import { SilenceService } from "./gen/svc/monitoring/v1/silences_pb.ts";

export interface SvcClientOptions {
  /** API origin, e.g. https://svc.example.com (no trailing slash). */
  readonly baseUrl: string;
  /** Bearer credential: an API key, a CI token, a console session token or the operator token. */
  readonly token?: string;
  /** JSON (default, as the spec shows) or binary protobuf. */
  readonly useBinaryFormat?: boolean;
  /** Retries of a 429 (`resource_exhausted`), honouring Retry-After. Default 3. */
  readonly maxRetries?: number;
  /**
   * Longest wait the SDK does itself, seconds. Default 30. A Retry-After longer than this is never
   * retried early: the call fails with SvcError whose retryAfterSeconds is the server's time.
   */
  readonly maxRetryAfterSeconds?: number;
  /** For tests and custom agents. */
  readonly fetch?: typeof globalThis.fetch;
  /** Sleep function (tests pass a fake). */
  readonly sleep?: (ms: number) => Promise<void>;
}

/** Methods that change nothing, so a retry is always safe. */
const readOnly = /^(Query|List|Get|Preview|WhoAmI)/;

function isRetrySafe(methodName: string, message: unknown): boolean {
  if (readOnly.test(methodName)) return true;
  // A mutating call is retried only when it carries its requestId: the server then answers a
  // duplicate with the original outcome instead of acting twice.
  const requestId = (message as { requestId?: unknown } | undefined)?.requestId;
  return typeof requestId === "string" && requestId !== "";
}

/**
 * How long to wait before retrying a 429, ms, or undefined when the server asks for longer than the cap:
 * the call then fails at once with the server's time (SvcError.retryAfterSeconds) and the caller decides,
 * instead of retrying before the server said it would serve. Without Retry-After: 1, 2, 4 … s, capped.
 */
export function retryDelayMs(err: ConnectError, attempt: number, capSeconds: number): number | undefined {
  const header = err.metadata.get("retry-after");
  if (header !== null && /^\d+$/.test(header)) {
    const seconds = Number(header);
    return seconds > capSeconds ? undefined : seconds * 1000;
  }
  return Math.min(2 ** attempt, capSeconds) * 1000;
}

function retryInterceptor(opts: SvcClientOptions): Interceptor {
  const max = opts.maxRetries ?? 3;
  const cap = opts.maxRetryAfterSeconds ?? 30;
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  return (next) => async (req) => {
    for (let attempt = 0; ; attempt++) {
      try {
        return await next(req);
      } catch (e) {
        const err = ConnectError.from(e);
        if (err.code !== Code.ResourceExhausted || attempt >= max || req.stream) throw err;
        if (!isRetrySafe(req.method.name, req.message)) throw err;
        const delay = retryDelayMs(err, attempt, cap);
        if (delay === undefined) throw err;
        await sleep(delay);
      }
    }
  };
}

/**
 * A Connect transport with the bearer header, Connect-Protocol-Version, the 429 retry policy, and
 * errors thrown as {@link SvcError} (reason, field and retry hints parsed from the error details).
 */
export function createSvcTransport(opts: SvcClientOptions): Transport {
  const auth: Interceptor = (next) => (req) => {
    if (opts.token) req.header.set("Authorization", `Bearer ${opts.token}`);
    return next(req);
  };
  return createConnectTransport({
    baseUrl: opts.baseUrl.replace(/\/+$/, ""),
    useBinaryFormat: opts.useBinaryFormat ?? false,
    interceptors: [svcErrorInterceptor, retryInterceptor(opts), auth],
    fetch: opts.fetch,
  });
}

export interface SvcClients {
  monitoring: Client<typeof MonitoringService>;
  alerts: Client<typeof AlertService>;
  incidents: Client<typeof IncidentService>;
  destinations: Client<typeof DestinationService>;
  silences: Client<typeof SilenceService>;
  keys: Client<typeof KeyService>;
  serviceAccounts: Client<typeof ServiceAccountService>;
  sessions: Client<typeof SessionService>;
  /** The project's audit log. */
  audit: Client<typeof AuditService>;
  /** CI trust connections and the keyless exchange. */
  automation: Client<typeof AutomationService>;
  admin: {
    projects: Client<typeof ProjectService>;
    users: Client<typeof UserService>;
    vms: Client<typeof VMService>;
    /** Backup of the embedded defaults. */
    operations: Client<typeof OperationsService>;
    /** Every project's audit log. */
    audit: Client<typeof AdminAuditService>;
  };
  /** A typed client for any other svc service (e.g. one added after this SDK release). */
  client<S extends DescService>(service: S): Client<S>;
}

/** Typed clients for every svc service, sharing one transport. */
export function createSvcClients(opts: SvcClientOptions): SvcClients {
  const transport = createSvcTransport(opts);
  const c = <S extends DescService>(s: S) => createClient(s, transport);
  return {
    monitoring: c(MonitoringService),
    alerts: c(AlertService),
    incidents: c(IncidentService),
    destinations: c(DestinationService),
    silences: c(SilenceService),
    keys: c(KeyService),
    serviceAccounts: c(ServiceAccountService),
    sessions: c(SessionService),
    audit: c(AuditService),
    automation: c(AutomationService),
    admin: {
      projects: c(ProjectService),
      users: c(UserService),
      vms: c(VMService),
      operations: c(OperationsService),
      audit: c(AdminAuditService),
    },
    client: c,
  };
}
