import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";
import { metricIds } from "./metric-ids.ts";

/**
 * docs/api.md's table of QueryVMMonitoring's metric ids is this build's, and what it says of the disk
 * and network rates: they are observed virtual-device traffic, not invoice-grade.
 */
const doc = readFileSync(join(import.meta.dirname, "../../../../docs/api.md"), "utf8");
const lines = doc.split("\n");
const head = lines.findIndex((l) => l.startsWith("| metricId |"));
const end = lines.findIndex((l, i) => i > head && !l.startsWith("|"));

/** `disk_{read,write}_{bytes,ops}_per_sec` → its four ids. */
function expand(pattern: string): string[] {
  const m = /\{([^}]*)\}/.exec(pattern);
  if (!m) return [pattern];
  return m[1].split(",").flatMap((alt) => expand(pattern.replace(m[0], alt)));
}

it("docs/api.md's metric-id table names every metric id of this build, and no other", () => {
  assert.ok(head >= 0 && end > head + 2, "docs/api.md has the `| metricId |` table");
  const documented = lines
    .slice(head + 2, end)
    .flatMap((row) => [...(row.split("|")[1] ?? "").matchAll(/`([^`]+)`/g)].flatMap((m) => expand(m[1])));
  assert.deepEqual([...documented].sort(), [...metricIds.keys()].sort());
});

it("docs/api.md says the disk and network rates are observed virtual-device traffic, not invoice-grade", () => {
  // The rates are those of the hypervisor's counters of the VM's virtual disks and interfaces.
  const rates = [...metricIds.values()].filter((d) => /^(disk|network)_.*_per_sec$/.test(d.id));
  assert.equal(rates.length, 8);
  for (const d of rates) assert.match(d.series.join(" "), /^svc_vm_(disk|network)_\w+_total$/, d.id);
  // Said right under the table, where a reader of these ids looks.
  const after = lines.slice(end, end + 8).join(" ");
  assert.match(after, /Disk and network rates are \*\*observed virtual-device traffic\*\*/);
  assert.match(after, /\*\*not invoice-grade\*\*/);
  assert.match(after, /do not bill or reconcile data transfer from them/);
});
