/**
 * What domain code notes about the RPC call it runs in, for that call's audit record: the resource a
 * create is creating (audit/transactions.ts writes it into the event). Kept out of audit/ so that the
 * domains audit/ itself reads (iam/: principals, actors, the capability table) can note a creation
 * without importing audit/: no import cycle between domains (docs/architecture.md).
 */
import { AsyncLocalStorage } from "node:async_hooks";

/** The notes of the call being handled; the guard (http/auth.ts) runs the handler with them. */
export interface CallNotes {
  /** Set when the handler has answered: later transactions (work it started) are not its change. */
  closed: boolean;
  /** What the call created, once the handler knows: the event of its success names it, not the parent. */
  created?: string;
}

export const callNotes = new AsyncLocalStorage<CallNotes>();

/**
 * Names the resource a create is creating, before its transaction commits: the event of a successful
 * create names it, so the resource's own log starts with its creation (a refused or failed create names
 * the parent it was asked of: nothing was created). A no-op outside an audited call.
 */
export function noteCreated(name: string): void {
  const p = callNotes.getStore();
  if (p && !p.closed) p.created = name;
}
