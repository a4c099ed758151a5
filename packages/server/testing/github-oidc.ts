import { randomBytes, randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, exportSPKI, generateKeyPair, type JWK, SignJWT } from "jose";

/**
 * A local stand-in for GitHub Actions' OIDC issuer on 127.0.0.1: RS256 keys made at start, discovery and
 * JWKS over HTTP, tokens with GitHub's claim set, and the job's token endpoint
 * (ACTIONS_ID_TOKEN_REQUEST_URL / _TOKEN) that answers `{ value }` for `?audience=`.
 */
export interface SigningKey {
  readonly kid: string;
  readonly privateKey: CryptoKey;
  readonly publicJwk: JWK;
  readonly publicPem: string;
}

type CryptoKey = Awaited<ReturnType<typeof generateKeyPair>>["privateKey"];

/** The workflow run the issuer describes; tests change fields per case. */
export interface RunIdentity {
  repository: string;
  repository_id: string;
  repository_owner: string;
  repository_owner_id: string;
  workflow_path: string;
  ref: string;
  event_name: string;
  environment?: string;
  /** Defaults to the workflow_ref (a job that is not a reusable workflow call). */
  job_workflow_ref?: string;
}

export const defaultRun: RunIdentity = {
  repository: "acme/deploy-tools",
  repository_id: "700100200",
  repository_owner: "acme",
  repository_owner_id: "9001",
  workflow_path: ".github/workflows/deploy.yml",
  ref: "refs/heads/main",
  event_name: "push",
};

export class LocalGitHubOidc {
  readonly keys: SigningKey[] = [];
  /** kids served in the JWKS. */
  readonly published = new Set<string>();
  /** The run the Actions token endpoint describes. */
  run: RunIdentity = { ...defaultRun };
  /** Bearer the token endpoint requires (ACTIONS_ID_TOKEN_REQUEST_TOKEN). */
  readonly requestToken = `ghs_${randomBytes(16).toString("hex")}`;
  /** Audiences received by the token endpoint, decoded. */
  readonly audiences: string[] = [];
  jwksFetches = 0;
  private server!: Server;
  issuer = "";

  private constructor(private readonly now: () => number) {}

  static async start(now: () => number = Date.now): Promise<LocalGitHubOidc> {
    const o = new LocalGitHubOidc(now);
    await o.addKey(true);
    o.server = createServer((req, res) => o.handle(req.url ?? "/", req.headers.authorization, res));
    await new Promise<void>((r) => o.server.listen(0, "127.0.0.1", r));
    o.issuer = `http://127.0.0.1:${(o.server.address() as AddressInfo).port}`;
    return o;
  }

  /** ACTIONS_ID_TOKEN_REQUEST_URL as GitHub sets it (with an existing query). */
  get requestUrl(): string {
    return `${this.issuer}/_apis/distributedtask/idtoken?api-version=2.0`;
  }

  async addKey(publish: boolean): Promise<SigningKey> {
    const { privateKey, publicKey } = await generateKeyPair("RS256", { extractable: true });
    const k: SigningKey = {
      kid: randomBytes(8).toString("hex"),
      privateKey,
      publicJwk: { ...(await exportJWK(publicKey)), alg: "RS256", use: "sig" },
      publicPem: await exportSPKI(publicKey),
    };
    k.publicJwk.kid = k.kid;
    this.keys.push(k);
    if (publish) this.published.add(k.kid);
    return k;
  }

  /** GitHub's full claim set for `run`, issued now with a 5-minute lifetime. */
  claims(audience: string, run: RunIdentity = this.run): Record<string, unknown> {
    const iat = Math.floor(this.now() / 1000);
    const workflowRef = `${run.repository}/${run.workflow_path}@${run.ref}`;
    const sha = randomBytes(20).toString("hex");
    const c: Record<string, unknown> = {
      jti: randomUUID(),
      sub: run.environment
        ? `repo:${run.repository}:environment:${run.environment}`
        : `repo:${run.repository}:ref:${run.ref}`,
      aud: audience,
      ref: run.ref,
      sha,
      repository: run.repository,
      repository_owner: run.repository_owner,
      repository_owner_id: run.repository_owner_id,
      run_id: "1234567890",
      run_number: "42",
      run_attempt: "1",
      repository_visibility: "private",
      repository_id: run.repository_id,
      actor_id: "5150",
      actor: "octocat",
      workflow: "Deploy",
      head_ref: "",
      base_ref: "",
      event_name: run.event_name,
      ref_protected: "true",
      ref_type: "branch",
      workflow_ref: workflowRef,
      workflow_sha: sha,
      job_workflow_ref: run.job_workflow_ref ?? workflowRef,
      job_workflow_sha: sha,
      runner_environment: "github-hosted",
      iss: this.issuer,
      nbf: iat - 5,
      exp: iat + 300,
      iat,
    };
    if (run.environment) c.environment = run.environment;
    return c;
  }

  /** Signs `claims` with RS256 and the given key (default: the first published). */
  async sign(
    claims: Record<string, unknown>,
    opts: { key?: SigningKey; kid?: string | null } = {},
  ): Promise<string> {
    const key = opts.key ?? this.keys.find((k) => this.published.has(k.kid)) ?? this.keys[0];
    const header: { alg: string; typ: string; kid?: string } = { alg: "RS256", typ: "JWT" };
    if (opts.kid !== null) header.kid = opts.kid ?? key.kid;
    return new SignJWT(claims).setProtectedHeader(header).sign(key.privateKey);
  }

  async token(audience: string, patch: Record<string, unknown> = {}, run?: RunIdentity): Promise<string> {
    return this.sign({ ...this.claims(audience, run), ...patch });
  }

  private handle(url: string, auth: string | undefined, res: import("node:http").ServerResponse) {
    const u = new URL(url, this.issuer);
    const json = (code: number, body: unknown) => {
      res.writeHead(code, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (u.pathname === "/.well-known/openid-configuration") {
      return json(200, {
        issuer: this.issuer,
        jwks_uri: `${this.issuer}/.well-known/jwks`,
        subject_types_supported: ["public", "pairwise"],
        response_types_supported: ["id_token"],
        claims_supported: [
          "sub",
          "aud",
          "exp",
          "iat",
          "iss",
          "jti",
          "nbf",
          "ref",
          "repository",
          "repository_id",
        ],
        id_token_signing_alg_values_supported: ["RS256"],
        scopes_supported: ["openid"],
      });
    }
    if (u.pathname === "/.well-known/jwks") {
      this.jwksFetches++;
      return json(200, { keys: this.keys.filter((k) => this.published.has(k.kid)).map((k) => k.publicJwk) });
    }
    if (u.pathname === "/_apis/distributedtask/idtoken") {
      if (auth !== `Bearer ${this.requestToken}`) return json(401, { message: "bad request token" });
      if (u.searchParams.get("api-version") !== "2.0") return json(400, { message: "api-version lost" });
      const audience = u.searchParams.get("audience") ?? "";
      this.audiences.push(audience);
      void this.token(audience).then((value) => json(200, { value }));
      return;
    }
    json(404, { message: "not found" });
  }

  close(): Promise<void> {
    return new Promise((r) => this.server.close(() => r()));
  }
}
