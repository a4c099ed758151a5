import assert from "node:assert/strict";
import { createHash, randomUUID } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { openTsdb } from "../../../server/src/tsdb/index.ts";
import { testDialects } from "../../../server/testing/dialects.ts";
import { ADMIN_TOKEN, startTestApp, type TestApp } from "../../../server/testing/harness.ts";
import { exitCodeOf } from "../common.ts";
import { buildProgram } from "../program.ts";

/** Runs `svc <args>` in-process with `env` as the only svc settings. */
async function run(args: string[], env: Record<string, string>) {
  const out: string[] = [];
  const err: string[] = [];
  const names = ["SVC_BASE_URL", "SVC_TOKEN", "SVC_API_KEY", "SVC_API_KEY_FILE", "SVC_CONFIG"];
  const saved = Object.fromEntries(names.map((n) => [n, process.env[n]]));
  for (const n of names) delete process.env[n];
  Object.assign(process.env, env);
  let code = 0;
  try {
    await buildProgram({ stdout: (s) => out.push(s), stderr: (s) => err.push(s) }).parseAsync(args, {
      from: "user",
    });
  } catch (e) {
    code = exitCodeOf(e);
    err.push(String(e));
  } finally {
    for (const n of names) {
      if (saved[n] === undefined) delete process.env[n];
      else process.env[n] = saved[n];
    }
  }
  return { code, out: out.join(""), err: err.join("") };
}

describe("svc admin backup and restore", async () => {
  const [{ dialect }] = await testDialects();
  let t: TestApp;
  let env: Record<string, string>;
  const dir = mkdtempSync(join(tmpdir(), "svc-cli-admin-"));
  before(async () => {
    // Webhooks to 127.0.0.1 allowed: the backlog case queues deliveries nobody will receive.
    t = await startTestApp(dialect, {
      notify: { dispatcherAutoStart: false, options: { allowHosts: ["127.0.0.1"] } },
    });
    await t.seedProject("clibk", ["vm-1"]);
    env = { SVC_BASE_URL: t.baseUrl, SVC_TOKEN: ADMIN_TOKEN, SVC_CONFIG: join(dir, "none.json") };
  });
  after(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("backs up through the operator RPC and restores offline into a new data directory, never over one", async () => {
    const backup = join(dir, "b1");
    const b = await run(["admin", "backup", "--to", backup, "--output", "json"], env);
    assert.equal(b.code, 0, b.err);
    const res = JSON.parse(b.out) as { directory: string; files: string; schemaMigration: string };
    assert.equal(res.directory, backup);
    assert.ok(Number(res.files) > 3);
    assert.ok(existsSync(join(backup, "manifest.json")));

    const again = await run(["admin", "backup", "--to", backup], env);
    assert.equal(again.code, 3, "FAILED_PRECONDITION: the directory is not empty");
    assert.match(again.err, /not empty/);

    const target = join(dir, "restored");
    const r = await run(["admin", "restore", "--from", backup, "--data-dir", target], {});
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, new RegExp(`restored \\d+ files .* into ${target}\\n`));
    assert.ok(readdirSync(target).includes("svc.db"));
    const over = await run(["admin", "restore", "--from", backup, "--data-dir", target], {});
    assert.equal(over.code, 1);
    assert.match(over.err, /exists and is not an empty directory: restore never overwrites/);

    const tenant = await run(["admin", "backup", "--to", join(dir, "b2")], {
      ...env,
      SVC_TOKEN: "svc_not_a_key",
    });
    assert.equal(tenant.code, 4);
    assert.equal(existsSync(join(dir, "b2")), false);
  });

  it("shows the operator the notification backlog that `svc deliveries list` refuses them", async () => {
    const p = await t.seedProject("clidlv", []);
    const owner = t.clients(p.owner.session);
    const d = await owner.destinations.createDestination({
      projectName: p.projectName,
      displayName: "pager",
      kind: "WEBHOOK",
      url: "https://127.0.0.1:9/hook",
      requestId: randomUUID(),
    });
    await owner.destinations.sendTestNotification({ name: d.destination?.name ?? "" });
    const refused = await run(["deliveries", "list", "--project", p.projectName], env);
    assert.notEqual(refused.code, 0, "a tenant listing stays refused to the operator token");
    const r = await run(["admin", "deliveries", "--top", "5"], env);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^pending 1\tdue [01]\toldest due waited /);
    assert.match(r.out, new RegExp(`\\n  ${d.destination?.name}\\tWEBHOOK\\tpending 1\\t`));
    assert.match(r.out, /\tprojects\/clidlv\/destinations\/[^\t]+\ttest\tPENDING\t/);
    const usage = await run(["admin", "usage", "--top", "3"], env);
    assert.equal(usage.code, 0, usage.err);
    assert.match(
      usage.out,
      /^\d+ of \d+ projects at \S+\nproject\tactive series\tsamples\/s\tquery CPU s\tstored bytes\n/,
    );
    const byBytes = await run(["admin", "usage", "--sort", "stored_bytes", "--json"], env);
    assert.equal(byBytes.code, 0, byBytes.err);
    assert.deepEqual(JSON.parse(byBytes.out).unavailable ?? [], []);
    const byCpu = await run(["admin", "usage", "--sort", "query_cpu_seconds"], env);
    assert.equal(byCpu.code, 0, byCpu.err);
    const badSort = await run(["admin", "usage", "--sort", "bytes"], env);
    assert.equal(badSort.code, 3);
    assert.match(
      badSort.err,
      /orderBy: must be one of active_series, samples_per_second, query_cpu_seconds, stored_bytes/,
    );
    const json = await run(["admin", "deliveries", "--json"], env);
    assert.equal(JSON.parse(json.out).pending, "1");
    const bad = await run(["admin", "deliveries", "--top", "0"], env);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--top must be a whole number from 1 to 500/);
  });

  it("--keep N writes each backup into the root under its time and keeps the N newest complete ones; metrics say how the last went", async () => {
    const root = join(dir, "rotated");
    mkdirSync(root);
    // A failed run's leftover (no manifest, older) and something that is not a backup of this command.
    mkdirSync(join(root, "svc-20200101T000000.000Z"));
    mkdirSync(join(root, "notes"));
    const made: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await run(["admin", "backup", "--to", root, "--keep", "2", "--output", "json"], env);
      assert.equal(r.code, 0, `run ${i}: ${r.err} ${readdirSync(root)}`);
      made.push(JSON.parse(r.out).directory);
      // Names carry milliseconds; let the clock move on so the next run gets a later one.
      await new Promise((res) => setTimeout(res, 5));
    }
    assert.deepEqual(readdirSync(root).sort(), [
      "notes",
      ...made.slice(1).map((d) => d.slice(root.length + 1)),
    ]);
    for (const d of made.slice(1)) assert.ok(existsSync(join(d, "manifest.json")));

    const text = await (
      await fetch(`${t.baseUrl}/metrics`, { headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } })
    ).text();
    const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1]);
    assert.ok(value("svc_backup_last_success_timestamp_seconds") > 0);
    assert.ok(value("svc_backup_last_bytes") > 0);
    assert.ok(value("svc_backup_last_duration_seconds") >= 0);
    assert.ok(value('svc_backups_total\\{outcome="ok"\\}') >= 3);

    const zero = await run(["admin", "backup", "--to", root, "--keep", "0"], env);
    assert.equal(zero.code, 2);
    assert.match(zero.err, /--keep must be a whole number from 1 to 1000/);
    const missing = await run(["admin", "backup", "--to", join(dir, "nowhere"), "--keep", "2"], env);
    assert.equal(missing.code, 2);
    assert.match(missing.err, /does not exist here/);
  });
});

