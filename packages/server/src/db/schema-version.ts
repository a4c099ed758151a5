/**
 * The control-plane schema's version: the newest migration this build ships (its four-digit prefix is
 * the number). Plain TypeScript, so the backup tools can compare without loading Kysely; a test keeps
 * it equal to the last entry of migrations/index.ts.
 */
export const LATEST_MIGRATION = "0016_eval_revision";

/** 8 for "0008_rate_buckets"; NaN for a name that is not a migration's. */
export function schemaVersionOf(migration: string): number {
  const m = /^(\d{4})_/.exec(migration);
  return m ? Number(m[1]) : Number.NaN;
}

export const SCHEMA_VERSION = schemaVersionOf(LATEST_MIGRATION);

/** The database was migrated by a newer build: this one refuses it and changes nothing. */
export class SchemaTooNewError extends Error {
  constructor(readonly unknown: readonly string[]) {
    super(
      `the control-plane database has migration${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")} applied, ` +
        `newer than this build's newest (${LATEST_MIGRATION}, schema version ${SCHEMA_VERSION}): ` +
        "upgrade svc to the build that migrated it (nothing was changed)",
    );
    this.name = "SchemaTooNewError";
  }
}
