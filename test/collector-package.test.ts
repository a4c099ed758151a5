/**
 * The hypervisor collector's Debian package (scripts/build-collector.mjs): what it holds and that the
 * bundled collector starts from it. Its behaviour against a real libvirt is
 * packages/collector/src/collector.libvirt.test.ts.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
// @ts-expect-error: a build script without type declarations
import { buildCollector } from "../scripts/build-collector.mjs";

const dist = join(import.meta.dirname, "..", "packages", "collector", "dist");
const skip = spawnSync("dpkg-deb", ["--version"]).status === 0 ? undefined : "dpkg-deb is missing";

describe("the hypervisor collector's Debian package", { skip }, () => {
  let work: string;
  let deb: string;
  before(async () => {
    await buildCollector();
    const [sha, name] = readFileSync(join(dist, "SHA256SUMS"), "utf8").trim().split(/\s+/);
    deb = join(dist, name);
    assert.equal(spawnSync("sha256sum", [deb], { encoding: "utf8" }).stdout.split(" ")[0], sha);
    work = mkdtempSync(join(tmpdir(), "svc-collector-deb-"));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it("holds the bundle, a wrapper, a hardened unit in the libvirt group and maintainer scripts that parse", () => {
    const fields = spawnSync("dpkg-deb", ["-f", deb, "Package", "Architecture", "Depends"], {
      encoding: "utf8",
    });
    assert.match(
      fields.stdout,
      /Package: svc-collector\nArchitecture: all\nDepends: nodejs \(>= 18\.19\), adduser/,
    );
    const root = join(work, "root");
    assert.equal(spawnSync("dpkg-deb", ["-x", deb, root]).status, 0);
    assert.equal(statSync(join(root, "usr/bin/svc-collector")).mode & 0o777, 0o755);
    const unit = readFileSync(join(root, "lib/systemd/system/svc-collector.service"), "utf8");
    for (const line of [
      "User=svc-collector",
      "SupplementaryGroups=libvirt",
      "EnvironmentFile=/etc/svc-collector/collector.env",
      "Environment=SVC_COLLECTOR_TOKEN_FILE=/etc/svc-collector/token",
      "NoNewPrivileges=true",
      "ProtectSystem=strict",
      "CapabilityBoundingSet=",
      "ReadWritePaths=/var/lib/svc-collector",
    ]) {
      assert.ok(unit.split("\n").includes(line), `unit has ${line}`);
    }
    const control = join(work, "control");
    assert.equal(spawnSync("dpkg-deb", ["-e", deb, control]).status, 0);
    for (const script of ["postinst", "prerm", "postrm"]) {
      assert.equal(spawnSync("sh", ["-n", join(control, script)]).status, 0, `${script} parses`);
    }
    const postinst = readFileSync(join(control, "postinst"), "utf8");
    assert.match(postinst, /adduser svc-collector libvirt/);
    assert.match(postinst, /install -d -m 0750 -o root -g svc-collector \/etc\/svc-collector/);
  });

  it("starts from the package: --help lists the settings; a missing server is refused by name", () => {
    const bundle = join(work, "root", "usr/lib/svc-collector/svc-collector.mjs");
    const help = spawnSync(process.execPath, [bundle, "--help"], { encoding: "utf8" });
    assert.equal(help.status, 0);
    assert.match(help.stdout, /SVC_COLLECTOR_SERVER/);
    const env = { PATH: process.env.PATH ?? "", SVC_COLLECTOR_TOKEN_FILE: join(work, "no-token") };
    const bad = spawnSync(process.execPath, [bundle], { encoding: "utf8", env });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /^svc-collector: SVC_COLLECTOR_SERVER: required/);
    const interval = spawnSync(process.execPath, [bundle], {
      encoding: "utf8",
      env: {
        ...env,
        SVC_COLLECTOR_SERVER: "https://svc.example.com",
        SVC_COLLECTOR_INTERVAL_SECONDS: "soon",
      },
    });
    assert.equal(interval.status, 2);
    assert.match(interval.stderr, /SVC_COLLECTOR_INTERVAL_SECONDS: must be a number/);
  });
});
