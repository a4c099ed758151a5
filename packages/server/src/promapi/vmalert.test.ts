/**
 * vmalert (Debian's `victoria-metrics` package) as a real client of svc's Prometheus API (issue 32),
 * run as docs/prometheus.md's "Run your own rule engine against svc" says (its rules and both
 * commands are read from there): given only the query base URL and a read key, it evaluates
 * recording and alerting rules, live and with `-replay.*`, and writes the results to a
 * VictoriaMetrics; every value it wrote equals what svc's own PromQL answers for the same
 * expression at the same time.
 */
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { engineSkipReason, type RunningEngine, startEngine } from "../../testing/engines.ts";
import { type PromFixture, S, startPromFixture } from "../../testing/promapi-fixture.ts";
import { freePort } from "../net/free-port.ts";

function vmalertSkipReason(): string | undefined {
  const vm = engineSkipReason("victoria-metrics");
  if (vm) return vm;
  try {
    execFileSync("vmalert", ["-version"], { stdio: "ignore" });
    return undefined;
  } catch {
    if (process.env.CI === "true")
      throw new Error("CI=true but vmalert (Debian victoria-metrics) is missing");
    return "vmalert is not installed (apt-get install victoria-metrics); skipped";
  }
}

/** docs/prometheus.md section 5: its rules file and its two vmalert commands' flags. */
function recipe(): { rules: string; live: string[]; replay: string[] } {
  const doc = readFileSync(join(import.meta.dirname, "../../../../docs/prometheus.md"), "utf8");
  const section = doc.split(/^## 5\. Run your own rule engine against svc$/m)[1] ?? "";
  const rules = /```yaml\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(rules, "docs/prometheus.md section 5 has the rules");
  const commands = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) =>
    m[1]
      .replace(/\\\n/g, " ")
      .split(/\s+/)
      .filter((a) => a.startsWith("-")),
  );
  assert.equal(commands.length, 2, "a live and a replay command");
  return { rules, live: commands[0], replay: commands[1] };
}

const RECORD = "vm_id:svc_vm_cpu_cores:rate5m";
const RECORD_EXPR = "sum by (vm_id) (rate(svc_vm_cpu_seconds_total[5m]))";
// The fixture's free memory grows by one a sample from 1024 bytes: below 1070 until 7 minutes ago
// (the replay's alert fires for part of its range), below 2048 now (the live one fires at once).
const alertExpr = (threshold: number) => `svc_vm_memory_free_bytes < ${threshold}`;

interface Exported {
  metric: Record<string, string>;
  values: number[];
  timestamps: number[];
}

/** Every sample VictoriaMetrics holds of the series `match` selects. */
async function exported(vm: RunningEngine, match: string): Promise<Exported[]> {
  await vm.flush();
  const res = await fetch(`${vm.queryUrl}/api/v1/export?match[]=${encodeURIComponent(match)}`);
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as Exported);
}

const skip = vmalertSkipReason();

describe("vmalert against svc's Prometheus API", { skip }, () => {
  let f: PromFixture;
  let vm: RunningEngine;
  let dir: string;
  let notifier: Server;
  let notifierUrl: string;
  const notified: unknown[] = [];
  let datasource: string;

  before(async () => {
    // vmalert evaluates live rules at the real time: the data ends at the real now.
    f = await startPromFixture({}, { wallClock: true });
    vm = await startEngine("victoria-metrics");
    dir = mkdtempSync(join(tmpdir(), "svc-vmalert-"));
    datasource = `${f.t.baseUrl}/v1/monitoring/projects/mine/prometheus`;
    // A stand-in Alertmanager: live vmalert needs one for alerting rules; it records what it got.
    notifier = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => {
        body += c;
      });
      req.on("end", () => {
        if (req.url === "/api/v2/alerts") notified.push(...(JSON.parse(body) as unknown[]));
        res.writeHead(200).end();
      });
    });
    const port = await freePort("127.0.0.1");
    await new Promise<void>((r) => notifier.listen(port, "127.0.0.1", r));
    notifierUrl = `http://127.0.0.1:${port}`;
  });
  after(async () => {
    await vm?.stop();
    await new Promise((r) => notifier?.close(r));
    if (dir) rmSync(dir, { recursive: true, force: true });
    await f?.close();
  });

  /** svc's own answer for `expr` over [start, end] at `stepMs`: series key → (t → value). */
  async function svcRange(expr: string, startMs: number, endMs: number, stepMs: number, by: string) {
    const r = await f.post("mine", "api/v1/query_range", {
      query: expr,
      start: String(startMs / 1000),
      end: String(endMs / 1000),
      step: `${stepMs / 1000}s`,
    });
    assert.equal(r.status, 200, r.text);
    const out = new Map<string, Map<number, number>>();
    for (const s of r.json.data.result as { metric: Record<string, string>; values: [number, string][] }[])
      out.set(s.metric[by] ?? "", new Map(s.values.map(([t, v]) => [Math.round(t * 1000), Number(v)])));
    return out;
  }

  /**
   * Runs vmalert with one of the documented commands, pointed at this svc, VictoriaMetrics and
   * notifier; `until` (live): stops it once that holds, else (replay) waits for it to exit.
   */
  async function vmalert(
    documented: string[],
    extra: string[],
    until?: () => Promise<boolean>,
  ): Promise<string> {
    const doc = recipe();
    const rulesFile = join(dir, until ? "live.yml" : "replay.yml");
    const threshold = until ? 2048 : 1070;
    const rules = doc.rules
      .replace("svc_vm_memory_free_bytes < 256 * 1024 * 1024", alertExpr(threshold))
      .replace("interval: 30s", until ? "interval: 2s" : "interval: 30s");
    assert.ok(rules.includes(RECORD_EXPR) && rules.includes(alertExpr(threshold)), rules);
    writeFileSync(rulesFile, rules);
    const tokenFile = join(dir, "svc-token");
    writeFileSync(tokenFile, f.mine.key, { mode: 0o600 });
    const port = await freePort("127.0.0.1");
    const argv = [
      ...documented.map((a) =>
        a
          .replace("-rule=rules.yml", `-rule=${rulesFile}`)
          .replace("https://svc.example.com/v1/monitoring/projects/my-project/prometheus", datasource)
          .replace('"$SVC_READ_KEY"', f.mine.key)
          .replace("/etc/vmalert/svc-token", tokenFile)
          .replace("http://victoriametrics:8428", vm.queryUrl)
          .replace("http://alertmanager:9093", notifierUrl),
      ),
      "-remoteWrite.flushInterval=500ms",
      `-httpListenAddr=127.0.0.1:${port}`,
      "-loggerLevel=WARN",
      ...extra,
    ];
    let log = "";
    const p: ChildProcess = spawn("vmalert", argv, { stdio: ["ignore", "pipe", "pipe"] });
    const keep = (d: Buffer) => {
      log = (log + d.toString()).slice(-20_000);
    };
    p.stdout?.on("data", keep);
    p.stderr?.on("data", keep);
    const exited = new Promise<number | null>((r) => p.once("exit", (code) => r(code)));
    if (!until) {
      const code = await exited;
      assert.equal(code, 0, `vmalert exited ${code}: ${log}`);
      return log;
    }
    const deadline = Date.now() + 60_000;
    try {
      while (!(await until())) {
        if (p.exitCode !== null) assert.fail(`vmalert exited ${p.exitCode}: ${log}`);
        if (Date.now() > deadline) assert.fail(`vmalert wrote nothing usable within 60 s: ${log}`);
        await new Promise((r) => setTimeout(r, 500));
      }
    } finally {
      p.kill("SIGTERM");
      await exited;
    }
    return log;
  }

  it("replays rules over svc's history (-replay.*), each written value equal to svc's PromQL", async () => {
    const end = f.endMs;
    const start = end - 20 * 60 * S;
    const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
    const replay = recipe().replay.map((a) =>
      a.startsWith("-replay.timeFrom=")
        ? `-replay.timeFrom=${iso(start)}`
        : a.startsWith("-replay.timeTo=")
          ? `-replay.timeTo=${iso(end)}`
          : a,
    );
    // The documented -datasource.queryStep=30s: without it vmalert asks for a 5-minute step.
    assert.ok(replay.includes("-datasource.queryStep=30s"));
    const log = await vmalert(replay, ["-replay.rulesDelay=0s", "-replay.disableProgressBar"]);
    assert.doesNotMatch(log, /error/i, log);

    const recorded = await exported(vm, RECORD);
    const want = await svcRange(RECORD_EXPR, start, end, 30 * S, "vm_id");
    assert.deepEqual(recorded.map((s) => s.metric.vm_id).sort(), ["vm-1", "vm-2"]);
    for (const s of recorded) {
      const mine = want.get(s.metric.vm_id);
      assert.ok(mine, s.metric.vm_id);
      assert.deepEqual(new Map(s.timestamps.map((t, i) => [t, s.values[i]])), mine, s.metric.vm_id);
      assert.equal(s.timestamps.length, 41, "every 30 s step of the 20 minutes, both ends");
    }

    // The alert fires (for: 0) at exactly the steps where svc's answer has the series.
    const alerts = await exported(vm, 'ALERTS{alertname="MemoryFreeLow"}');
    const held = await svcRange(alertExpr(1070), start, end, 30 * S, "vm_id");
    assert.deepEqual(alerts.map((s) => s.metric.vm_id).sort(), ["vm-1", "vm-2"]);
    for (const s of alerts) {
      assert.equal(s.metric.alertstate, "firing");
      assert.equal(s.metric.severity, "warning");
      assert.deepEqual(s.timestamps, [...(held.get(s.metric.vm_id)?.keys() ?? [])], s.metric.vm_id);
      assert.equal(s.timestamps.length, 26, "from 20 minutes ago until 7 minutes ago, not after");
    }
  });

  it("evaluates rules live, each written value equal to svc's instant answer at its time", async () => {
    const seen = async () => {
      const r = await exported(vm, `${RECORD}{vm_id="vm-2"}`);
      return (r[0]?.timestamps.filter((t) => t > f.endMs).length ?? 0) >= 2 && notified.length > 0;
    };
    const log = await vmalert(recipe().live, [], seen);
    assert.doesNotMatch(log, /\berror\b/i, log);

    const live = (await exported(vm, RECORD)).map((s) => ({
      ...s,
      points: s.timestamps.map((t, i) => [t, s.values[i]] as const).filter(([t]) => t > f.endMs),
    }));
    assert.ok(live.some((s) => s.points.length >= 2));
    for (const s of live) {
      for (const [t, v] of s.points) {
        const r = await f.post("mine", "api/v1/query", {
          query: `${RECORD_EXPR}`,
          time: String(t / 1000),
        });
        const mine = r.json.data.result.find(
          (x: { metric: Record<string, string> }) => x.metric.vm_id === s.metric.vm_id,
        );
        assert.equal(Number(mine?.value[1]), v, `${s.metric.vm_id} at ${t}`);
      }
    }
    // What vmalert sent its Alertmanager: both VMs, labelled as svc's series are, no tenant label.
    const labels = notified.map((a) => (a as { labels: Record<string, string> }).labels);
    assert.deepEqual([...new Set(labels.map((l) => l.vm_id))].sort(), ["vm-1", "vm-2"]);
    for (const l of labels) {
      assert.equal(l.alertname, "MemoryFreeLow");
      assert.equal(l.project_id, undefined);
    }
  });
});
