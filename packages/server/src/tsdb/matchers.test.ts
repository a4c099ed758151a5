import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { LabelMatcher } from "../storage/interface.ts";
import { InvalidMatcherError } from "./errors.ts";
import { Head } from "./head.ts";
import { compileMatchers, postingsForMatchers } from "./matchers.ts";
import { resolveTsdbOptions } from "./options.ts";
import { L } from "./testutil.ts";

const head = new Head(resolveTsdbOptions());
const series = [
  L({ __name__: "up", job: "a", env: "prod" }), // 0
  L({ __name__: "up", job: "b" }), // 1
  L({ __name__: "up", job: "ab", env: "dev" }), // 2
  L({ __name__: "cpu", job: "a", path: "x\ny" }), // 3
];
for (const s of series) head.getOrCreate(s);

function sel(...ms: [LabelMatcher["type"], string, string][]): number[] {
  const cms = compileMatchers(ms.map(([type, name, value]) => ({ type, name, value })));
  return Array.from(postingsForMatchers(head.reg, cms));
}

describe("postingsForMatchers()", () => {
  const cases: { name: string; ms: [LabelMatcher["type"], string, string][]; want: number[] }[] = [
    { name: "equality", ms: [["=", "job", "a"]], want: [0, 3] },
    {
      name: "two matchers intersect",
      ms: [
        ["=", "__name__", "up"],
        ["=", "job", "a"],
      ],
      want: [0],
    },
    { name: "inequality keeps series without the label", ms: [["!=", "env", "prod"]], want: [1, 2, 3] },
    { name: "empty equality selects series without the label", ms: [["=", "env", ""]], want: [1, 3] },
    { name: "not-empty selects series with the label", ms: [["!=", "env", ""]], want: [0, 2] },
    { name: "regex is fully anchored", ms: [["=~", "job", "a"]], want: [0, 3] },
    { name: "regex alternation fast path", ms: [["=~", "job", "a|b"]], want: [0, 1, 3] },
    { name: "regex with prefix", ms: [["=~", "job", "a.*"]], want: [0, 2, 3] },
    { name: "regex matching empty includes absent label", ms: [["=~", "env", "|dev"]], want: [1, 2, 3] },
    { name: "regex .* matches everything", ms: [["=~", "nope", ".*"]], want: [0, 1, 2, 3] },
    { name: "regex .+ requires the label", ms: [["=~", "env", ".+"]], want: [0, 2] },
    { name: "negative regex", ms: [["!~", "job", "a.*"]], want: [1] },
    { name: "negative regex matching empty requires the label", ms: [["!~", "env", ""]], want: [0, 2] },
    { name: "dot matches newline", ms: [["=~", "path", "x.y"]], want: [3] },
    { name: "unknown label value", ms: [["=", "job", "zzz"]], want: [] },
    { name: "no matchers selects all", ms: [], want: [0, 1, 2, 3] },
  ];
  for (const c of cases) {
    it(c.name, () => assert.deepEqual(sel(...c.ms), c.want));
  }

  it("an alternation of literals gives the same ids whether it is merged or tested per candidate", () => {
    const h = new Head(resolveTsdbOptions());
    const names = ["up", "cpu", "mem", "disk"];
    const all: { name: string; job: string; ref: number }[] = [];
    for (let j = 0; j < 10; j++)
      for (const name of names)
        all.push({ name, job: String(j), ref: h.getOrCreate(L({ __name__: name, job: String(j) })) });
    const run = (ms: [LabelMatcher["type"], string, string][]) =>
      Array.from(
        postingsForMatchers(h.reg, compileMatchers(ms.map(([type, name, value]) => ({ type, name, value })))),
      );
    const want = (pred: (s: (typeof all)[number]) => boolean) =>
      all
        .filter(pred)
        .map((s) => s.ref)
        .sort((a, b) => a - b);
    const upOrMem = (s: { name: string }) => s.name === "up" || s.name === "mem";
    // A narrow equality: candidates tested against the alternation's lists.
    assert.deepEqual(
      run([
        ["=~", "__name__", "up|mem|nope"],
        ["=", "job", "3"],
      ]),
      want((s) => upOrMem(s) && s.job === "3"),
    );
    // Only alternations: merged, then intersected.
    assert.deepEqual(
      run([
        ["=~", "__name__", "up|mem"],
        ["=~", "job", "3|4"],
      ]),
      want((s) => upOrMem(s) && (s.job === "3" || s.job === "4")),
    );
    // With a negative matcher.
    assert.deepEqual(
      run([
        ["=~", "__name__", "up|mem"],
        ["!=", "job", "3"],
      ]),
      want((s) => upOrMem(s) && s.job !== "3"),
    );
    assert.deepEqual(
      run([
        ["=~", "__name__", "up|mem"],
        ["=", "job", "3"],
        ["!=", "__name__", "up"],
      ]),
      want((s) => s.name === "mem" && s.job === "3"),
    );
  });

  it("refuses an invalid RE2 regex with a typed error", () => {
    assert.throws(() => compileMatchers([{ type: "=~", name: "a", value: "(?<=x)y" }]), InvalidMatcherError);
  });

  it("evaluates a catastrophic-backtracking pattern in linear time", () => {
    const h = new Head(resolveTsdbOptions());
    h.getOrCreate(L({ __name__: "m", v: `${"a".repeat(50_000)}!` }));
    const cms = compileMatchers([{ type: "=~", name: "v", value: "(a+)+$" }]);
    assert.deepEqual(Array.from(postingsForMatchers(h.reg, cms)), []);
  });
});
