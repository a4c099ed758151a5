import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { type DescMethod, fromBinary, fromJson } from "@bufbuild/protobuf";
import type { ConnectError, Interceptor } from "@connectrpc/connect";
import type {
  UniversalHandler,
  UniversalServerRequest,
  UniversalServerResponse,
} from "@connectrpc/connect/protocol";
import { codeToHttpStatus, codeToString, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { ErrorInfoSchema } from "@svc/sdk/gen/google/rpc/error_details_pb";
import type { Logger } from "pino";
import { type AuditNote, auditNoteKey, describeRequest, projectOfEvent } from "../audit/context.ts";
import { type AuditEventInput, isAudited, recordAuditEvent } from "../audit/events.ts";
import type { LastUseTracker } from "../audit/last-use.ts";
import { type PendingAudit, pendingAudit } from "../audit/transactions.ts";
import { CSRF_HEADER, requestCredential } from "../console/session-cookie.ts";
import type { Db } from "../db/database.ts";
import { capabilityDenied, invalidArgument, permissionDenied, SvcError } from "../errors.ts";
import { actorOf } from "../iam/actor.ts";
import { type MethodAccess, methodAccess, resourceFields, rolePermissions } from "../iam/capabilities.ts";
import { requireMember, requireOwner, roleOf } from "../iam/membership.ts";
import {
  authenticate,
  authorizeCredential,
  authorizeProject,
  type Principal,
  type TokenResolver,
} from "../iam/principal.ts";
import { principalKey, remoteAddressKey } from "./context.ts";
import { toConnectError } from "./errors.ts";

export interface AuthDeps {
  readonly db: Db;
  readonly operatorToken: string;
  readonly now: () => number;
  readonly log: Logger;
  /** Resolves svct_ CI tokens once the CI exchange is wired in. */
  readonly ciTokenResolver?: TokenResolver;
  /** Signs the console's CSRF tokens (console/session-cookie.ts). */
  readonly consoleKey: Buffer;
  /** The largest request body (after decompression) read to find the named resource. */
  readonly maxRequestBytes: number;
  /** Records every call of a state-changing method (audit/); default on. */
  readonly audit?: boolean;
  /** Writes keys' last use, at most once a minute per key (audit/last-use.ts). */
  readonly lastUse?: LastUseTracker;
}

/**
 * Authorization first (issue 35), for every RPC in one order: authenticate, authorize against the
 * method's row (iam/capabilities.ts) and the project of the resource the request names, then let
 * Connect decode and validate the body, then the handler acts.
 *
 * Connect decodes the body before any interceptor runs, so this cannot be an interceptor: an anonymous
 * call with an unknown field would get the decoder's 400 instead of 401. Each route's handler is
 * wrapped instead (in place, in the router's list, before the Fastify plugin registers them): the
 * wrapper reads the body's bytes itself, finds the resource's name in them leniently (unknown fields
 * ignored), decides, and hands the same bytes on to Connect's handler, which decodes them strictly.
 * A refused caller gets its refusal whatever the body holds, and the same answer whether the named
 * resource exists or not, since nothing is loaded before the decision. Handlers keep their own checks.
 */
export function guardHandlers(handlers: UniversalHandler[], deps: AuthDeps): void {
  for (let i = 0; i < handlers.length; i++) handlers[i] = guarded(handlers[i], deps);
}

function guarded(h: UniversalHandler, deps: AuthDeps): UniversalHandler {
  const method = `${h.service.typeName}/${h.method.name}`;
  const access = methodAccess[method];
  const audited = deps.audit !== false && isAudited(method);
  const fn = async (req: UniversalServerRequest): Promise<UniversalServerResponse> => {
    // Connect answers a binary body it cannot decode as an internal error (500): the guard reads
    // every binary body first and answers it 400 (readRequest).
    const binary = /^application\/proto\b/.test(req.header.get("content-type") ?? "");
    if (access === "public" && !audited && !binary) return h(req);
    const address = req.contextValues?.get(remoteAddressKey) ?? "unknown";
    const note: AuditNote = {};
    if (audited) req.contextValues?.set(auditNoteKey, note);
    let principal: Principal | undefined;
    // Whether the caller may act in the project its request names: only then is the event that
    // project's; a refusal goes to the caller's own log (audit/context.ts, projectOfEvent).
    let authorized = access === "public";
    let read: Read | undefined;
    let res: UniversalServerResponse;
    let pending: PendingAudit | undefined;
    try {
      if (access === undefined) throw permissionDenied("CAPABILITY", `${method} is not callable`);
      if (access !== "public") {
        principal = await authenticate(deps.db, credentialOf(req.header, deps.consoleKey), deps.now(), {
          operatorToken: deps.operatorToken,
          ciTokenResolver: deps.ciTokenResolver,
        });
        await deps.lastUse?.note(principal, deps.now(), address);
        checkCaller(access, principal);
      }
      let body = req.body;
      const scoped = access !== "authenticated" && access !== "operator" && access !== "public";
      if (audited || scoped || binary) {
        read = await readRequest(req, h.method, deps.maxRequestBytes);
        body = read.body;
      }
      if (scoped && principal) await authorizeResource(deps.db, principal, access, read?.resource);
      authorized = true;
      // After the decision: a refused caller gets its refusal whatever the body holds.
      if (read?.undecodable) throw read.undecodable;
      req.contextValues?.set(principalKey, principal);
      if (audited) {
        // The handler's first committed transaction carries the event (audit/transactions.ts).
        const p = principal;
        const r = read;
        pending = {
          written: false,
          closed: false,
          event: () => eventOf(deps, method, req, succeeded(note, pending), p, r, address, true),
        };
        res = await pendingAudit.run(pending, () => h({ ...req, body }));
        pending.closed = true;
        // A create recorded after it answers (no transaction of its own, or a replay) names it too.
        if (res.status === 200 && pending.created) note.resource = pending.created;
      } else {
        res = await h({ ...req, body });
      }
      note.outcome ??= res.status === 200 ? "ok" : statusOutcome(res.status);
    } catch (err) {
      if (pending) pending.closed = true;
      const ce = toConnectError(err, deps.log, method);
      note.outcome = outcomeOf(ce);
      res = errorResponse(ce);
      // An unauthenticated call names no one: it is not recorded (docs/audit.md).
      if (!principal && access !== "public") return res;
      if (audited && !read)
        read = await readRequest(req, h.method, deps.maxRequestBytes).catch(() => undefined);
    }
    // A public call a rate limit refused (a sign-in or CI exchange past its limit) did nothing and
    // names no one: recording it would let anyone grow the log without bound (docs/audit.md).
    if (!principal && note.outcome === "RATE_LIMITED") return res;
    if (audited && !pending?.written)
      await record(deps, method, req, note, principal, read, address, authorized);
    return res;
  };
  return Object.assign(fn, {
    protocolNames: h.protocolNames,
    service: h.service,
    method: h.method,
    requestPath: h.requestPath,
    allowedMethods: h.allowedMethods,
    supportedContentType: h.supportedContentType,
  });
}

/** The note of a call that succeeded: a create names what it created (audit/transactions.ts). */
function succeeded(note: AuditNote, pending: PendingAudit | undefined): AuditNote {
  return { ...note, outcome: "ok", resource: pending?.created ?? note.resource };
}

function eventOf(
  deps: AuthDeps,
  method: string,
  req: UniversalServerRequest,
  note: AuditNote,
  principal: Principal | undefined,
  read: Read | undefined,
  address: string,
  authorized: boolean,
): AuditEventInput {
  const d = described(read, method);
  const resource = note.resource ?? d.resource;
  return {
    time: deps.now(),
    projectId: projectOfEvent(resource, principal, authorized),
    actor: note.actor ?? actorOf(principal),
    method,
    resource,
    requestId: d.requestId,
    outcome: note.outcome ?? "ok",
    clientAddress: address,
    userAgent: req.header.get("user-agent") ?? "",
    changedFields: d.changedFields,
  };
}

async function record(
  deps: AuthDeps,
  method: string,
  req: UniversalServerRequest,
  note: AuditNote,
  principal: Principal | undefined,
  read: Read | undefined,
  address: string,
  authorized: boolean,
): Promise<void> {
  try {
    // A refusal by the guard still belongs to the project it named when the caller is of that project
    // (a viewer refused a save, a read key refused a write); otherwise to the caller's own.
    const inProject =
      authorized ||
      (principal !== undefined &&
        (await belongsTo(deps.db, principal, note.resource ?? described(read, method).resource)));
    await recordAuditEvent(deps.db, eventOf(deps, method, req, note, principal, read, address, inProject));
  } catch (err) {
    // The call's own answer stands; a lost event is an operator's alarm, not the caller's error.
    deps.log.error({ err, method }, "audit event not recorded");
  }
}

function described(read: Read | undefined, method: string) {
  return read?.message
    ? describeRequest(read.schema, read.message, method)
    : { resource: "", requestId: "", changedFields: [] };
}

/** Whether the caller is of the project `resource` names: a member, or a key or CI token of it. */
async function belongsTo(db: Db, p: Principal, resource: string): Promise<boolean> {
  const named = /^projects\/([^/]+)(?:\/|$)/.exec(resource)?.[1];
  if (named === undefined || p.kind === "OPERATOR") return false;
  if (p.kind === "HUMAN_SESSION") return (await roleOf(db, named, p.userId)) !== undefined;
  return p.projectId === named;
}

/** An error's ErrorInfo reason (CAPABILITY, NOT_FOUND, ...), else its code. */
function outcomeOf(err: ConnectError): string {
  return err.findDetails(ErrorInfoSchema)[0]?.reason || codeToString(err.code);
}

function statusOutcome(status: number): string {
  return status === 400 ? "invalid_argument" : status === 404 ? "not_found" : `http_${status}`;
}

/**
 * Maps every error thrown below it (handlers, Connect's decoding) to a Connect error with its ErrorInfo.
 * The caller was already authenticated and authorized by {@link guardHandlers}.
 */
export function errorInterceptor(log: Logger): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      const ce = toConnectError(err, log, `${req.service.typeName}/${req.method.name}`);
      const note = req.contextValues.get(auditNoteKey);
      if (note) note.outcome = outcomeOf(ce);
      throw ce;
    }
  };
}

