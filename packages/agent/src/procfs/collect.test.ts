import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { collect } from "./collect.ts";

describe("collect(): filesystems", () => {
  const root = mkdtempSync(join(tmpdir(), "svc-agent-collect-"));
  after(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(join(root, "proc", "self"), { recursive: true });
  writeFileSync(join(root, "proc", "self", "mounts"), "/dev/vda1 / ext4 rw,relatime 0 0\n");

  it("sends df's Size, Used and Avail, so svc can compute Use% as df does", () => {
    // An ext4 root of 1,000 blocks: 300 free, of which 50 are reserved for root (df: Avail 250).
    const { series } = collect("projects/p/locations/dc-1/vms/v", 1000, {
      procRoot: join(root, "proc"),
      sysRoot: join(root, "sys"),
      statfs: () => ({ bsize: 4096, blocks: 1000, bfree: 300, bavail: 250 }),
    });
    const value = (name: string) =>
      series.find((s) => s.labels.some((l) => l.name === "__name__" && l.value === name))?.samples[0].value;
    assert.equal(value("svc_vm_filesystem_size_bytes"), 1000 * 4096);
    assert.equal(value("svc_vm_filesystem_used_bytes"), 700 * 4096);
    assert.equal(value("svc_vm_filesystem_avail_bytes"), 250 * 4096);
    const avail = series.find((s) => s.labels.some((l) => l.value === "svc_vm_filesystem_avail_bytes"))!;
    assert.deepEqual(
      avail.labels.filter((l) => ["device", "fstype", "mountpoint"].includes(l.name)).map((l) => l.value),
      ["/dev/vda1", "ext4", "/"],
    );
  });
});
