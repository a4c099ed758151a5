import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { PromQLParseError, parse, print } from "./index.ts";
import { parseCacheCapacity } from "./parser.ts";

const roundTrip = [
  "foo",
  'foo{a="b", c!="d", e=~"f.*", g!~"h"}',
  '{__name__=~"a|b"}',
  '{"utf8.metric", "a b"="c"}',
  "rate(foo[5m])",
  "rate(foo[5m] offset 1m)",
  "rate(foo[5m] @ 100 offset -1m)",
  "foo @ start()",
  "foo @ end() offset 1h5m",
  "sum by (a, b) (rate(foo[1m]))",
  "sum without () (foo)",
  "topk(3, foo)",
  'count_values("v", foo)',
  "quantile(0.9, foo)",
  "a + on (x) group_left (y) b",
  "a / ignoring (x) group_right b",
  "a > bool 1",
  "a and on () b or c unless d",
  "-foo",
  "-1 ^ 2",
  "(-1) ^ 2",
  "2 ^ 3 ^ 2",
  "1 + 2 * 3",
  "(1 + 2) * 3",
  "max_over_time(rate(foo[1m])[5m:30s])",
  "foo[5m:] offset 1m",
  "sum(foo)[10m:1m] @ 50",
  'label_replace(foo, "dst", "$1", "src", "(.*)")',
  'label_join(foo, "d", ",", "a", "b")',
  "histogram_quantile(0.9, sum by (le) (rate(h_bucket[5m])))",
  "time()",
  "vector(1) atan2 vector(2)",
  "0x1F + 1e6 + Inf - NaN",
  '"a\\xc5z"',
  "foo # comment",
];

describe("parse() / print()", () => {
  for (const q of roundTrip) {
    it(`round-trips ${q}`, () => {
      const ast = parse(q);
      assert.deepEqual(parse(print(ast)), ast);
    });
  }

  it("freezes nodes", () => {
    const ast = parse("sum(foo)");
    assert.ok(Object.isFrozen(ast));
  });

  it("answers a repeated expression from its cache with the same frozen tree, and never caches an error", () => {
    const text = 'sum by (vm) (rate(parse_cache_probe_total{job="a"}[5m]))';
    const first = parse(text);
    assert.equal(parse(text), first);
    assert.ok(Object.isFrozen(first));
    assert.throws(() => parse("sum(parse_cache_probe"), /unexpected/);
    assert.throws(() => parse("sum(parse_cache_probe"), /unexpected/);
  });

  it("binds unary minus looser than ^", () => {
    assert.equal(parse("-1^2").kind, "Unary");
  });

  const bad: [string, RegExp][] = [
    ["foo{", /unexpected/],
    ["rate(foo)", /expected type range vector in call to function "rate", got instant vector/],
    ["1 < 2", /comparisons between scalars must use BOOL modifier/],
    ["foo + bool bar", /bool modifier can only be used on comparison operators/],
    ['{a=""}', /at least one non-empty matcher/],
    ["sum(foo[5m])", /expected type instant vector in aggregation expression/],
    ['label_join(a, "b")', /expected at least 3 argument/],
    ["nosuchfn(foo)", /unknown function|unexpected/],
    ["nosuch_over_time(foo[5m])", /unknown function|unexpected/],
    ["(foo) offset 5m", /offset modifier must be preceded/],
    ["foo offset 1m offset 2m", /offset may not be set multiple times/],
    ["1 and 2", /set operator "and" not allowed in binary scalar expression/],
    ["foo[5m:1m][1m:]", /subquery is only allowed on instant vector/],
    ["foo[5m+1m]", /duration expressions are not supported/],
    ['foo{a=~"(.*"}', /invalid regular expression/],
    ["histogram_count(foo)", /unknown function/],
    ["", /no expression found|unexpected end of input/],
  ];
  for (const [q, re] of bad) {
    it(`rejects ${JSON.stringify(q)}`, () => {
      assert.throws(
        () => parse(q),
        (e: unknown) =>
          e instanceof PromQLParseError && re.test(e.message) && typeof e.position.start === "number",
      );
    });
  }
});

describe("parse cache", () => {
  it("is bounded by the characters it holds, the least recently used expression evicted first", () => {
    const before = parseCacheCapacity();
    try {
      parseCacheCapacity({ entries: 4096, chars: 100 });
      const [a, b, c] = ["a", "b", "c"].map((x) => `sum(rate(${x}_metric_total{vm="one"}[5m]))`);
      assert.equal(a.length, 39);
      const first = parse(a);
      assert.equal(parse(a), first, "cached: the same frozen tree");
      parse(b);
      const third = parse(c); // 117 characters: a, the oldest, goes
      assert.equal(parse(c), third);
      assert.notEqual(parse(a), first);
    } finally {
      parseCacheCapacity(before);
    }
  });
});
