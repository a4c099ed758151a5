import { invalidArgument } from "../errors.ts";

/**
 * Resource names (docs/api.md). Clients use the names the API returns, whole; these parsers refuse
 * anything else with a message naming the field.
 */
export const PROJECT_ID = /^[a-z][a-z0-9-]{2,39}$/;
export const VM_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;
export const LOCATION = /^[a-z][a-z0-9-]{0,30}$/;

export function projectName(projectId: string): string {
  return `projects/${projectId}`;
}

export function parseProjectName(name: string, field = "projectName"): string {
  const m = /^projects\/([^/]+)$/.exec(name);
  if (!m || !PROJECT_ID.test(m[1])) {
    throw invalidArgument(
      field,
      name ? "must be projects/<project_id>" : "is required (projects/<project_id>)",
    );
  }
  return m[1];
}

export interface VmRef {
  readonly projectId: string;
  readonly location: string;
  readonly vmId: string;
}

export function vmName(ref: VmRef): string {
  return `projects/${ref.projectId}/locations/${ref.location}/vms/${ref.vmId}`;
}

export function parseVmName(name: string, field = "name"): VmRef {
  const m = /^projects\/([^/]+)\/locations\/([^/]+)\/vms\/([^/]+)$/.exec(name);
  if (!m || !PROJECT_ID.test(m[1]) || !LOCATION.test(m[2]) || !VM_ID.test(m[3])) {
    throw invalidArgument(
      field,
      name ? "must be a full VM name as returned by the API" : "is required (a full VM name)",
    );
  }
  return { projectId: m[1], location: m[2], vmId: m[3] };
}
