import type { Client } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Key, KeyService } from "./gen/svc/iam/v1/key_pb.ts";

/**
 * Lost-secret recovery (docs/api.md, lost-secret recovery) for key create and rotate: one request id for every attempt, an
 * ambiguous failure retried with that same id, and a replay (the key exists but its secret never
 * arrived) recovered with RecoverLostKey, which revokes the lost key and issues its replacement in one
 * server step.
 */

/** Failures after which the request may or may not have been applied: retry with the same requestId. */
export const AMBIGUOUS_CODES: ReadonlySet<Code> = new Set([
  Code.Unavailable,
  Code.DeadlineExceeded,
  Code.Unknown,
  Code.Internal,
  Code.Aborted,
]);

/** True when `err` leaves the outcome of a mutating request unknown. */
export function isAmbiguous(err: unknown): boolean {
  return AMBIGUOUS_CODES.has(ConnectError.from(err).code);
}

export interface KeyRecoveryOptions {
  /** Reuse the id of an earlier, interrupted attempt; default a new random UUID. */
  readonly requestId?: string;
  /** Attempts of each call on an ambiguous failure, the first included. Default 3. */
  readonly maxAttempts?: number;
  /** Told before each retry (e.g. to print the request id); never given a secret. */
  readonly onRetry?: (info: { requestId: string; attempt: number; error: ConnectError }) => void;
  /** Told when an earlier attempt's key is being recovered (revoked and replaced). */
  readonly onRecover?: (info: { lostKey: Key | undefined; lostRequestId: string }) => void;
  /** Default setTimeout; tests pass a fake. Wait before retry n (1-based): n seconds. */
  readonly sleep?: (ms: number) => Promise<void>;
}

export interface IssuedKey {
  /** The usable key. */
  readonly key: Key;
  /** Its secret: shown once, store it now. */
  readonly secret: string;
  /** The request id the first call used (print it so a user can retry by hand). */
  readonly requestId: string;
  /** When an earlier attempt had issued a key whose secret was lost: that key, now revoked. */
  readonly revokedKey?: Key;
}

type Keys = Client<typeof KeyService>;

async function withRetry<T>(call: () => Promise<T>, requestId: string, opts: KeyRecoveryOptions): Promise<T> {
  const max = opts.maxAttempts ?? 3;
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (e) {
      const error = ConnectError.from(e);
      if (attempt >= max || !AMBIGUOUS_CODES.has(error.code)) throw error;
      opts.onRetry?.({ requestId, attempt, error });
      await sleep(attempt * 1000);
    }
  }
}

async function finish(
  keys: Keys,
  requestId: string,
  res: { key?: Key; secret?: string; replayed: boolean },
  opts: KeyRecoveryOptions,
): Promise<IssuedKey> {
  if (res.secret !== undefined && res.key) return { key: res.key, secret: res.secret, requestId };
  // The key exists but its secret never reached us and cannot be retrieved: revoke and replace it.
  opts.onRecover?.({ lostKey: res.key, lostRequestId: requestId });
  const r = await recoverLostKey(keys, requestId, { ...opts, requestId: undefined });
  return { ...r, requestId };
}

/**
 * RecoverLostKey with retries: revokes the key issued by the request `lostRequestId` and returns its
 * replacement. `opts.requestId` is the recovery's own id (default a new UUID); if the recovery's
 * answer is itself lost and replayed, that recovery is recovered in turn.
 */
export async function recoverLostKey(
  keys: Keys,
  lostRequestId: string,
  opts: KeyRecoveryOptions = {},
): Promise<IssuedKey> {
  const recovery = { lostRequestId, requestId: opts.requestId ?? crypto.randomUUID() };
  const rec = await withRetry(() => keys.recoverLostKey(recovery), recovery.requestId, opts);
  if (!rec.key || rec.secret === undefined) {
    opts.onRecover?.({ lostKey: rec.key, lostRequestId: recovery.requestId });
    const next = await recoverLostKey(keys, recovery.requestId, { ...opts, requestId: undefined });
    return { ...next, requestId: recovery.requestId, revokedKey: rec.revokedKey };
  }
  return { key: rec.key, secret: rec.secret, requestId: recovery.requestId, revokedKey: rec.revokedKey };
}

/**
 * CreateKey with exact-retry recovery: returns a working key and its secret, whatever happened to
 * earlier attempts with the same request id (at most one key of them stays active).
 */
export async function createKeyWithRecovery(
  keys: Keys,
  req: { parent: string; displayName: string; capabilities: readonly string[]; expireDays?: number },
  opts: KeyRecoveryOptions = {},
): Promise<IssuedKey> {
  const requestId = opts.requestId ?? crypto.randomUUID();
  const body = {
    parent: req.parent,
    displayName: req.displayName,
    capabilities: [...req.capabilities],
    expireDays: req.expireDays ?? 0,
    requestId,
  };
  const res = await withRetry(() => keys.createKey(body), requestId, opts);
  return finish(keys, requestId, res, opts);
}

/** RotateKey with the same recovery as {@link createKeyWithRecovery}. */
export async function rotateKeyWithRecovery(
  keys: Keys,
  req: { name: string; overlapSeconds?: number; expireDays?: number },
  opts: KeyRecoveryOptions = {},
): Promise<IssuedKey> {
  const requestId = opts.requestId ?? crypto.randomUUID();
  const body = {
    name: req.name,
    overlapSeconds: req.overlapSeconds ?? 0,
    expireDays: req.expireDays ?? 0,
    requestId,
  };
  const res = await withRetry(() => keys.rotateKey(body), requestId, opts);
  return finish(keys, requestId, res, opts);
}
