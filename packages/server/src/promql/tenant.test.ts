import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MemStorage } from "../../testing/memstorage.ts";
import { labelsFromRecord } from "../storage/interface.ts";
import { VectorSelector } from "./ast.ts";
import { createEngine, type Expr, injectTenant, parse, print, UnsupportedNodeError } from "./index.ts";

function store(): MemStorage {
  const s = new MemStorage();
  for (const project of ["mine", "other"]) {
    for (const inst of ["a", "b"]) {
      const labels = labelsFromRecord({ __name__: "cpu_total", project_id: project, instance: inst });
      for (let t = 0; t <= 600_000; t += 15_000) s.append(labels, t, t / 1000);
      const up = labelsFromRecord({ __name__: "up", project_id: project, instance: inst });
      for (let t = 0; t <= 600_000; t += 15_000) s.append(up, t, 1);
    }
  }
  return s;
}

const cases = [
  '{project_id!="mine", __name__=~".+"}',
  '{project_id=~".*", instance=~".+"}',
  '{__name__=~".+"}',
  "cpu_total",
  'cpu_total{project_id="other"}',
  "rate(cpu_total[5m])",
  "max_over_time(rate(cpu_total[1m])[5m:30s])",
  "cpu_total @ 300",
  "cpu_total offset 2m",
  "rate(cpu_total[1m] @ start() offset 1m)",
  'label_replace(cpu_total, "project_id", "other", "", "")',
  'label_replace({__name__=~".+"}, "project_id", "mine", "project_id", ".*")',
  "sum by (project_id) (sum by (project_id, instance) (cpu_total))",
  "count(up) by (project_id)",
  "cpu_total / on (instance) group_left up",
  "cpu_total or up",
  "absent(nonexistent)",
  "topk(1, cpu_total) + ignoring(project_id) up",
  "histogram_quantile(0.5, cpu_total)",
  "clamp(cpu_total, 0, scalar(sum(up)))",
];

describe("injectTenant()", () => {
  const engine = createEngine({ timeoutMs: 0 });
  const db = store();

  /** Every selector the scoped tree reads must carry project_id="mine". */
  function selectorsScoped(e: Expr): boolean {
    switch (e.kind) {
      case "VectorSelector":
        return e.matchers.some((m) => m.name === "project_id" && m.type === "=" && m.value === "mine");
      case "MatrixSelector":
        return selectorsScoped(e.vector);
      case "Subquery":
      case "Paren":
      case "Unary":
        return selectorsScoped(e.expr);
      case "Call":
        return e.args.every(selectorsScoped);
      case "Aggregate":
        return selectorsScoped(e.expr) && (e.param === null || selectorsScoped(e.param));
      case "Binary":
        return selectorsScoped(e.lhs) && selectorsScoped(e.rhs);
      default:
        return true;
    }
  }

  for (const q of cases) {
    it(`scopes ${q}`, () => {
      const user = parse(q);
      const scoped = injectTenant(user, "mine");
      assert.ok(selectorsScoped(scoped));
      assert.equal(print(user), print(parse(q)), "user tree unchanged");
      // Evaluating the printed form must read only the tenant's series.
      const spy = {
        querier: () => {
          const inner = db.querier();
          return {
            ...inner,
            select: (...args: Parameters<typeof inner.select>) => {
              const out = inner.select(...args);
              for (const s of out) assert.equal(s.labels.find((l) => l.name === "project_id")?.value, "mine");
              return out;
            },
          };
        },
      };
      engine.instantQuery(spy, parse(print(scoped)), 600_000);
      engine.rangeQuery(spy, scoped, 0, 600_000, 60_000);
    });
  }

  it("keeps the user's matchers (narrowing to another project yields nothing)", () => {
    const r = engine.instantQuery(db, injectTenant(parse('cpu_total{project_id="other"}'), "mine"), 600_000);
    assert.equal(r.value.resultType, "vector");
    assert.equal(r.value.resultType === "vector" && r.value.result.length, 0);
  });

  it("returns both of the tenant's series", () => {
    const r = engine.instantQuery(db, injectTenant(parse("cpu_total"), "mine"), 600_000);
    assert.equal(r.value.resultType === "vector" && r.value.result.length, 2);
  });

  it("scopes selectors that only match by the tenant label", () => {
    // The parser refuses these as Prometheus does; a tree built directly still gets scoped.
    assert.throws(() => parse('{project_id!="mine"}'), /non-empty matcher/);
    for (const type of ["!=", "=~"] as const) {
      const vs = VectorSelector.create({
        name: "",
        matchers: [{ type, name: "project_id", value: type === "!=" ? "mine" : ".*" }],
        offsetMs: 0,
        at: null,
      });
      const r = engine.instantQuery(db, injectTenant(vs, "mine"), 600_000);
      assert.ok(r.value.resultType === "vector");
      if (r.value.resultType !== "vector") return;
      const want = type === "!=" ? 0 : 4;
      assert.equal(r.value.result.length, want);
      for (const s of r.value.result)
        assert.equal(s.metric.find((l) => l.name === "project_id")?.value, "mine");
    }
  });

  it("fails closed on an unknown node kind", () => {
    const bogus = Object.freeze({ kind: "Mystery" }) as unknown as Expr;
    assert.throws(() => injectTenant(bogus, "mine"), UnsupportedNodeError);
    const nested = parse("sum(foo)");
    const withBogus = { ...nested, expr: bogus } as Expr;
    assert.throws(() => injectTenant(withBogus, "mine"), UnsupportedNodeError);
  });
});
