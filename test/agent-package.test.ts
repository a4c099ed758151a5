import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { buildAgentPackage } from "../packages/server/testing/agent-package.ts";
import { testDialects } from "../packages/server/testing/dialects.ts";
import { startTestApp, type TestApp } from "../packages/server/testing/harness.ts";

const [sqlite] = await testDialects();

/** The .deb as a customer gets it: fetched from svc, checked, unpacked, and the agent run from it. */
describe("the guest agent's Debian package", () => {
  let t: TestApp;
  let work: string;
  let agent: ChildProcess | undefined;
  before(async () => {
    t = await startTestApp(sqlite.dialect, { agentPackageDir: buildAgentPackage() }, { wallClock: true });
    work = mkdtempSync(join(tmpdir(), "svc-agent-deb-"));
  });
  after(async () => {
    agent?.kill("SIGKILL");
    await t?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it("is served by svc with the checksum the install command carries", async () => {
    const p = await t.seedProject("deb", ["vm-1"]);
    const res = await t.clients(p.owner.session).monitoring.enableExpandedMonitoring({ name: p.vms[0] });
    const url = /curl -fsSLo \S+ (\S+)/.exec(res.installCommand)?.[1];
    const sum = /echo '([0-9a-f]{64}) {2}/.exec(res.installCommand)?.[1];
    assert.ok(url && sum, res.installCommand);
    const r = await fetch(url);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("content-type"), "application/vnd.debian.binary-package");
    const bytes = Buffer.from(await r.arrayBuffer());
    assert.equal(createHash("sha256").update(bytes).digest("hex"), sum);
    const sums = await (await fetch(`${t.baseUrl}/v1/agent/packages/SHA256SUMS`)).text();
    assert.ok(sums.startsWith(`${sum}  svc-agent_`));
    assert.equal((await fetch(`${t.baseUrl}/v1/agent/packages/other.deb`)).status, 404);
    writeFileSync(join(work, "svc-agent.deb"), bytes);
  });

  it("installs through its command: download, checksum, install, configuration, token from stdin", async () => {
    const p = await t.seedProject("debcmd", ["vm-1"]);
    const res = await t.clients(p.owner.session).monitoring.enableExpandedMonitoring({ name: p.vms[0] });
    // sudo is a shim that records what would run as root and what it was given on stdin.
    const bin = join(work, "shims");
    const record = join(work, "sudo.log");
    mkdirSync(bin, { recursive: true });
    writeFileSync(
      join(bin, "sudo"),
      `#!/bin/sh\necho "sudo $*" >> ${record}\ncase "$1" in tee|install) echo "  stdin: $(cat)" >> ${record} ;; esac\n`,
      { mode: 0o755 },
    );
    // Asynchronously: the command downloads from the server running in this process.
    const run = await runShell(res.installCommand, `${res.agentToken}\n`, {
      ...process.env,
      PATH: `${bin}:${process.env.PATH}`,
    });
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stdout, /: OK$/m, "sha256sum checked the download");
    const steps = readFileSync(record, "utf8");
    assert.match(steps, /^sudo apt-get install -y \/tmp\/svc-agent_\S+_all\.deb$/m);
    assert.match(
      steps,
      /^sudo tee \/etc\/svc-agent\/agent.env\n {2}stdin: SVC_AGENT_SERVER=http:\/\/127\.0\.0\.1:\d+\nSVC_AGENT_VM=projects\/debcmd\/locations\/dc-1\/vms\/vm-1$/m,
    );
    assert.match(
      steps,
      /^sudo install -m 0640 -o root -g svc-agent \/dev\/stdin \/etc\/svc-agent\/token\n {2}stdin: svca_\S+$/m,
    );
    assert.match(steps, /^sudo systemctl enable --now svc-agent$/m);
    assert.ok(
      !run.stdout.includes(res.agentToken) && !run.stderr.includes(res.agentToken),
      "the token is not echoed",
    );
  });

  it("holds the bundled agent, a wrapper, a hardened unit and maintainer scripts that parse", () => {
    const deb = join(work, "svc-agent.deb");
    const fields = spawnSync("dpkg-deb", ["-f", deb, "Package", "Architecture", "Depends"], {
      encoding: "utf8",
    });
    assert.match(
      fields.stdout,
      /Package: svc-agent\nArchitecture: all\nDepends: nodejs \(>= 18\.19\), adduser/,
    );
    const root = join(work, "root");
    assert.equal(spawnSync("dpkg-deb", ["-x", deb, root]).status, 0);
    assert.equal(statSync(join(root, "usr/bin/svc-agent")).mode & 0o777, 0o755);
    const unit = readFileSync(join(root, "lib/systemd/system/svc-agent.service"), "utf8");
    assert.match(unit, /^User=svc-agent$/m);
    assert.match(unit, /^EnvironmentFile=\/etc\/svc-agent\/agent.env$/m);
    assert.match(unit, /^Environment=SVC_AGENT_TOKEN_FILE=\/etc\/svc-agent\/token$/m);
    assert.match(unit, /^NoNewPrivileges=true$/m);
    const control = join(work, "control");
    assert.equal(spawnSync("dpkg-deb", ["-e", deb, control]).status, 0);
    for (const script of ["postinst", "prerm", "postrm"]) {
      assert.equal(spawnSync("sh", ["-n", join(control, script)]).status, 0, `${script} parses`);
    }
    const postinst = readFileSync(join(control, "postinst"), "utf8");
    assert.match(postinst, /adduser --system --group/);
    assert.match(postinst, /install -d -m 0750 -o root -g svc-agent \/etc\/svc-agent/);
    assert.match(postinst, /install -d -m 0700 -o svc-agent -g svc-agent \/var\/lib\/svc-agent/);
  });

  it("runs from the unpacked package and its samples reach the VM's monitoring", async () => {
    const p = await t.seedProject("debrun", ["vm-1"]);
    const owner = t.clients(p.owner.session);
    const { agentToken } = await owner.monitoring.enableExpandedMonitoring({ name: p.vms[0] });
    const tokenFile = join(work, "token");
    writeFileSync(tokenFile, agentToken, { mode: 0o600 });
    agent = spawn(process.execPath, [join(work, "root/usr/lib/svc-agent/svc-agent.mjs")], {
      env: {
        PATH: process.env.PATH,
        SVC_AGENT_SERVER: t.baseUrl,
        SVC_AGENT_VM: p.vms[0],
        SVC_AGENT_TOKEN_FILE: tokenFile,
        SVC_AGENT_SPOOL_DIR: join(work, "spool"),
        SVC_AGENT_INTERVAL: "1s",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let log = "";
    agent.stdout?.on("data", (d) => {
      log += d;
    });
    agent.stderr?.on("data", (d) => {
      log += d;
    });
    const deadline = Date.now() + 60_000;
    for (;;) {
      const end = Math.floor(Date.now() / 1000);
      const r = await owner.monitoring.queryVMMonitoring({
        name: p.vms[0],
        metricIds: ["memory_available_bytes"],
        startTimeUnix: BigInt(end - 600),
        endTimeUnix: BigInt(end),
        stepSeconds: 30,
      });
      const s = r.series.find((x) => x.metricId === "memory_available_bytes");
      if (s && s.points.length > 0) {
        assert.equal(s.source, "GUEST_AGENT");
        assert.ok(s.points.every((pt) => pt.value > 0));
        break;
      }
      assert.ok(Date.now() < deadline, `no agent sample arrived; agent output:\n${log}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    assert.ok(!log.includes(agentToken), "the agent never logs its token");
  });
});

function runShell(
  command: string,
  input: string,
  env: NodeJS.ProcessEnv,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-c", command], { env, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    child.on("error", reject);
    child.on("close", (status) => resolve({ status, stdout, stderr }));
    child.stdin.end(input);
  });
}
