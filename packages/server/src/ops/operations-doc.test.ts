/**
 * docs/operations.md against the code, so the on-call's page cannot drift from the build: the format
 * versions it names, its scrape configurations (as one prometheus.yml, through `promtool check config`)
 * and the lease rows its upgrade procedure tells the operator to look for. (The schema number is held
 * to the migrations by db/migrations.test.ts.)
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { fileURLToPath } from "node:url";
import { parse as parseYaml, stringify } from "yaml";
import { promtool, promtoolSkip } from "../../testing/promtool.ts";
import { BACKUP_FORMAT_VERSION } from "../backup/manifest.ts";
import { createShardLeases } from "../cluster/shards.ts";
import { openDb } from "../db/database.ts";
import { TSDB_FORMAT } from "../tsdb/index.ts";

const ROOT = fileURLToPath(new URL("../../../../", import.meta.url));
const doc = readFileSync(join(ROOT, "docs/operations.md"), "utf8");

/** The text of a `## title` section, up to the next `## `. */
function section(title: string): string {
  const start = doc.indexOf(`\n## ${title}`);
  assert.ok(start >= 0, `no section ${title}`);
  const end = doc.indexOf("\n## ", start + 1);
  return doc.slice(start, end < 0 ? undefined : end);
}

it("the format versions in docs/operations.md are this build's", () => {
  const { wal, block } = TSDB_FORMAT;
  const row = (name: string) => doc.split("\n").find((l) => l.startsWith(`| ${name} |`));
  const store = row("embedded store, WAL and blocks");
  assert.ok(store?.includes(`(\`{"wal":${wal},"block":${block}}\`)`), store);
  // The cell may add what older formats this build still reads: "WAL 2, block 2 (reads block 1)".
  assert.match(store ?? "", new RegExp(`\\| WAL ${wal}, block ${block}( \\(reads [^)]*\\))? \\|$`));
  const backup = row("backup");
  assert.ok(backup?.endsWith(`| ${BACKUP_FORMAT_VERSION} |`), backup);
  // The examples of a refusal name a newer format than this build's, and this build's.
  assert.ok(doc.includes(`WAL format ${wal + 1} is newer than this build reads (${wal})`));
  assert.ok(doc.includes(`tsdbWal format ${wal + 1} is newer than this build reads (${wal})`));
});

it("the scrape configurations of docs/operations.md pass promtool check config as one file", {
  skip: promtoolSkip,
}, () => {
  const blocks = [...section("Scraping svc").matchAll(/```yaml\n([\s\S]*?)```/g)].map(
    (m) => parseYaml(m[1]) as { rule_files?: string[]; scrape_configs: Record<string, unknown>[] },
  );
  assert.equal(blocks.length, 2);
  const dir = mkdtempSync(join(tmpdir(), "svc-ops-doc-"));
  try {
    // The paths the docs name, made local: the rules are the mixin's, the token any file.
    writeFileSync(join(dir, "svc-admin-token"), "token\n", { mode: 0o600 });
    const scrapeConfigs = blocks
      .flatMap((b) => b.scrape_configs)
      .map((c) => {
        const auth = c.authorization as { credentials_file?: string } | undefined;
        return auth?.credentials_file
          ? { ...c, authorization: { ...auth, credentials_file: join(dir, "svc-admin-token") } }
          : c;
      });
    const ruleFiles = blocks.flatMap((b) => b.rule_files ?? []);
    assert.deepEqual(ruleFiles, ["/etc/prometheus/svc-alerts.yml"]);
    const file = join(dir, "prometheus.yml");
    writeFileSync(
      file,
      stringify({
        rule_files: [join(ROOT, "deploy/monitoring/alerts.yml")],
        scrape_configs: scrapeConfigs,
      }),
    );
    const r = promtool(["check", "config", file]);
    assert.equal(r.status, 0, r.out);
    // Each way ends up as job="svc", which the rules and the dashboard select.
    for (const c of scrapeConfigs) {
      const relabel = (c.relabel_configs ?? []) as { target_label?: string; replacement?: string }[];
      const job = relabel.find((x) => x.target_label === "job")?.replacement ?? c.job_name;
      assert.equal(job, "svc", JSON.stringify(c));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

it("the lease rows the upgrade procedure names are the rows evaluators write", async () => {
  const upgrades = section("Upgrades");
  const named = [...new Set([...upgrades.matchAll(/`(alert-evaluator[^`\s']*)`/g)].map((m) => m[1]))];
  assert.ok(named.length >= 2, `upgrade section names no lease rows: ${named}`);
  const h = await openDb({ sqlitePath: ":memory:" });
  try {
    const leases = createShardLeases({ db: h.db, holder: "replica-a", intervalMs: 30_000, count: 4 });
    await leases.acquire(Date.now());
    const rows = (await h.db.selectFrom("leases").select("name").execute()).map((r) => r.name);
    for (const n of named) {
      // `<i>` and `<holder>` stand for a shard number and a replica's id.
      const pattern = new RegExp(
        `^${n.replaceAll(/[.*+?^${}()|[\]\\]/g, "\\$&").replaceAll(/<[a-z]+>/g, "[^/]+")}$`,
      );
      assert.ok(
        rows.some((r) => pattern.test(r)),
        `docs/operations.md names ${n}; the leases table has ${rows}`,
      );
    }
    // And the other way: every kind of row the evaluators write is named.
    for (const r of rows)
      assert.ok(
        named.some((n) => r.startsWith(n.replace(/<[a-z]+>$/, ""))),
        `${r} is not named in the upgrade section`,
      );
  } finally {
    await h.close();
  }
});

const systemdSkip =
  spawnSync("systemd-analyze", ["--version"]).status === 0 ? undefined : "no systemd-analyze";

it("the shipped units give backups a place: svc.service may write where svc-backup.service sends them", {
  skip: systemdSkip,
}, () => {
  const deploy = join(ROOT, "deploy");
  const units = ["svc.service", "svc-backup.service", "svc-backup.timer"];
  const r = spawnSync("systemd-analyze", ["verify", "--man=no", ...units], { cwd: deploy, encoding: "utf8" });
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
  assert.equal(`${r.stdout}${r.stderr}`.trim(), "");
  const setting = (unit: string, key: string) =>
    readFileSync(join(deploy, unit), "utf8")
      .split("\n")
      .filter((l) => l.startsWith(`${key}=`))
      .flatMap((l) => l.slice(key.length + 1).split(/\s+/));
  const to = /--to (\S+) --keep \d+/.exec(setting("svc-backup.service", "ExecStart").join(" "))?.[1];
  assert.ok(to, "svc-backup.service runs svc admin backup --to DIR --keep N");
  // The server writes the backup: its sandbox must let it, outside the data directory.
  assert.ok(setting("svc.service", "ReadWritePaths").includes(to), `svc.service may not write ${to}`);
  assert.ok(
    setting("svc.service", "StateDirectory").includes(to.replace("/var/lib/", "")),
    `${to} is not created`,
  );
  assert.ok(!to.startsWith("/var/lib/svc/"), "outside the data directory");
  // The CLI prunes there, and the docs' procedure names the same place.
  assert.ok(setting("svc-backup.service", "ReadWritePaths").includes(to));
  assert.ok(doc.includes(`--to ${to} --keep`), `docs/operations.md does not show backups into ${to}`);
});
