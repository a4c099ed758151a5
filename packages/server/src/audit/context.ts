import { type DescField, type DescMessage, isFieldSet } from "@bufbuild/protobuf";
import { type ContextValues, createContextKey } from "@connectrpc/connect";
import type { Principal } from "../iam/principal.ts";
import type { AuditActor } from "./events.ts";

/**
 * What the guard (http/auth.ts) learns about an audited call as it runs. Handlers may refine it: a
 * sign-in names the user it signed in, and the error interceptor sets the error's reason.
 */
export interface AuditNote {
  actor?: AuditActor;
  outcome?: string;
  resource?: string;
}

export const auditNoteKey = createContextKey<AuditNote | undefined>(undefined, {
  description: "svc audit note",
});

/** Names who a public method (sign-in) acted for, once it knows. */
export function noteActor(values: ContextValues, actor: AuditActor): void {
  const note = values.get(auditNoteKey);
  if (note) note.actor = actor;
}

/** The fields that name what a call acts on, for the record (a superset of the authorization's). */
const RECORDED_RESOURCE_FIELDS = [
  "name",
  "parent",
  "projectName",
  "serviceAccount",
  "project",
  "vm",
  "trustName",
  "destination",
  "projectId",
];

/** Methods whose request names the resource by its project and an `id` field. */
const NAMED_BY_ID: Readonly<Record<string, string>> = {
  "svc.monitoring.v1.AlertService/SaveAlertRule": "alertRules",
};

/** Request fields that say how to change, not what changed. */
const NOT_CHANGES = ["requestId", "id", "expectedVersion", "etag"];

/**
 * The first non-empty resource field of a leniently decoded request, the client's requestId, and the
 * names (never the values) of the fields a change sets, one level into nested messages: `spec.threshold`.
 */
export function describeRequest(
  schema: DescMessage,
  message: Record<string, unknown>,
  method: string,
): { resource: string; requestId: string; changedFields: string[] } {
  let resource = "";
  for (const name of RECORDED_RESOURCE_FIELDS) {
    const v = message[name];
    if (typeof v === "string" && v) {
      resource = v;
      break;
    }
  }
  // A save names its rule by the project and a client-chosen id: the record names the rule.
  const collection = NAMED_BY_ID[method];
  if (collection && /^projects\/[^/]+$/.test(resource) && typeof message.id === "string" && message.id)
    resource = `${resource}/${collection}/${message.id}`;
  const requestId = typeof message.requestId === "string" ? message.requestId.slice(0, 128) : "";
  const changedFields: string[] = [];
  if (/\/(Update|Save|Set)/.test(method)) {
    for (const f of schema.fields) {
      if (RECORDED_RESOURCE_FIELDS.includes(f.localName) || NOT_CHANGES.includes(f.localName)) continue;
      if (!isFieldSet(message as never, f)) continue;
      const nested = nestedSet(f, message[f.localName]);
      if (nested.length) for (const n of nested) changedFields.push(`${f.jsonName}.${n}`);
      else changedFields.push(f.jsonName);
    }
  }
  return { resource, requestId, changedFields };
}

function nestedSet(f: DescField, value: unknown): string[] {
  if (f.fieldKind !== "message" || !value || typeof value !== "object") return [];
  return f.message.fields.filter((g) => isFieldSet(value as never, g)).map((g) => g.jsonName);
}

/**
 * The project an event belongs to: the one its resource names when the caller was allowed into it,
 * else where the caller belongs: a key's or CI token's own project, outside every project ("", the
 * operator's listing) for a person or the operator. A refused call into another project is never
 * written into that project's log, so no tenant can add events to another's (nor to a project not
 * yet created).
 */
export function projectOfEvent(resource: string, p: Principal | undefined, authorized: boolean): string {
  const named = authorized ? /^projects\/([^/]+)(?:\/|$)/.exec(resource)?.[1] : undefined;
  if (named) return named;
  if (p && p.kind !== "OPERATOR" && p.kind !== "HUMAN_SESSION") return p.projectId;
  return "";
}