/** The Connect protocol's unary error answer (svc serves the Connect protocol only). */
function errorResponse(err: ConnectError): UniversalServerResponse {
  const header = new Headers(err.metadata);
  header.set("Content-Type", "application/json");
  const bytes = errorToJsonBytes(err, {});
  return {
    status: codeToHttpStatus(err.code),
    header,
    body: (async function* () {
      yield bytes;
    })(),
  };
}

function credentialOf(header: Headers, consoleKey: Buffer): string | undefined {
  return requestCredential(
    {
      authorization: header.get("authorization"),
      cookie: header.get("cookie"),
      csrf: header.get(CSRF_HEADER),
    },
    consoleKey,
  );
}

/** Everything the row decides without a project: the credential's kind, capabilities and identity. */
function checkCaller(access: MethodAccess, p: Principal): void {
  if (access === "authenticated" || access === "public") return;
  if (access === "operator") {
    if (p.kind !== "OPERATOR")
      throw permissionDenied("OPERATOR_ONLY", "this provider operation needs the operator token");
    return;
  }
  if (p.kind === "OPERATOR")
    throw permissionDenied("PROJECT_BOUNDARY", "the operator token has no access to customer operations");
  if (typeof access === "object" && "human" in access) {
    if (p.kind !== "HUMAN_SESSION")
      throw permissionDenied(
        "HUMAN_ONLY",
        "this operation is for humans in the console, not for keys or CI tokens",
      );
    return;
  }
  if (p.kind !== "HUMAN_SESSION") authorizeCredential(p, access);
}

