import { invalidArgument } from "../../errors.ts";
import type { GitHubClaims } from "./assertion.ts";
import { CiClaimMismatchError, CiEventRejectedError } from "./errors.ts";

/** The only triggers a trust can accept; every pull-request event (pull_request_target too) is refused. */
export const ACCEPTED_EVENTS = ["push", "workflow_dispatch", "schedule"] as const;

/** What the human declares at setup; exactly one of branch or environment. */
export interface IntendedIdentity {
  readonly repository: string;
  readonly workflow: string;
  readonly branch: string | null;
  readonly environment: string | null;
  readonly event: string;
}

/** The identity read from the verification run's assertion (stored as JSON on the trust). */
export interface ObservedIdentity {
  readonly repository: string;
  readonly repository_id: string;
  readonly repository_owner: string;
  readonly repository_owner_id: string;
  readonly workflow_ref: string;
  readonly ref: string;
  readonly event: string;
  readonly environment: string;
  readonly job_workflow_ref: string;
}

const REPO = /^[A-Za-z0-9][A-Za-z0-9-]{0,38}\/[A-Za-z0-9._-]{1,100}$/;
const WORKFLOW = /^\.github\/workflows\/[A-Za-z0-9._/-]{1,200}\.ya?ml$/;
const REF_PART = /^[A-Za-z0-9._/-]{1,255}$/;

export function validateIntended(i: {
  repository: string;
  workflow: string;
  branch: string;
  environment: string;
  event: string;
}): IntendedIdentity {
  const f = (n: string) => `intended.${n}`;
  if (!REPO.test(i.repository)) throw invalidArgument(f("repository"), 'must be "owner/repository"');
  if (!WORKFLOW.test(i.workflow) || i.workflow.includes("..")) {
    throw invalidArgument(
      f("workflow"),
      'must be the workflow file path, e.g. ".github/workflows/svc-monitoring.yml"',
    );
  }
  if ((i.branch === "") === (i.environment === "")) {
    throw invalidArgument(f("branch"), "exactly one of branch or environment is required");
  }
  if (i.branch && (!REF_PART.test(i.branch) || i.branch.startsWith("refs/"))) {
    throw invalidArgument(f("branch"), 'must be a branch name such as "main" (without refs/heads/)');
  }
  if (i.environment && !/^[^\s,'"`;]{1,255}$/.test(i.environment)) {
    throw invalidArgument(f("environment"), "must be an environment name");
  }
  if (!(ACCEPTED_EVENTS as readonly string[]).includes(i.event)) {
    throw invalidArgument(
      f("event"),
      `must be one of ${ACCEPTED_EVENTS.join(", ")} (pull-request events are refused)`,
    );
  }
  return {
    repository: i.repository,
    workflow: i.workflow,
    branch: i.branch || null,
    environment: i.environment || null,
    event: i.event,
  };
}

export function observedFrom(c: GitHubClaims): ObservedIdentity {
  return {
    repository: c.repository,
    repository_id: c.repository_id,
    repository_owner: c.repository_owner,
    repository_owner_id: c.repository_owner_id,
    workflow_ref: c.workflow_ref,
    ref: c.ref,
    event: c.event_name,
    environment: c.environment,
    job_workflow_ref: c.job_workflow_ref,
  };
}

function refPath(ref: string): string {
  const at = ref.lastIndexOf("@");
  return at < 0 ? ref : ref.slice(0, at);
}

export function checkEventAccepted(c: GitHubClaims): void {
  if (!(ACCEPTED_EVENTS as readonly string[]).includes(c.event_name))
    throw new CiEventRejectedError(ACCEPTED_EVENTS);
}

/** Verification: the run must come from the workflow, branch or environment and event the human declared. */
export function checkAgainstIntended(c: GitHubClaims, i: IntendedIdentity): void {
  checkEventAccepted(c);
  // GitHub names are case-insensitive; the human may have typed another case.
  if (c.repository.toLowerCase() !== i.repository.toLowerCase())
    throw new CiClaimMismatchError("repository", i.repository);
  const wf = `${i.repository}/${i.workflow}`;
  if (refPath(c.workflow_ref).toLowerCase() !== wf.toLowerCase())
    throw new CiClaimMismatchError("workflow_ref", `${wf}@…`);
  if (i.branch !== null && c.ref !== `refs/heads/${i.branch}`)
    throw new CiClaimMismatchError("ref", `refs/heads/${i.branch}`);
  if (i.environment !== null && c.environment !== i.environment)
    throw new CiClaimMismatchError("environment", i.environment);
  if (c.event_name !== i.event) throw new CiClaimMismatchError("event_name", i.event);
}

const REVERIFY = "; the repository or workflow identity changed, so the trust needs a new verification";

/**
 * Exchange: every claim exactly as observed and approved. Immutable ids first, so a deleted and
 * re-created repository (same name, new id) is reported as such.
 */
export function checkAgainstApproved(c: GitHubClaims, o: ObservedIdentity, i: IntendedIdentity): void {
  checkEventAccepted(c);
  if (c.repository_owner_id !== o.repository_owner_id)
    throw new CiClaimMismatchError("repository_owner_id", o.repository_owner_id);
  if (c.repository_id !== o.repository_id) throw new CiClaimMismatchError("repository_id", o.repository_id);
  if (c.repository_owner !== o.repository_owner)
    throw new CiClaimMismatchError("repository_owner", o.repository_owner, REVERIFY);
  if (c.repository !== o.repository) throw new CiClaimMismatchError("repository", o.repository, REVERIFY);
  if (refPath(c.workflow_ref) !== refPath(o.workflow_ref)) {
    throw new CiClaimMismatchError("workflow_ref", `${refPath(o.workflow_ref)}@…`, REVERIFY);
  }
  if (o.job_workflow_ref) {
    // A reusable workflow is pinned with its ref; the caller's own workflow by path.
    const reusable = refPath(o.job_workflow_ref) !== refPath(o.workflow_ref);
    const ok = reusable
      ? c.job_workflow_ref === o.job_workflow_ref
      : refPath(c.job_workflow_ref) === refPath(o.job_workflow_ref);
    if (!ok) {
      throw new CiClaimMismatchError(
        "job_workflow_ref",
        reusable ? o.job_workflow_ref : `${refPath(o.job_workflow_ref)}@…`,
        REVERIFY,
      );
    }
  }
  if (i.branch !== null && c.ref !== o.ref) throw new CiClaimMismatchError("ref", o.ref);
  if (i.environment !== null && c.environment !== o.environment)
    throw new CiClaimMismatchError("environment", o.environment);
  if (c.event_name !== o.event) throw new CiClaimMismatchError("event_name", o.event);
}
