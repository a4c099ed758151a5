/**
 * `api/v1/rules` and `api/v1/alerts` (issue 32 item 3): svc's alert rules and their pending and
 * firing instances in Prometheus' format, with the filters Prometheus 3.5 takes, replayed with the
 * request shapes Grafana's alerting views send to a Prometheus data source.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.ts";
import { type PromFixture, startPromFixture } from "../../testing/promapi-fixture.ts";

// biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
type Json = any;

for (const { dialect, skip } of await testDialects())
  describe(`Prometheus API rules and alerts (${dialect.name})`, { skip }, () => {
    let f: PromFixture;
    const vm = (id: string) => `projects/mine/locations/dc-1/vms/${id}`;

    before(async () => {
      f = await startPromFixture({}, { dialect });
      const owner = f.t.clients(f.mine.owner.session);
      // Saved a second apart, so their creation order (the group's rule order) is this one.
      let k = 0;
      const save = (spec: Record<string, unknown>, projectName = f.mine.projectName) => {
        f.t.clock.ms = f.endMs - 60_000 + 1000 * k++;
        return (
          projectName === f.mine.projectName ? owner : f.t.clients(f.other.owner.session)
        ).alerts.saveAlertRule({
          projectName,
          id: randomUUID(),
          requestId: randomUUID(),
          expectedVersion: "0",
          spec: {
            operator: "GREATER_THAN",
            sustainedSeconds: 0,
            severity: "WARNING",
            allVms: true,
            enabled: true,
            repeatIntervalSeconds: 3600,
            destinationNames: [],
            ...spec,
          },
        });
      };
      // In the fixture vm-1 uses 25 % CPU and vm-2 50 %, for the last 30 minutes.
      await save({ displayName: "CPU busy", metricId: "cpu_utilization_pct", threshold: 40 });
      await save({
        displayName: "CPU busy for long",
        metricId: "cpu_utilization_pct",
        threshold: 40,
        sustainedSeconds: 7200,
        severity: "CRITICAL",
      });
      await save({
        displayName: "Disk reads <vm-1>",
        metricId: "disk_read_bytes_per_sec",
        threshold: 1e9,
        allVms: false,
        vmNames: [vm("vm-1")],
      });
      await save({ displayName: "Unexpected stop", metricId: "vm_unexpected_stop", threshold: 0 });
      await save({ displayName: "Paused", metricId: "cpu_utilization_pct", threshold: 1, enabled: false });
      await save(
        { displayName: "Other's", metricId: "cpu_utilization_pct", threshold: 1 },
        f.other.projectName,
      );
      f.t.clock.ms = f.endMs;
      await f.t.app.evaluator.runCycle(f.endMs);
    });
    after(() => f?.close());

    const rules = async (params: Record<string, string | string[]> = {}, project = "mine") => {
      const r = await f.get(project, "api/v1/rules", params);
      assert.equal(r.status, 200, r.text);
      return r.json.data.groups as Json[];
    };

    it("lists the project's applied, enabled rules as one group of alerting rules", async () => {
      const [g, ...more] = await rules();
      assert.equal(more.length, 0);
      assert.equal(g.name, "svc");
      assert.equal(g.file, "projects/mine/alertRules");
      assert.equal(g.interval, 30);
      assert.equal(g.limit, 0);
      assert.equal(g.lastEvaluation, new Date(f.endMs).toISOString());
      assert.deepEqual(
        g.rules.map((r: Json) => [r.name, r.state, r.type, r.health, r.duration]),
        [
          ["CPU busy", "firing", "alerting", "ok", 0],
          ["CPU busy for long", "pending", "alerting", "ok", 7200],
          ["Disk reads <vm-1>", "inactive", "alerting", "ok", 0],
          ["Unexpected stop", "inactive", "alerting", "ok", 0],
        ],
      );
      const [busy] = g.rules;
      assert.deepEqual(Object.keys(busy), [
        "state",
        "name",
        "query",
        "duration",
        "keepFiringFor",
        "labels",
        "annotations",
        "alerts",
        "health",
        "evaluationTime",
        "lastEvaluation",
        "type",
      ]);
      assert.deepEqual(busy.labels, { severity: "warning" });
      assert.equal(busy.annotations.summary, "CPU busy");
      assert.deepEqual(busy.alerts, [
        {
          labels: { alertname: "CPU busy", severity: "warning", vm: vm("vm-2"), vm_id: "vm-2" },
          annotations: busy.annotations,
          state: "firing",
          activeAt: busy.alerts[0].activeAt,
          value: "5e+01",
        },
      ]);
      assert.ok(Date.parse(busy.alerts[0].activeAt) <= f.endMs);
      assert.equal(g.rules[3].query, "", "unexpected stops are read from the inventory, not a metric");
      assert.doesNotMatch(JSON.stringify(g), /project_id/);
    });

    it("gives each metric rule a PromQL expression whose answer is the rule's breaching VMs", async () => {
      const [g] = await rules();
      const want: Record<string, string[]> = {
        "CPU busy": ["vm-2"],
        "CPU busy for long": ["vm-2"],
        "Disk reads <vm-1>": [],
      };
      for (const r of g.rules.filter((x: Json) => x.query !== "")) {
        const q = await f.get("mine", "api/v1/query", { query: r.query, time: String(f.endMs / 1000) });
        assert.equal(q.status, 200, `${r.query}: ${q.text}`);
        assert.deepEqual(
          q.json.data.result.map((s: Json) => s.metric.vm_id),
          want[r.name],
          r.query,
        );
      }
      assert.match(g.rules[2].query, /vm=~"projects\/mine\/locations\/dc-1\/vms\/vm-1"/);
      // Go's encoder escapes <, > and & in strings, as Prometheus' answers do.
      const raw = await f.get("mine", "api/v1/rules");
      assert.match(raw.text, /Disk reads \\u003cvm-1\\u003e/);
    });

    it("lists pending and firing instances at api/v1/alerts", async () => {
      const r = await f.get("mine", "api/v1/alerts");
      assert.equal(r.status, 200);
      assert.deepEqual(
        r.json.data.alerts.map((a: Json) => [a.labels.alertname, a.labels.vm_id, a.state, a.value]),
        [
          ["CPU busy", "vm-2", "firing", "5e+01"],
          ["CPU busy for long", "vm-2", "pending", "5e+01"],
        ],
      );
      const other = await f.get("other", "api/v1/alerts");
      assert.deepEqual(
        other.json.data.alerts.map((a: Json) => [a.labels.alertname, a.labels.vm_id]),
        [
          ["Other's", "vm-1"],
          ["Other's", "vm-9"],
        ],
      );
    });

    it("filters as Prometheus 3.5: type, rule_name[], rule_group[], file[], match[], exclude_alerts", async () => {
      const names = async (p: Record<string, string | string[]>) =>
        (await rules(p)).flatMap((g: Json) => g.rules.map((r: Json) => r.name));
      assert.deepEqual(await names({ type: "record" }), []);
      assert.equal((await names({ type: "alert" })).length, 4);
      assert.deepEqual(await names({ "rule_name[]": ["CPU busy", "Nope"] }), ["CPU busy"]);
      assert.deepEqual(await names({ "rule_group[]": "other" }), []);
      assert.equal((await names({ "rule_group[]": "svc", "file[]": "projects/mine/alertRules" })).length, 4);
      assert.deepEqual(await names({ "file[]": "rules.yml" }), []);
      assert.deepEqual(await names({ "match[]": '{severity="critical"}' }), ["CPU busy for long"]);
      assert.deepEqual(await names({ "match[]": ['{severity="critical"}', '{severity=~"warn.*"}'] }), [
        "CPU busy",
        "CPU busy for long",
        "Disk reads <vm-1>",
        "Unexpected stop",
      ]);
      const [g] = await rules({ exclude_alerts: "true" });
      assert.ok(g.rules.every((r: Json) => !("alerts" in r)));
      assert.equal(g.rules[0].state, "firing", "the state is still given");
    });

    it("refuses bad filter values with Prometheus' 400 bad_data", async () => {
      const cases: [Record<string, string>, RegExp][] = [
        [{ type: "recording" }, /invalid parameter "type": not supported value "recording"/],
        [{ exclude_alerts: "maybe" }, /invalid parameter "exclude_alerts"/],
        [{ group_limit: "0" }, /group_limit needs to be greater than 0/],
        [{ group_limit: "ten" }, /group_limit needs to be a valid number/],
        [{ group_next_token: "abc" }, /group_limit needs to be present/],
        [{ group_limit: "1", group_next_token: "abc" }, /invalid group_next_token/],
        [{ "match[]": "rate(x[5m])" }, /invalid parameter "match\[\]"/],
      ];
      for (const [params, msg] of cases) {
        const r = await f.get("mine", "api/v1/rules", params);
        assert.equal(r.status, 400, JSON.stringify(params));
        assert.equal(r.json.errorType, "bad_data");
        assert.match(r.json.error, msg);
      }
    });

    it("answers the requests Grafana's alerting views send", async () => {
      const grafana = {
        authorization: `Bearer ${f.mine.key}`,
        "user-agent": "Grafana/12.1.0",
        "x-grafana-org-id": "1",
        accept: "application/json, text/plain, */*",
      };
      const base = `${f.t.baseUrl}/v1/monitoring/projects/mine/prometheus`;
      const get = async (q: string) => {
        const r = await fetch(`${base}/${q}`, { headers: grafana });
        assert.equal(r.status, 200, q);
        return (await r.json()) as Json;
      };
      // Alert list (data source-managed rules): all groups, then one group's detail.
      const list = await get("api/v1/rules");
      assert.equal(list.data.groups[0].rules.length, 4);
      const detail = await get("api/v1/rules?file%5B%5D=projects%2Fmine%2FalertRules&rule_group%5B%5D=svc");
      assert.equal(detail.data.groups.length, 1);
      // List view v2: paginated groups without instances, then one rule's instances by name.
      const page = await get("api/v1/rules?exclude_alerts=true&group_limit=40");
      assert.equal(page.data.groups.length, 1);
      assert.equal(page.data.groupNextToken, undefined, "one group: nothing to page to");
      const one = await get(
        "api/v1/rules?file%5B%5D=projects%2Fmine%2FalertRules&rule_group%5B%5D=svc&rule_name%5B%5D=CPU+busy&type=alert",
      );
      assert.deepEqual(
        one.data.groups[0].rules.map((r: Json) => [r.name, r.alerts.length]),
        [["CPU busy", 1]],
      );
      const alerts = await get("api/v1/alerts");
      assert.equal(alerts.data.alerts.length, 2);
    });
  });
