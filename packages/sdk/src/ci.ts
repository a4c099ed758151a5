import { createClient } from "@connectrpc/connect";
import { createSvcTransport } from "./client.ts";
import { AutomationService } from "./gen/svc/iam/v1/automation_pb.ts";

/**
 * GitHub Actions → svc keyless exchange. A job with `permissions: id-token: write` gets
 * ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN; the identity token requested with the
 * trust's audience is exchanged for a 15-minute svc token. Neither token is ever logged here.
 */

/** The job cannot request identity tokens (the workflow lacks `permissions: id-token: write`). */
export class IdTokenUnavailableError extends Error {
  constructor() {
    super(
      "ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN are not set. GitHub sets them only " +
        "for jobs allowed to request an OIDC token: add\n  permissions:\n    id-token: write\n    contents: read\n" +
        "to the job (or workflow). Pull requests from forks never receive them.",
    );
    this.name = "IdTokenUnavailableError";
  }
}

export interface IdTokenRequest {
  /** The trust's audience; sent URL-encoded as the `audience` query parameter. */
  readonly audience: string;
  /** Default: process.env.ACTIONS_ID_TOKEN_REQUEST_URL. */
  readonly requestUrl?: string;
  /** Default: process.env.ACTIONS_ID_TOKEN_REQUEST_TOKEN. */
  readonly requestToken?: string;
  readonly fetch?: typeof globalThis.fetch;
}

/** Requests the job's identity token for `audience` (the request URL's existing query is kept). */
export async function requestGitHubIdToken(req: IdTokenRequest): Promise<string> {
  const requestUrl = req.requestUrl ?? process.env.ACTIONS_ID_TOKEN_REQUEST_URL;
  const requestToken = req.requestToken ?? process.env.ACTIONS_ID_TOKEN_REQUEST_TOKEN;
  if (!requestUrl || !requestToken) throw new IdTokenUnavailableError();
  if (!req.audience) throw new Error("audience is required (shown with the trust connection)");
  const url = new URL(requestUrl);
  url.searchParams.set("audience", req.audience);
  const res = await (req.fetch ?? globalThis.fetch)(url, {
    headers: { Authorization: `Bearer ${requestToken}`, Accept: "application/json; api-version=2.0" },
    signal: AbortSignal.timeout(30_000),
  });
  if (!res.ok) throw new Error(`the Actions token endpoint answered HTTP ${res.status}`);
  const body = (await res.json()) as { value?: unknown };
  if (typeof body.value !== "string" || !body.value)
    throw new Error("the Actions token endpoint returned no value");
  return body.value;
}

export interface CiExchangeOptions extends IdTokenRequest {
  /** svc API origin, e.g. https://svc.example.com. */
  readonly baseUrl: string;
  /** Full trust name, projects/<p>/ciTrusts/<id>. */
  readonly trustName: string;
}

export interface CiToken {
  /** svct_…; valid 15 minutes, no refresh. */
  readonly accessToken: string;
  readonly projectName: string;
}

/** Exchanges an identity token already in hand (ExchangeCIToken, no Authorization header). */
export async function exchangeCIToken(opts: {
  baseUrl: string;
  trustName: string;
  assertion: string;
  fetch?: typeof globalThis.fetch;
}): Promise<CiToken> {
  const client = createClient(
    AutomationService,
    createSvcTransport({ baseUrl: opts.baseUrl, fetch: opts.fetch }),
  );
  const r = await client.exchangeCIToken({ trustName: opts.trustName, assertion: opts.assertion });
  return { accessToken: r.accessToken, projectName: r.projectName };
}

/** Requests the identity token and exchanges it: the whole of `svc auth ci`. */
export async function getCIToken(opts: CiExchangeOptions): Promise<CiToken> {
  const assertion = await requestGitHubIdToken(opts);
  return exchangeCIToken({ baseUrl: opts.baseUrl, trustName: opts.trustName, assertion, fetch: opts.fetch });
}

/** The temporary verification step: pairing code (SVC_SETUP_CODE) plus an identity token. */
export async function verifyCITrustSetup(
  opts: IdTokenRequest & { baseUrl: string; setupId: string; pairingCode: string },
): Promise<{ trustName: string; state: string; observed: Record<string, string> }> {
  const assertion = await requestGitHubIdToken(opts);
  const client = createClient(
    AutomationService,
    createSvcTransport({ baseUrl: opts.baseUrl, fetch: opts.fetch }),
  );
  const r = await client.verifyCITrustSetup({
    setupId: opts.setupId,
    pairingCode: opts.pairingCode,
    assertion,
  });
  const o = r.observed;
  return {
    trustName: r.trustName,
    state: r.state,
    observed: o
      ? {
          repository: o.repository,
          repositoryId: o.repositoryId,
          repositoryOwner: o.repositoryOwner,
          repositoryOwnerId: o.repositoryOwnerId,
          workflowRef: o.workflowRef,
          ref: o.ref,
          event: o.event,
          environment: o.environment,
          jobWorkflowRef: o.jobWorkflowRef,
        }
      : {},
  };
}
