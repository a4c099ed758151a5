import type { Migration } from "kysely";
import * as m0001 from "./0001_foundation.ts";

/**
 * Every migration, in order. Add one file per schema change and list it here; names sort by their
 * four-digit prefix and are never renamed once shipped.
 */
export const migrations: Record<string, Migration> = {
  "0001_foundation": m0001,
};