interface Resource {
  readonly field: string;
  readonly value: string;
}

/** Checks the row in the project the request names; without a name only a key's own project counts. */
async function authorizeResource(
  db: Db,
  p: Principal,
  access: Exclude<MethodAccess, "public" | "authenticated" | "operator">,
  resource: Resource | undefined,
): Promise<void> {
  const named = resource ? /^projects\/([^/]+)(?:\/|$)/.exec(resource.value)?.[1] : undefined;
  // A malformed or missing name is the handler's 400, naming the field: it names no project to refuse.
  const projectId = named ?? (p.kind !== "HUMAN_SESSION" && p.kind !== "OPERATOR" ? p.projectId : undefined);
  if (projectId === undefined) return;
  if (typeof access === "string" || !("human" in access)) return authorizeProject(db, p, projectId, access);
  if (p.kind !== "HUMAN_SESSION") return; // refused by checkCaller
  const need = access.human;
  if (need === "member") {
    await requireMember(db, projectId, p.userId);
  } else if (need === "owner" || (need === "keyOwner" && resource?.value.includes("/serviceAccounts/"))) {
    await requireOwner(db, projectId, p.userId, "may do this");
  } else if (need === "keyOwner") {
    await requireMember(db, projectId, p.userId);
  } else {
    const role = await requireMember(db, projectId, p.userId);
    if (!rolePermissions[role].includes(need))
      throw capabilityDenied(need, `your role ${role} does not grant ${need}`);
  }
}