/** Every file under `dir`: size, mtime and SHA-256, to show a read-only command changed nothing. */
function fingerprint(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const p = join(e.parentPath, e.name);
    const st = statSync(p);
    const hash = e.isFile() ? createHash("sha256").update(readFileSync(p)).digest("hex") : "dir";
    out.set(p, `${st.size} ${st.mtimeMs} ${hash}`);
  }
  return out;
}

describe("svc admin check (offline, read-only)", () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-cli-check-"));
  const data = join(dir, "data");
  const HOUR = 3_600_000;
  before(async () => {
    let now = Date.UTC(2025, 0, 1);
    const db = await openTsdb(join(data, "tsdb"), { now: () => now, autoCompact: false });
    for (let t = now; t < Date.UTC(2025, 0, 1) + 8 * HOUR; t += 60_000) {
      now = t;
      const app = db.appender();
      for (let i = 0; i < 5; i++)
        app.append(
          [
            { name: "__name__", value: "m" },
            { name: "vm", value: `v${i}` },
          ],
          t,
          i * t,
        );
      await app.commit();
    }
    await db.compact(); // blocks and a checkpoint
    await db.close();
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("reports a sound store as sound, then each damaged unit with exit code 1, changing no file", async () => {
    const sound = await run(["admin", "check", "--data-dir", data], {});
    assert.equal(sound.code, 0, sound.err);
    assert.match(sound.out, /read \d+ WAL files and [1-9]\d* blocks\nno damage found\n/);

    const wal = join(data, "tsdb", "wal");
    const cp = readdirSync(wal).find((e) => e.startsWith("checkpoint."));
    assert.ok(cp);
    const cpFile = join(wal, cp, "00000000");
    const block = readdirSync(join(data, "tsdb", "blocks"))[0];
    const chunks = join(data, "tsdb", "blocks", block, "chunks");
    for (const [file, at] of [
      [cpFile, 20],
      [chunks, 40],
    ] as const) {
      const b = readFileSync(file);
      b[at] ^= 0x5a;
      writeFileSync(file, b);
    }
    const before = fingerprint(data);
    const bad = await run(["admin", "check", "--data-dir", data], {});
    assert.equal(bad.code, 1);
    assert.match(bad.out, new RegExp(`checkpoint_record\t${cpFile}\toffset 0\t`));
    assert.match(
      bad.out,
      new RegExp(`block_chunk\t${chunks}\toffset \\d+\t\\d+ bytes\t\\d+ samples\tchunk checksum mismatch`),
    );
    assert.match(bad.out, /DAMAGED/);
    const json = await run(["admin", "check", "--data-dir", data, "--json"], {});
    assert.equal(json.code, 1);
    const report = JSON.parse(json.out) as {
      damaged: boolean;
      damage: { kind: string; samples: number | null; detail: string }[];
    };
    assert.equal(report.damaged, true);
    // Offset 20 lies in the checkpoint's series record: its series' samples have no labels any more.
    assert.deepEqual(report.damage.map((d) => d.kind).sort(), [
      "block_chunk",
      "checkpoint_record",
      "checkpoint_record",
    ]);
    const orphans = report.damage.find((d) => /series record was damaged/.test(d.detail));
    assert.ok(orphans?.samples && orphans.samples > 0, "the samples of the lost series are counted");
    assert.deepEqual(fingerprint(data), before, "check changed the directory");

    const none = await run(["admin", "check", "--data-dir", join(dir, "nothing")], {});
    assert.equal(none.code, 1);
    assert.match(none.err, /no metrics store here/);
  });
});
