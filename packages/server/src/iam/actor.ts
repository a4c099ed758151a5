import type { CiTokenIdentity } from "./ci/exchange.ts";
import type { Principal } from "./principal.ts";

/**
 * Every name svc gives whoever made a change, in one place: the audit log's actor, the full resource
 * name of the credential (a destination's creator), and the short attribution stored beside a rule's
 * revision or a silence (`users/<id>`, `keys/<id>`, `ciTokens/<id>`, `operator`; docs/alerts.md).
 */

/** Who acted, for the audit log: the kind, a name a person can look up, and the details of that kind. */
export interface Actor {
  readonly kind: "OPERATOR" | "USER" | "PERSONAL_KEY" | "SERVICE_ACCOUNT_KEY" | "CI_TOKEN" | "ANONYMOUS";
  readonly name: string;
  /** Key name, CI trust's repository / workflow / ref, a person's session: identifiers, never secrets. */
  readonly detail: Readonly<Record<string, string>>;
}

export function actorOf(p: Principal | undefined): Actor {
  if (!p) return { kind: "ANONYMOUS", name: "anonymous", detail: {} };
  switch (p.kind) {
    case "OPERATOR":
      return { kind: "OPERATOR", name: "operator", detail: {} };
    case "HUMAN_SESSION":
      return { kind: "USER", name: `users/${p.userId}`, detail: { session: p.sessionId } };
    case "PERSONAL_KEY":
      return { kind: "PERSONAL_KEY", name: `users/${p.identityId}`, detail: { key: principalName(p) } };
    case "SERVICE_ACCOUNT_KEY":
      return {
        kind: "SERVICE_ACCOUNT_KEY",
        name: serviceAccountName(p),
        detail: { key: principalName(p) },
      };
    case "CI_TOKEN":
      return ciTokenActor(p);
  }
}

/**
 * A CI token's calls, and the exchange that issued it: the trust's service account, with the trust and
 * the repository, workflow and ref of the GitHub identity token exchanged.
 */
export function ciTokenActor(c: CiTokenIdentity): Actor {
  return {
    kind: "CI_TOKEN",
    name: serviceAccountName(c),
    detail: {
      trust: `projects/${c.projectId}/ciTrusts/${c.trustId}`,
      repository: c.repository,
      workflow: c.workflow,
      ref: c.ref,
    },
  };
}

function serviceAccountName(c: { projectId: string; identityId: string }): string {
  return `projects/${c.projectId}/serviceAccounts/${c.identityId}`;
}

/**
 * Who a principal is, as a resource name a person can look up: users/<id>, a key's name, or the
 * service account behind a CI token.
 */
export function principalName(p: Principal): string {
  switch (p.kind) {
    case "OPERATOR":
      return "operator";
    case "HUMAN_SESSION":
      return `users/${p.userId}`;
    case "PERSONAL_KEY":
      return `projects/${p.projectId}/keys/${p.keyId}`;
    case "SERVICE_ACCOUNT_KEY":
      return `${serviceAccountName(p)}/keys/${p.keyId}`;
    case "CI_TOKEN":
      return `${serviceAccountName(p)} (CI token)`;
  }
}

/** The short attribution stored with a rule's revision and a silence (their API's documented form). */
export function attributionOf(p: Principal): string {
  switch (p.kind) {
    case "HUMAN_SESSION":
      return `users/${p.userId}`;
    case "PERSONAL_KEY":
    case "SERVICE_ACCOUNT_KEY":
      return `keys/${p.keyId}`;
    case "CI_TOKEN":
      return `ciTokens/${p.tokenId}`;
    case "OPERATOR":
      return "operator";
  }
}