interface Read {
  readonly body: UniversalServerRequest["body"];
  readonly resource?: Resource;
  readonly schema: DescMethod["input"];
  /** The request decoded leniently (unknown fields ignored), for the audit record. */
  readonly message?: Record<string, unknown>;
  /** A binary body that is no message of the method's input: its 400, naming the body. */
  readonly undecodable?: SvcError;
}

/**
 * Reads the body (bounded) and finds the resource the request names in it, leniently: JSON or binary,
 * gzip or br as Connect accepts them. The bytes go on to Connect unchanged. A body that cannot be read
 * names nothing: Connect's decoder then answers it.
 */
async function readRequest(req: UniversalServerRequest, method: DescMethod, maxBytes: number): Promise<Read> {
  const schema = method.input;
  const fields = schema.fields.filter((f) => (resourceFields as readonly string[]).includes(f.localName));
  const field = resourceFields
    .map((name) => fields.find((f) => f.localName === name))
    .find((f) => f !== undefined);
  if (!isStream(req.body)) return { body: req.body, schema };
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const c of req.body) {
    size += c.byteLength;
    if (size > maxBytes) throw tooLarge(maxBytes);
    chunks.push(c);
  }
  const bytes = Buffer.concat(chunks);
  const body = (async function* () {
    yield bytes;
  })();
  let message: Record<string, unknown> | undefined;
  try {
    const encoding = (req.header.get("content-encoding") ?? "identity").trim().toLowerCase();
    const plain =
      encoding === "gzip"
        ? gunzipSync(bytes, { maxOutputLength: maxBytes })
        : encoding === "br"
          ? brotliDecompressSync(bytes, { maxOutputLength: maxBytes })
          : encoding === "identity"
            ? bytes
            : undefined;
    if (!plain) return { body, schema };
    const type = req.header.get("content-type") ?? "";
    let value: unknown;
    if (/^application\/json\b/.test(type)) {
      const obj = JSON.parse(plain.toString("utf8")) as Record<string, unknown> | null;
      if (field) value = obj?.[field.jsonName] ?? obj?.[field.name];
      try {
        message = fromJson(schema, obj as never, { ignoreUnknownFields: true }) as never;
      } catch {
        // A body Connect will refuse: the record keeps what the guard found.
      }
    } else if (/^application\/proto\b/.test(type)) {
      try {
        message = fromBinary(schema, plain) as unknown as Record<string, unknown>;
      } catch (err) {
        const why = err instanceof Error ? err.message : String(err);
        return {
          body,
          schema,
          undecodable: invalidArgument("body", `is not a binary ${schema.typeName} (${why})`),
        };
      }
      if (field) value = message[field.localName];
    }
    return typeof value === "string" && field
      ? { body, schema, message, resource: { field: field.localName, value } }
      : { body, schema, message };
  } catch (err) {
    if (err instanceof RangeError && /maxOutputLength|Cannot create a Buffer/.test(err.message))
      throw tooLarge(maxBytes);
    return { body, schema, message };
  }
}

function isStream(b: UniversalServerRequest["body"]): b is AsyncIterable<Uint8Array> {
  return typeof b === "object" && b !== null && Symbol.asyncIterator in b;
}

function tooLarge(maxBytes: number): SvcError {
  return new SvcError("invalid_argument", `request body exceeds the limit of ${maxBytes} bytes`, {
    reason: "REQUEST_TOO_LARGE",
  });
}
