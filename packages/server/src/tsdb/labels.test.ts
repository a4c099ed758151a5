import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Labels } from "../storage/interface.ts";
import { labelsHash, SymbolTable, symsEqual, symsHash } from "./labels.ts";

/** Interns a label set into its own symbol table, as a block or the head stores it. */
function stored(labels: Labels, syms = new SymbolTable()) {
  const arr = new Uint32Array(labels.length * 2);
  labels.forEach((l, i) => {
    arr[2 * i] = syms.intern(l.name);
    arr[2 * i + 1] = syms.intern(l.value);
  });
  return { syms, arr, hash: symsHash(syms, arr, 0, labels.length) };
}

const vm = (n: number, name = "svc_vm_cpu_utilization_pct"): Labels => [
  { name: "__name__", value: name },
  { name: "project_id", value: "p" },
  { name: "vm", value: `projects/p/vms/vm-${n}` },
];

describe("symsHash / symsEqual", () => {
  it("hashes the strings, not the symbol ids: equal sets in different tables hash equal", () => {
    const other = new SymbolTable();
    other.intern("zzz"); // shifts every id in this table
    const a = stored(vm(1));
    const b = stored(vm(1), other);
    assert.notDeepEqual([...a.arr], [...b.arr]);
    assert.equal(a.hash, b.hash);
    assert.ok(Number.isSafeInteger(a.hash) && a.hash >= 0);
  });

  it("is what labelsHash gives for the same set as strings (a series from another thread)", () => {
    for (const labels of [vm(1), vm(2, "m"), [], [{ name: "a", value: "" }]]) {
      assert.equal(labelsHash(labels), stored(labels).hash);
    }
    assert.notEqual(labelsHash(vm(1)), labelsHash(vm(2)));
  });

  it("tells name from value and label from label (no concatenation collisions)", () => {
    const h = (labels: Labels) => stored(labels).hash;
    assert.notEqual(h([{ name: "ab", value: "c" }]), h([{ name: "a", value: "bc" }]));
    assert.notEqual(
      h([
        { name: "a", value: "b" },
        { name: "c", value: "d" },
      ]),
      h([{ name: "a", value: "bcd" }]),
    );
  });

  it("gives 20,000 VM series 20,000 different hashes", () => {
    const seen = new Set<number>();
    for (let i = 0; i < 10_000; i++) {
      seen.add(stored(vm(i)).hash);
      seen.add(stored(vm(i, "svc_vm_memory_used_bytes")).hash);
    }
    assert.equal(seen.size, 20_000);
  });

  it("compares stored pairs with a label set exactly", () => {
    const a = stored(vm(7));
    assert.ok(symsEqual(a.syms, a.arr, 0, 3, vm(7)));
    assert.ok(!symsEqual(a.syms, a.arr, 0, 3, vm(8)));
    assert.ok(!symsEqual(a.syms, a.arr, 0, 2, vm(7)));
  });
});
