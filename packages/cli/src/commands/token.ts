import { UsageError } from "../common.ts";

/** The credential comes from SVC_TOKEN only: never a flag, so it stays out of shell history and `ps`. */
export function tokenOf(): string {
  const token = process.env.SVC_TOKEN;
  if (!token) throw new UsageError("set SVC_TOKEN to an svc key, CI token or console session token");
  return token;
}
