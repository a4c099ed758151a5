import type { AsyncLocalStorage } from "node:async_hooks";
import { type CallNotes, callNotes } from "../call-notes.ts";
import type { Db } from "../db/database.ts";
import { type AuditEventInput, insertAuditEvent } from "./events.ts";

/** The event of the call being handled, until it is written; its notes (call-notes.ts) with it. */
export interface PendingAudit extends CallNotes {
  /** The event as it stands if the call succeeds. */
  readonly event: () => AuditEventInput;
  written: boolean;
}

/**
 * The audited call being handled: the call notes' storage, typed as what the guard (http/auth.ts)
 * runs every handler with, a PendingAudit; domain code notes into it through call-notes.ts.
 */
export const pendingAudit = callNotes as AsyncLocalStorage<PendingAudit>;

/** Marks a wrapped database, so wrapping twice writes one event, not two. */
const WRAPPED = Symbol("audited transactions");

/**
 * The control-plane database whose transactions, when one commits on behalf of an audited call, carry
 * that call's event in them: the change and its record commit together or not at all (issue 29, "exactly
 * once"). The first transaction of a call carries it; a call that changes nothing in a transaction is
 * recorded by the guard after it answers (http/auth.ts).
 */
export function withAuditedTransactions(db: Db): Db {
  if ((db as unknown as Record<symbol, boolean>)[WRAPPED]) return db;
  return new Proxy(db, {
    get(target, prop) {
      if (prop === WRAPPED) return true;
      if (prop === "transaction") return () => builder(target.transaction());
      return bound(target, prop);
    },
  });
}

type Builder = ReturnType<Db["transaction"]>;

function builder(b: Builder): Builder {
  return new Proxy(b, {
    get(target, prop) {
      if (prop === "setIsolationLevel" || prop === "setAccessMode")
        return (...args: unknown[]) =>
          builder((bound(target, prop) as (...a: unknown[]) => Builder)(...args));
      if (prop !== "execute") return bound(target, prop);
      return <T>(fn: (trx: Parameters<Parameters<Builder["execute"]>[0]>[0]) => Promise<T>) => {
        let carried: PendingAudit | undefined;
        return target
          .execute(async (trx) => {
            const result = await fn(trx);
            const p = pendingAudit.getStore();
            if (p && !p.written && !p.closed) {
              await insertAuditEvent(trx, p.event());
              carried = p;
            }
            return result;
          })
          .then((result) => {
            // Only once committed: a rollback leaves the record (of the failure) to the guard.
            if (carried) carried.written = true;
            return result;
          });
      };
    },
  });
}

/** Kysely keeps its state in private fields: its methods must run on the object itself, not the proxy. */
function bound(target: object, prop: string | symbol): unknown {
  const v = Reflect.get(target, prop, target);
  return typeof v === "function" ? v.bind(target) : v;
}
