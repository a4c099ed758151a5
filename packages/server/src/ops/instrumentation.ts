/**
 * What the process is and where it stands, for the operator's alerts (docs/operations.md): the build
 * (`svc_build_info`), its configuration (metrics backend, database, roles, retention), the filesystem
 * holding the data directory (read with statfs at scrape time: ENOSPC otherwise shows up late, as
 * failed compactions), and on ingest processes the VMs the inventory holds (not ingesting while VMs
 * exist is an outage).
 */
import { statfs } from "node:fs/promises";
import type { Role } from "../config.ts";
import { ROLES } from "../config.ts";
import type { Db, DbDialect } from "../db/database.ts";
import { gauge, observed, type Registry } from "../instrument.ts";
import { vmStates } from "../inventory/vms.ts";
import type { BuildInfo } from "./build-info.ts";

export interface ProcessState {
  readonly build: BuildInfo;
  readonly metricsBackend: "embedded" | "remote";
  readonly dialect: DbDialect;
  readonly roles: ReadonlySet<Role>;
  readonly dataDir: string;
  /** With the embedded store: its retention and longest block, ms. */
  readonly tsdb?: { readonly retentionMs: number; readonly maxBlockDurationMs: number };
  /** On ingest processes: the control plane, to count the inventory's VMs at scrape time. */
  readonly inventory?: Db;
}

export function registerProcessMetrics(registry: Registry, s: ProcessState): void {
  gauge(
    registry,
    "svc_build_info",
    "Always 1: the build this process runs (version, git revision, Node.js version).",
    ["version", "revision", "node"],
  ).set({ version: s.build.version, revision: s.build.revision, node: process.version }, 1);
  gauge(
    registry,
    "svc_config_info",
    "Always 1: this process's metrics backend (embedded, remote) and control-plane database (sqlite, postgres).",
    ["metrics_backend", "database"],
  ).set({ metrics_backend: s.metricsBackend, database: s.dialect }, 1);
  const role = gauge(registry, "svc_role_enabled", "1 for each role this process runs (SVC_ROLES), else 0.", [
    "role",
  ]);
  for (const r of ROLES) role.set({ role: r }, s.roles.has(r) ? 1 : 0);
  if (s.tsdb) {
    gauge(
      registry,
      "svc_tsdb_retention_seconds",
      "The embedded store's retention (SVC_RETENTION_HOURS).",
    ).set(s.tsdb.retentionMs / 1000);
    gauge(
      registry,
      "svc_tsdb_max_block_duration_seconds",
      "The longest block the embedded store merges into; retention drops whole blocks, so data may outlive the retention by this much.",
    ).set(s.tsdb.maxBlockDurationMs / 1000);
  }
  // Absent when statfs fails (the directory gone or unreadable): missing, not zero.
  const fs = async () => statfs(s.dataDir).catch(() => undefined);
  observed(
    registry,
    "gauge",
    "svc_data_dir_filesystem_avail_bytes",
    "Bytes an unprivileged process may still write on the filesystem holding SVC_DATA_DIR.",
    async () => {
      const f = await fs();
      return f && f.bavail * f.bsize;
    },
  );
  observed(
    registry,
    "gauge",
    "svc_data_dir_filesystem_size_bytes",
    "Size of the filesystem holding SVC_DATA_DIR.",
    async () => {
      const f = await fs();
      return f && f.blocks * f.bsize;
    },
  );
  const db = s.inventory;
  if (db)
    observed(
      registry,
      "gauge",
      "svc_inventory_vms",
      "VMs in the inventory (not deleted) by state, across every project.",
      async () => {
        const rows = await db
          .selectFrom("vms")
          .select((eb) => ["state", eb.fn.countAll<number>().as("n")])
          .where("delete_time", "is", null)
          .groupBy("state")
          .execute()
          .catch(() => undefined);
        if (!rows) return undefined;
        const n = new Map(rows.map((r) => [r.state, Number(r.n)]));
        return vmStates
          .filter((st) => st !== "DELETED")
          .map((state) => ({ labels: { state }, value: n.get(state) ?? 0 }));
      },
    );
}
