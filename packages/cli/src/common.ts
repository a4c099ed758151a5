import type { Command } from "commander";

/** A mistake in how the command was called (exit code 2). */
export class UsageError extends Error {}

/** The API origin from --base-url or SVC_BASE_URL, without a trailing slash. */
export function baseUrlOf(cmd: Command): string {
  const url = (cmd.optsWithGlobals().baseUrl as string | undefined) ?? process.env.SVC_BASE_URL;
  if (!url) throw new UsageError("set --base-url or SVC_BASE_URL to the svc API origin");
  return url.replace(/\/+$/, "");
}
