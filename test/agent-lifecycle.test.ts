/**
 * The guest agent's package through its life in a minimal Debian 12 root made by mmdebstrap from
 * Debian's archive (packages/agent/testing/debian-root.ts): the install command svc hands out, run as
 * printed (apt resolves Node.js 18 from the archive), the maintainer scripts' user, directories and modes,
 * the agent's own tests under that Node.js, the unit through systemd-analyze verify, an upgrade that keeps
 * token, configuration and unsent spool, the agent sending from the root to this process's server, remove
 * and purge. systemd cannot run in a chroot: the agent is started the way its unit says (user, group,
 * environment, ExecStart), and stopping through systemd on removal is not exercised here.
 *
 * Needs root, mmdebstrap, unshare and chroot: skipped with a message without them, failed under CI=true.
 * The root is built once (minutes, downloading from the archive) into .cache/debian-root/.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { build } from "esbuild";
import { DebianRoot, debianRootImage, debianRootUnavailable } from "../packages/agent/testing/debian-root.ts";
import { buildAgentPackage } from "../packages/server/testing/agent-package.ts";
import { testDialects } from "../packages/server/testing/dialects.ts";
import { startTestApp, type TestApp } from "../packages/server/testing/harness.ts";

const unavailable = debianRootUnavailable();
if (unavailable && process.env.CI === "true") {
  it("the guest agent's package life cycle needs its Debian 12 root in CI", () => {
    assert.fail(`cannot build the Debian 12 root: ${unavailable}`);
  });
}
const skip = unavailable
  ? `the guest agent's package life cycle needs a Debian 12 root: ${unavailable}`
  : false;
if (skip) process.stdout.write(`# skipped: ${skip}\n`);

const repoRoot = join(import.meta.dirname, "..");
const UNIT = "/lib/systemd/system/svc-agent.service";
const WANTS = "/etc/systemd/system/multi-user.target.wants/svc-agent.service";

describe("the guest agent's package in a fresh Debian 12 root", { skip }, () => {
  let root: DebianRoot;
  let t: TestApp;
  let vm: string;
  let token: string;
  let owner: ReturnType<TestApp["clients"]>;
  let work: string;

  before(async () => {
    const { tar } = debianRootImage((line) => process.stdout.write(`# ${line}\n`));
    root = DebianRoot.extract(tar);
    work = mkdtempSync(join(tmpdir(), "svc-agent-life-"));
    const [sqlite] = await testDialects();
    t = await startTestApp(sqlite.dialect, { agentPackageDir: buildAgentPackage() }, { wallClock: true });
  });
  after(async () => {
    await root?.close();
    await t?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("installs with the command svc prints: download, checksum, install from the archive, configuration, token from stdin", async () => {
    assert.notEqual((await root.run(["sh", "-c", "command -v node"])).status, 0, "the root has no Node.js");
    const p = await t.seedProject("life", ["vm-1"]);
    owner = t.clients(p.owner.session);
    vm = p.vms[0];
    const res = await owner.monitoring.enableExpandedMonitoring({ name: vm });
    token = res.agentToken;
    assert.ok(!res.installCommand.includes(token), "the command holds no secret");

    // As the customer pastes it into bash, then the token at the prompt.
    const run = await root.run(["bash", "-c", res.installCommand], { input: `${token}\n` });
    assert.match(run.stdout, /: OK$/m, "sha256sum checked the download");
    // Every step ran; only the last one's start needs a booted systemd, which a chroot is not.
    assert.match(run.stderr, /System has not been booted with systemd/);
    assert.ok(await exists(root, WANTS), `systemctl enabled the unit:\n${run.stdout}\n${run.stderr}`);
    assert.ok(!`${run.stdout}${run.stderr}`.includes(token), "the token is not echoed");
    assert.ok(!(await exists(root, "/root/.bash_history")), "nothing went to a shell history");

    const versions = await root.sh("dpkg-query -W svc-agent nodejs");
    assert.match(versions, /^svc-agent\t0\.1\.0$/m);
    // Debian 12's own Node.js, resolved by apt from the archive.
    const node = /^nodejs\t(\S+)$/m.exec(versions)?.[1];
    assert.ok(node && /deb12/.test(node), `nodejs from Debian's archive: ${versions}`);
    assert.equal(
      spawnSync("dpkg", ["--compare-versions", node, "ge", "18.19"]).status,
      0,
      `nodejs ${node} >= 18.19`,
    );

    assert.match(
      await root.sh("getent passwd svc-agent"),
      /^svc-agent:x:\d+:\d+::\/var\/lib\/svc-agent:\/usr\/sbin\/nologin$/m,
    );
    assert.equal(
      await root.sh(
        "stat -c '%a %U:%G %n' /etc/svc-agent /etc/svc-agent/token /var/lib/svc-agent /var/lib/svc-agent/spool",
      ),
      "750 root:svc-agent /etc/svc-agent\n640 root:svc-agent /etc/svc-agent/token\n" +
        "700 svc-agent:svc-agent /var/lib/svc-agent\n700 svc-agent:svc-agent /var/lib/svc-agent/spool\n",
    );
    assert.equal(readFileSync(root.path("/etc/svc-agent/token"), "utf8"), token);
    assert.equal(
      readFileSync(root.path("/etc/svc-agent/agent.env"), "utf8"),
      `SVC_AGENT_SERVER=${t.baseUrl}\nSVC_AGENT_VM=${vm}\n`,
    );
  });

  it("has a unit that systemd-analyze verify accepts", async () => {
    const r = await root.run(["systemd-analyze", "verify", UNIT]);
    assert.equal(r.status, 0, r.stderr);
    assert.ok(!/svc-agent/.test(r.stderr), r.stderr);
  });

  it("passes the agent's own tests under the root's Node.js, against the installed bundle", async () => {
    const src = join(repoRoot, "packages", "agent", "src");
    const tests = readdirSync(src, { recursive: true })
      .map(String)
      .filter((f) => f.endsWith(".test.ts"))
      .map((f) => join(src, f));
    await build({
      entryPoints: tests,
      outbase: src,
      outdir: root.path("/opt/agent-tests"),
      outExtension: { ".js": ".mjs" },
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node18.19",
      logLevel: "error",
    });
    const files = tests.map((f) => `/opt/agent-tests/${f.slice(src.length + 1).replace(/\.ts$/, ".mjs")}`);
    const r = await root.run([
      "env",
      "SVC_AGENT_TEST_BIN=/usr/lib/svc-agent/svc-agent.mjs",
      "node",
      "--test",
      ...files,
    ]);
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /^# fail 0$/m);
    // Which suites ran under the guest's Node.js, in this test's output.
    const summary = r.stdout.split("\n").filter((l) => /^(ok|not ok|# (pass|fail))/.test(l));
    process.stdout.write(`${summary.join("\n")}\n`);
    assert.doesNotMatch(r.stdout, /^# pass 0$/m);
  });

  let spooledMs = 0;
  it("upgrades to a newer version keeping token, configuration and the unsent spool", async () => {
    // A collection the agent could not send: the server unreachable (port 9, discard, is closed here).
    const offline = startAsUnit(root, { SVC_AGENT_SERVER: "http://127.0.0.1:9" });
    await offline.waitFor(/push failed; spooling/);
    spooledMs = Date.now();
    const stopped = await offline.stop();
    assert.equal(stopped.status, 0, stopped.log);
    assert.match(stopped.log, /"spoolPending":[1-9]/);

    const kept = ["/etc/svc-agent/token", "/etc/svc-agent/agent.env", ...spoolFiles(root)];
    assert.ok(kept.length > 2, "the spool holds a segment");
    const before = kept.map((f) => digest(root, f));

    copyFileSync(newerPackage(work, "0.1.1"), root.path("/tmp/svc-agent_0.1.1_all.deb"));
    await root.sh("apt-get install -y /tmp/svc-agent_0.1.1_all.deb");
    assert.equal(await root.sh("dpkg-query -W svc-agent"), "svc-agent\t0.1.1\n");
    assert.deepEqual(
      kept.map((f) => digest(root, f)),
      before,
    );
    assert.equal(
      await root.sh("stat -c '%a %U:%G' /etc/svc-agent/token /var/lib/svc-agent/spool"),
      "640 root:svc-agent\n700 svc-agent:svc-agent\n",
    );
  });

  it("sends from the root to the server on loopback: the spooled collection, then a new one", async () => {
    const agent = startAsUnit(root, {});
    try {
      await agent.waitFor(/"msg":"svc-agent started"/);
      const points = await storedPoints(owner, vm, spooledMs - 300_000);
      assert.ok(points.length > 0 && points.every((v) => v > 0), "samples stored and served");
      // Both collections acknowledged (the backlog from before the upgrade and the one taken at start):
      // the spool keeps only its cursor.
      const deadline = Date.now() + 60_000;
      while (spoolFiles(root).some((f) => !f.endsWith("/cursor"))) {
        assert.ok(Date.now() < deadline, `the spool did not drain: ${spoolFiles(root)}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    } finally {
      const stopped = await agent.stop();
      assert.equal(stopped.status, 0, stopped.log);
      assert.ok(!stopped.log.includes(token), "the agent never logs its token");
      // JSON lines only: no warning from Node.js or V8 in between.
      for (const line of stopped.log.split("\n").filter(Boolean))
        assert.doesNotThrow(() => JSON.parse(line), line);
      assert.match(stopped.log, /"msg":"spool backlog found","batches":1/);
      const stats = JSON.parse(stopped.log.split("\n").find((l) => l.includes('"svc-agent stopped"'))!);
      assert.ok(stats.sentBatches >= 2, stopped.log);
      assert.equal(stats.spoolPending, 0);
    }
  });

  it("remove disables the unit and removes the program, keeping configuration and spool", async () => {
    await root.sh("apt-get remove -y svc-agent");
    for (const gone of ["/usr/bin/svc-agent", "/usr/lib/svc-agent", UNIT, WANTS])
      assert.ok(!(await exists(root, gone)), `${gone} removed`);
    for (const kept of ["/etc/svc-agent/token", "/etc/svc-agent/agent.env", "/var/lib/svc-agent/spool"])
      assert.ok(await exists(root, kept), `${kept} kept`);
  });

  it("purge removes what the package created: configuration, token, spool, user and group", async () => {
    await root.sh("apt-get purge -y svc-agent");
    for (const gone of ["/etc/svc-agent", "/var/lib/svc-agent"])
      assert.ok(!(await exists(root, gone)), `${gone} removed`);
    assert.equal((await root.run(["getent", "passwd", "svc-agent"])).status, 2);
    assert.equal((await root.run(["getent", "group", "svc-agent"])).status, 2);
    assert.notEqual((await root.run(["dpkg-query", "-W", "svc-agent"])).status, 0);
  });
});

async function exists(root: DebianRoot, path: string): Promise<boolean> {
  return (await root.run(["test", "-e", path])).status === 0;
}

function spoolFiles(root: DebianRoot): string[] {
  return readdirSync(root.path("/var/lib/svc-agent/spool")).map((f) => `/var/lib/svc-agent/spool/${f}`);
}

function digest(root: DebianRoot, path: string): string {
  return createHash("sha256")
    .update(readFileSync(root.path(path)))
    .digest("hex");
}

/** The built package again with a higher version: what an upgrade installs. */
function newerPackage(work: string, version: string): string {
  const [deb] = readdirSync(buildAgentPackage()).filter((f) => f.endsWith(".deb"));
  const tree = join(work, `pkg-${version}`);
  const sh = (args: string[]) => {
    const r = spawnSync("dpkg-deb", args, { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
  };
  sh(["-R", join(buildAgentPackage(), deb), tree]);
  const control = join(tree, "DEBIAN", "control");
  writeFileSync(control, readFileSync(control, "utf8").replace(/^Version: .*$/m, `Version: ${version}`));
  const out = join(work, `svc-agent_${version}_all.deb`);
  sh(["--root-owner-group", "--build", tree, out]);
  return out;
}

/**
 * Starts the agent the way its unit does, systemd being unavailable in a chroot: as the unit's User and
 * Group, with its EnvironmentFile and Environment lines (then `env`), running its ExecStart.
 */
function startAsUnit(root: DebianRoot, env: Record<string, string>) {
  const unit = readFileSync(root.path(UNIT), "utf8");
  const key = (k: string) => [...unit.matchAll(new RegExp(`^${k}=(.*)$`, "gm"))].map((m) => m[1]);
  const vars: string[] = [];
  for (const file of key("EnvironmentFile"))
    vars.push(...readFileSync(root.path(file), "utf8").split("\n").filter(Boolean));
  vars.push(...key("Environment"));
  vars.push(...Object.entries(env).map(([k, v]) => `${k}=${v}`));
  const child = root.spawn(
    ["env", "-i", ...vars, "SVC_AGENT_INTERVAL=2s", ...key("ExecStart")[0].split(" ")],
    {
      userspec: `${key("User")[0]}:${key("Group")[0]}`,
    },
  );
  let log = "";
  child.stdout?.on("data", (d) => {
    log += d;
  });
  child.stderr?.on("data", (d) => {
    log += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
  return {
    async waitFor(re: RegExp): Promise<void> {
      const deadline = Date.now() + 60_000;
      while (!re.test(log)) {
        if (child.exitCode !== null) assert.fail(`the agent exited:\n${log}`);
        assert.ok(Date.now() < deadline, `no ${re} in the agent's log:\n${log}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    /**
     * SIGTERM, as systemctl stop sends it; again until it arrives (right after start, the namespace's
     * first process may not have become the agent yet, and that one ignores it).
     */
    async stop(): Promise<{ status: number | null; log: string }> {
      let status: number | null | undefined;
      void exited.then((s) => {
        status = s;
      });
      while (status === undefined) {
        root.signal(child, "SIGTERM");
        await new Promise((r) => setTimeout(r, 200));
      }
      return { status, log };
    },
  };
}

/** memory_available_bytes points of the VM from `fromMs` to now, waiting up to a minute for some. */
async function storedPoints(
  owner: ReturnType<TestApp["clients"]>,
  vm: string,
  fromMs: number,
): Promise<number[]> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const r = await owner.monitoring.queryVMMonitoring({
      name: vm,
      metricIds: ["memory_available_bytes"],
      startTimeUnix: BigInt(Math.floor(fromMs / 1000)),
      endTimeUnix: BigInt(Math.floor(Date.now() / 1000) + 30),
      stepSeconds: 30,
    });
    const s = r.series.find((x) => x.metricId === "memory_available_bytes");
    if (s && s.points.length > 0) {
      assert.equal(s.source, "GUEST_AGENT");
      return s.points.map((p) => p.value);
    }
    if (Date.now() > deadline) return [];
    await new Promise((r) => setTimeout(r, 250));
  }
}
