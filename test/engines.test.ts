import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";
import semver from "semver";

const root = join(import.meta.dirname, "..");

// The machine and CI run Node 20.19; npm only warns (EBADENGINE) when a package needs a newer Node, and
// such a package may work today and break on its next patch. So every locked package must declare
// support for the oldest Node we promise in package.json.
it("every package in the lock supports the Node version package.json promises", () => {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
    engines: { node: string };
  };
  const floor = semver.minVersion(pkg.engines.node);
  assert.ok(floor, `package.json engines.node ${pkg.engines.node} has no minimum version`);
  const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as {
    packages: Record<string, { version?: string; engines?: { node?: string } | string[] }>;
  };
  const tooNew = Object.entries(lock.packages)
    .map(([path, p]) => ({
      path,
      version: p.version,
      wanted: Array.isArray(p.engines) ? undefined : p.engines?.node,
    }))
    .filter(({ wanted }) => wanted !== undefined && !semver.satisfies(floor, wanted))
    .map(({ path, version, wanted }) => `${path}@${version} needs node ${wanted}`);
  assert.deepEqual(tooNew, [], `packages that need a newer Node than ${floor}`);
});
