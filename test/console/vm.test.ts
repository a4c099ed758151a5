import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Browser, Page, Request } from "playwright-core";
import {
  otelCollectorYaml,
  prometheusAgentYaml,
  tokenFileCommand,
  vmagentFlags,
  vmagentScrapeYaml,
} from "../../packages/console/src/guest-sender-configs.ts";
import { scrapeConfigYaml } from "../../packages/console/src/scrape-config.ts";
import { buildAgentPackage } from "../../packages/server/testing/agent-package.ts";
import {
  browserUnavailable,
  buildConsole,
  CONSOLE_DIST,
  launchBrowser,
  openPage,
  signIn,
} from "../../packages/server/testing/browser.ts";
import { testDialects } from "../../packages/server/testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../packages/server/testing/harness.ts";
import { pushAll, rwSeries } from "../../packages/server/testing/remote-write.ts";

const [sqlite] = await testDialects();
const skip = browserUnavailable();
const S = 1000;
const RPC = "/svc.monitoring.v1.MonitoringService/";
/** Set to a directory to keep screenshots of the page (1 h and 7 d) for a look. */
const SHOTS = process.env.SVC_CONSOLE_SCREENSHOTS;

interface Seen {
  method: string;
  url: string;
  body: string | null;
}

/** The RPC method of a request, or undefined for anything else (document, assets, session). */
function rpcMethod(url: string): string | undefined {
  const path = new URL(url).pathname;
  const m = /^\/svc\.[a-z.0-9]+\.[A-Za-z]+Service\/([A-Za-z]+)$/.exec(path);
  return m?.[1];
}

describe("console in Chromium: a VM's monitoring page and Connect your tools", { skip }, () => {
  let t: TestApp;
  let browser: Browser;
  let p: SeededProject;
  let page: Page;
  let problems: string[];
  const seen: Seen[] = [];
  let vmA: string; // dc-1, debian-12, BASELINE: eligible for expanded monitoring
  let vmFar: string; // dc-2, BASELINE: not eligible; telemetry stopped 10 minutes ago
  let nowS: number;
  let gapFrom: number; // first sampling instant with no sample (Unix s)
  let gapTo: number; // last sampling instant with no sample

  before(async () => {
    buildConsole();
    // The server offers expanded monitoring only when it publishes the guest agent's package.
    t = await startTestApp(
      sqlite.dialect,
      { consoleDir: CONSOLE_DIST, agentPackageDir: buildAgentPackage() },
      { wallClock: true },
    );
    browser = await launchBrowser();
    p = await t.seedProject("vmpage", ["web-a"]);
    vmA = p.vms[0];
    const far = await t.admin.vms.createVM({
      parent: p.projectName,
      vmId: "far-1",
      displayName: "far-1",
      location: "dc-2",
      distribution: "debian-12",
      vcpus: 1,
      memoryBytes: 2n << 30n,
    });
    vmFar = far.name;

    // 90 minutes of 30 s telemetry through the real remote-write endpoint, with no sample at all for
    // the 10 minutes from 40 to 30 minutes ago (a collector outage).
    nowS = Math.floor(Date.now() / S / 30) * 30;
    const t0 = nowS - 90 * 60;
    gapFrom = nowS - 40 * 60 + 30;
    gapTo = nowS - 30 * 60;
    const cpu: [number, number][] = [];
    const memT: [number, number][] = [];
    const memF: [number, number][] = [];
    const memC: [number, number][] = [];
    const rd: [number, number][] = [];
    const wr: [number, number][] = [];
    const rx: [number, number][] = [];
    const tx: [number, number][] = [];
    let c = 5000;
    for (let ts = t0, i = 0; ts <= nowS; ts += 30, i++) {
      // 20..50 % of 2 vCPUs, never 0: a 0 on the chart would be invented.
      c += ((20 + (i % 7) * 5) / 100) * 30 * 2;
      if (ts >= gapFrom && ts <= gapTo) continue;
      const ms = ts * S;
      cpu.push([ms, c]);
      memT.push([ms, 4 * 2 ** 30]);
      memF.push([ms, 1.5 * 2 ** 30 + (i % 5) * 2 ** 24]);
      memC.push([ms, 0.5 * 2 ** 30]);
      rd.push([ms, 1e6 * i]);
      wr.push([ms, 2e6 * i]);
      rx.push([ms, 3e5 * i]);
      tx.push([ms, 1e5 * i]);
    }
    const token = t.app.config.collectorToken;
    await pushAll(t.baseUrl, token, [
      rwSeries("svc_vm_cpu_seconds_total", { vm: vmA }, cpu),
      rwSeries("svc_vm_memory_total_bytes", { vm: vmA }, memT),
      rwSeries("svc_vm_memory_free_bytes", { vm: vmA }, memF),
      rwSeries("svc_vm_memory_cached_bytes", { vm: vmA }, memC),
      rwSeries("svc_vm_disk_read_bytes_total", { vm: vmA, device: "vda" }, rd),
      rwSeries("svc_vm_disk_written_bytes_total", { vm: vmA, device: "vda" }, wr),
      rwSeries("svc_vm_network_receive_bytes_total", { vm: vmA, interface: "eth0" }, rx),
      rwSeries("svc_vm_network_transmit_bytes_total", { vm: vmA, interface: "eth0" }, tx),
      // far-1's telemetry ends 10 minutes ago, while the VM stays RUNNING in the inventory.
      rwSeries(
        "svc_vm_cpu_seconds_total",
        { vm: vmFar },
        cpu.filter(([ms]) => ms <= (nowS - 600) * S),
      ),
    ]);

    ({ page, problems } = await openPage(browser));
    page.on("request", (r: Request) => seen.push({ method: r.method(), url: r.url(), body: r.postData() }));
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  const vmUrl = (name: string) => {
    const [, project, , location, , vm] = name.split("/");
    return `${t.baseUrl}/projects/${project}/vms/${location}/${vm}`;
  };
  const rpcs = () => seen.map((s) => rpcMethod(s.url)).filter((m): m is string => m !== undefined);
  const cpuChart = () => page.getByTestId("card-cpu").locator(".vm-chart");

  it("opens with reads only, and draws the CPU chart with the 10-minute gap as a gap, never 0", async () => {
    seen.length = 0;
    await page.goto(vmUrl(vmA));
    await page.getByTestId("chart-cpu").locator("canvas").first().waitFor();
    await page.getByTestId("freshness").waitFor();
    assert.equal(await page.getByRole("heading", { level: 1 }).textContent(), "web-a");

    // Only reads: the session check, ListVMMonitoring (inventory) and QueryVMMonitoring, and the rules and
    // incidents drawn on the charts and counted in the navigation (issue 27, item 7).
    const methods = new Set(rpcs());
    assert.deepEqual([...methods].sort(), [
      "ListAlertRules",
      "ListIncidents",
      "ListVMMonitoring",
      "QueryVMMonitoring",
    ]);
    for (const s of seen) {
      const m = rpcMethod(s.url);
      if (m) continue;
      assert.equal(s.method, "GET", `${s.method} ${s.url} is not a read`);
    }
    for (const s of seen.filter((x) => rpcMethod(x.url) === "ListVMMonitoring"))
      assert.equal(JSON.parse(s.body ?? "{}").inventoryOnly, true, "the inventory is read without metrics");

    // The chart's data, as handed to uPlot: one value per 30 s step, null where no sample exists.
    const start = Number(await cpuChart().getAttribute("data-start"));
    const step = Number(await cpuChart().getAttribute("data-step"));
    assert.equal(step, 30);
    const [cpu] = JSON.parse((await cpuChart().getAttribute("data-series")) ?? "[]") as {
      label: string;
      values: (number | null)[];
    }[];
    assert.equal(cpu.label, "utilization");
    const at = (ts: number) => cpu.values[(ts - start) / step];
    for (let ts = gapFrom; ts <= gapTo; ts += 30) assert.equal(at(ts), null, `no point at ${ts}`);
    assert.ok(!cpu.values.includes(0), "a missing sample is never drawn as 0");
    const present = cpu.values.filter((v) => v !== null) as number[];
    assert.ok(present.length >= 90, `${present.length} points`);
    for (const v of present) assert.ok(v >= 19.9 && v <= 50.1, `utilization ${v}`);
    assert.match(
      (await page.getByTestId("card-cpu").getByTestId("chart-coverage").textContent()) ?? "",
      /1 gap \(shaded\)/,
    );

    // Hovering inside the gap shows a dash in the legend, not a number.
    const over = await page.getByTestId("chart-cpu").locator(".u-over").boundingBox();
    assert.ok(over);
    const xOf = (ts: number) => over.x + (over.width * (ts - start)) / (step * (cpu.values.length - 1));
    const legend = '[data-testid="chart-cpu"] .u-legend .u-series:nth-child(2) .u-value';
    await page.mouse.move(xOf((gapFrom + gapTo) / 2), over.y + over.height / 2);
    await waitText(page, legend, /^—$/);
    await page.mouse.move(xOf(gapFrom - 300), over.y + over.height / 2);
    await waitText(page, legend, /^\d+ %$/);

    // Data quality stands apart from the VM's state.
    assert.equal(await page.getByTestId("freshness").textContent(), "fresh");
    assert.match((await page.getByTestId("vm-facts").textContent()) ?? "", /RUNNING/);
    // A BASELINE VM: filesystem explains, with the explicit (not automatic) install action.
    const explain = page.getByTestId("explain-filesystem");
    assert.match((await explain.textContent()) ?? "", /Needs expanded monitoring/);
    assert.equal(
      await page.getByTestId("partial-banner").count(),
      0,
      "a BASELINE VM is not a partial answer",
    );
    if (SHOTS) {
      mkdirSync(SHOTS, { recursive: true });
      await page.screenshot({ path: join(SHOTS, "vm-1h.png"), fullPage: true });
    }
    assert.ok(!rpcs().includes("EnableExpandedMonitoring"));
    assert.deepEqual(problems, []);
  });

  it("asks each range at a step within the point budget, which the server serves (7 d at 1800 s)", async () => {
    // 1 h was asked when the page opened (the first test): 121 points at 30 s.
    const first = seen
      .filter((s) => rpcMethod(s.url) === "QueryVMMonitoring")
      .map((s) => JSON.parse(s.body ?? "{}"))
      .find((b) => b.metricIds.includes("cpu_utilization_pct"));
    assert.equal(first?.stepSeconds, 30);
    assert.equal(Number(first.endTimeUnix) - Number(first.startTimeUnix), 3600);
    const expected: Record<string, number> = { "6 h": 60, "24 h": 120, "7 d": 1800 };
    for (const [label, stepSeconds] of Object.entries(expected)) {
      const answered = page.waitForResponse(
        (r) =>
          r.url().endsWith(`${RPC}QueryVMMonitoring`) &&
          JSON.parse(r.request().postData() ?? "{}").stepSeconds === stepSeconds,
      );
      await page.getByRole("group", { name: "Time range" }).getByRole("button", { name: label }).click();
      const res = await answered;
      assert.equal(res.status(), 200, `${label}: ${await res.text()}`);
      const req = JSON.parse(res.request().postData() ?? "{}");
      const points = (Number(req.endTimeUnix) - Number(req.startTimeUnix)) / req.stepSeconds + 1;
      assert.ok(
        req.stepSeconds >= 30 && points <= 10_000,
        `${label}: ${points} points at ${req.stepSeconds} s`,
      );
      assert.ok(points <= 1_000, `${label}: ${points} points is more than a chart can show`);
      const body = JSON.parse(await res.text());
      assert.equal(body.stepSeconds, stepSeconds);
      await page.getByTestId("chart-cpu").locator("canvas").first().waitFor();
      assert.equal(Number(await cpuChart().getAttribute("data-step")), stepSeconds);
      assert.equal(await page.getByRole("alert").count(), 0, `${label}: no error shown`);
      if (label === "7 d") {
        assert.match(page.url(), /\?range=7d$/);
        if (SHOTS) await page.screenshot({ path: join(SHOTS, "vm-7d.png"), fullPage: true });
      }
    }
    assert.ok(!rpcs().includes("EnableExpandedMonitoring"));
    assert.deepEqual(problems, []);
  });

  it("one number, one meaning: coverage and the headline say what the API answers, at 1 h and at 7 d (issue 43, item 1)", async () => {
    const api = t.clients(p.owner.session).monitoring;
    for (const range of ["1h", "7d"]) {
      const asked = page.waitForRequest(
        (r) =>
          r.url().endsWith(`${RPC}QueryVMMonitoring`) &&
          JSON.parse(r.postData() ?? "{}").metricIds?.includes("disk_read_bytes_per_sec"),
      );
      const askedNow = page.waitForRequest(
        (r) =>
          r.url().endsWith(`${RPC}QueryVMMonitoring`) &&
          JSON.parse(r.postData() ?? "{}").metricIds?.includes("telemetry_last_observed"),
      );
      await page.goto(`${vmUrl(vmA)}?range=${range}`);
      const body = JSON.parse((await asked).postData() ?? "{}");
      const nowBody = JSON.parse((await askedNow).postData() ?? "{}");
      const card = page.getByTestId("card-cpu");
      await card.locator(".vm-chart").waitFor();
      // The API's answer for the same window, and for the headline's last hour at 30 s.
      const r = await api.queryVMMonitoring({
        name: vmA,
        metricIds: ["cpu_utilization_pct"],
        startTimeUnix: BigInt(body.startTimeUnix),
        endTimeUnix: BigInt(body.endTimeUnix),
        stepSeconds: body.stepSeconds,
      });
      const q = r.quality?.series.find((s) => s.metricId === "cpu_utilization_pct");
      assert.ok(q && q.expectedPoints > 0, `${range}: the API counts steps`);
      const rangeSteps = (Number(r.endTimeUnix) - Number(r.startTimeUnix)) / r.stepSeconds + 1;

      // One coverage statement: the data-quality card's and the chart's are the same words and numbers,
      // and those are the API's present and expected points, its gaps, and the steps the VM did not exist.
      const quality = (await page.getByTestId("quality-coverage").textContent()) ?? "";
      const chart = ((await card.getByTestId("chart-coverage").textContent()) ?? "").replace(
        /^Coverage: /,
        "",
      );
      assert.equal(quality, chart, `${range}: the quality card and the chart say the same`);
      const m =
        /^(\d+) of (\d+) steps \(([^)]+) each\) have a sample · (no gaps|(\d+) gaps? \(shaded\))/.exec(chart);
      assert.ok(m, `${range}: ${chart}`);
      assert.equal(Number(m[1]), q.presentPoints, `${range}: present`);
      assert.equal(Number(m[2]), q.expectedPoints, `${range}: expected`);
      assert.equal(m[4] === "no gaps" ? 0 : Number(m[5]), q.gaps.length, `${range}: gaps`);
      const before = rangeSteps - q.expectedPoints;
      if (before > 0)
        assert.match(chart, new RegExp(`${before} more steps? (is|are) from when the VM did not exist`));
      else assert.doesNotMatch(chart, /did not exist/);
      // No other count of steps anywhere on the card: the footer and the summary's lines say none.
      assert.doesNotMatch(
        ((await card.textContent()) ?? "").replace(chart, ""),
        /steps without a sample|missing points|of \d+ steps/,
      );
      // The summary says what each figure is: averages of the step above 30 s, samples at 30 s.
      const summary = (await card.getByTestId("chart-summary").textContent()) ?? "";
      if (r.stepSeconds > 30)
        assert.match(summary, /latest 30-min average .*of 30-min averages, average over the range/);
      else assert.match(summary, /latest sample .*average over the range/);

      // The headline is the latest 30 s sample, the same at 1 h and at 7 d.
      assert.equal(nowBody.stepSeconds, 30);
      const now = await api.queryVMMonitoring({
        name: vmA,
        metricIds: ["cpu_utilization_pct", "vcpus"],
        startTimeUnix: BigInt(nowBody.startTimeUnix),
        endTimeUnix: BigInt(nowBody.endTimeUnix),
        stepSeconds: 30,
      });
      const pts = now.series.find((s) => s.metricId === "cpu_utilization_pct")?.points ?? [];
      const last = pts[pts.length - 1];
      assert.ok(last);
      const headline = page.getByTestId("headline-cpu");
      await headline.waitFor();
      assert.match(
        (await headline.textContent()) ?? "",
        new RegExp(`^${last.value.toFixed(1)} % .*latest sample`),
      );
      assert.match(
        (await headline.getAttribute("title")) ?? "",
        /latest 30 s sample \(.+\), whatever the chart's range/,
      );
    }
    assert.deepEqual(problems, []);
  });

  it("charts tick at round values, show the values at the pointer and on a tap, and name the time zone (issue 43, item 7)", async () => {
    const ctx = await browser.newContext({
      viewport: { width: 390, height: 844 },
      hasTouch: true,
      isMobile: true,
      timezoneId: "Europe/Berlin",
    });
    const phone = await ctx.newPage();
    await signIn(phone, t.baseUrl, p.owner.email, p.owner.password);
    await phone.goto(vmUrl(vmA));
    const card = phone.getByTestId("card-memory");
    await card.locator("canvas").first().waitFor();
    // Memory is 4 GiB: the axis reads whole (or half) GiB, never 3.7 GiB.
    const labels = JSON.parse(
      (await card.getByTestId("chart-memory").getAttribute("data-y-ticks")) ?? "[]",
    ) as string[];
    assert.ok(labels.length >= 3, labels.join(" | "));
    for (const l of labels) assert.match(l, /^(0 B|(\d+|\d+\.5) GiB|\d+00 MiB)$/, `tick ${l}`);
    // The time zone is named beside the range.
    assert.match(
      (await phone.getByTestId("refresh-status").textContent()) ?? "",
      /times in Europe\/Berlin \(GMT\+\d+\)/,
    );
    // A tap on the chart shows the time and each series' value there.
    const over = card.locator(".u-over");
    await over.scrollIntoViewIfNeeded();
    const box = await over.boundingBox();
    assert.ok(box);
    await phone.touchscreen.tap(box.x + box.width * 0.25, box.y + box.height / 2);
    const tip = card.getByTestId("chart-tooltip");
    await tip.waitFor();
    const text = (await tip.textContent()) ?? "";
    assert.match(text, /Europe\/Berlin/);
    assert.match(text, /used: \d+(\.\d)? GiB/);
    assert.match(text, /total: 4\.0 GiB/);
    await ctx.close();
  });

  it("shows a metric's error (QUERY_TIMEOUT) on its own card and the rest of the answer", async () => {
    // The server times a metric out only under load: here its answer is edited in flight.
    await page.route(`**${RPC}QueryVMMonitoring`, async (route) => {
      const body = JSON.parse(route.request().postData() ?? "{}");
      const res = await route.fetch();
      const json = JSON.parse(await res.text());
      if (body.metricIds.includes("disk_read_bytes_per_sec")) {
        json.series = json.series.filter((s: { metricId: string }) => !s.metricId.startsWith("disk_"));
        json.quality.errors.push({
          metricId: "disk_read_bytes_per_sec",
          code: "deadline_exceeded",
          reason: "QUERY_TIMEOUT",
          message: "disk_read_bytes_per_sec was not read within 10000 ms",
        });
        json.quality.partial = true;
      }
      await route.fulfill({ status: 200, contentType: "application/json", body: JSON.stringify(json) });
    });
    await page.reload();
    const card = page.getByTestId("card-disk");
    await card.getByTestId("card-error").waitFor();
    assert.match((await card.getByTestId("card-error").textContent()) ?? "", /QUERY_TIMEOUT/);
    assert.match((await page.getByTestId("partial-banner").textContent()) ?? "", /QUERY_TIMEOUT/);
    await page.getByTestId("chart-cpu").locator("canvas").first().waitFor();
    assert.equal(await page.getByTestId("card-cpu").getByTestId("card-error").count(), 0);
    await page.unroute(`**${RPC}QueryVMMonitoring`);
    assert.deepEqual(problems, []);
  });

  it("installs expanded monitoring only when confirmed, shows the command and token once, never again", async () => {
    seen.length = 0;
    await page.goto(vmUrl(vmA));
    await page.getByTestId("chart-cpu").locator("canvas").first().waitFor();
    // The page's button (the filesystem card no longer explains: the hypervisor collector reads it).
    await page.getByRole("button", { name: "Install expanded monitoring" }).first().click();
    const confirm = page.getByTestId("expanded-confirm");
    await confirm.waitFor();
    assert.match((await confirm.textContent()) ?? "", /svc installs nothing and restarts nothing/);
    assert.ok(!rpcs().includes("EnableExpandedMonitoring"), "opening the dialog sends nothing");

    await confirm.getByRole("button", { name: "Enable and show the install command" }).click();
    const result = page.getByTestId("expanded-result");
    await result.or(confirm.getByRole("alert")).waitFor();
    if (await confirm.getByRole("alert").count())
      assert.fail(`not enabled: ${await confirm.getByRole("alert").textContent()}`);
    assert.equal(rpcs().filter((m) => m === "EnableExpandedMonitoring").length, 1);
    const command = (await result.getByTestId("install-command").textContent()) ?? "";
    assert.match(command, /svc-agent/);
    assert.ok(command.includes("projects/vmpage/locations/dc-1/vms/web-a"), command);
    const token = (await result.getByTestId("shown-once").locator("code.secret").textContent()) ?? "";
    assert.match(token, /^svca_/);
    // The page rereads the VM (now EXPANDED) and its metrics under the dialog, which stays open.
    await page.getByTestId("monitoring-level").filter({ hasText: "Expanded" }).waitFor();
    await page.getByTestId("nodata-filesystem").waitFor();
    assert.equal(await result.getByTestId("shown-once").locator("code.secret").textContent(), token);
    const stored = (await page.evaluate(
      `JSON.stringify([localStorage, sessionStorage, location.href])`,
    )) as string;
    assert.ok(!stored.includes(token), "the token is kept nowhere but on the screen");

    // The three ways, each with docs/agent.md's configuration for this server, the token by file only.
    const origin = new URL(t.baseUrl).origin;
    const text = async (id: string) => (await result.getByTestId(id).textContent()) ?? "";
    await result.getByLabel("node_exporter + vmagent or Prometheus agent").check();
    await result.getByTestId("way-node-exporter").waitFor();
    assert.equal(await text("token-file-command"), tokenFileCommand("_victoria-metrics"));
    assert.equal(await text("vmagent-scrape"), vmagentScrapeYaml());
    assert.equal(await text("vmagent-flags"), vmagentFlags(origin));
    assert.equal(await text("prometheus-agent"), prometheusAgentYaml(origin));
    assert.ok(!(await result.getByTestId("way-node-exporter").textContent())?.includes(token));
    await result.getByLabel("OpenTelemetry Collector").check();
    await result.getByTestId("way-otel").waitFor();
    assert.equal(await text("token-file-command"), tokenFileCommand("otelcol-contrib"));
    assert.equal(await text("otel-collector"), otelCollectorYaml(origin));
    assert.ok(!(await result.getByTestId("way-otel").textContent())?.includes(token));
    await result.getByLabel("svc-agent", { exact: true }).check();
    assert.equal(await text("install-command"), command);

    // The token is the guest agent's: it writes this VM's filesystem series.
    const ms = Date.now();
    await pushAll(t.baseUrl, token, [
      rwSeries(
        "svc_vm_filesystem_used_bytes",
        { vm: vmA, mountpoint: "/", fstype: "ext4", device: "/dev/vda1" },
        [
          [ms - 60 * S, 3 * 2 ** 30],
          [ms - 30 * S, 3 * 2 ** 30],
        ],
      ),
      rwSeries(
        "svc_vm_filesystem_size_bytes",
        { vm: vmA, mountpoint: "/", fstype: "ext4", device: "/dev/vda1" },
        [
          [ms - 60 * S, 10 * 2 ** 30],
          [ms - 30 * S, 10 * 2 ** 30],
        ],
      ),
    ]);

    seen.length = 0;
    await page.reload();
    await page.getByTestId("chart-filesystem").locator("canvas").first().waitFor();
    const html = (await page.evaluate("document.documentElement.outerHTML")) as string;
    assert.ok(!html.includes(token), "after a reload the token is gone");
    assert.equal(await page.getByTestId("expanded-result").count(), 0);
    assert.ok(!rpcs().includes("EnableExpandedMonitoring"), "a reload enables nothing");
    assert.match((await page.getByTestId("monitoring-level").textContent()) ?? "", /Expanded/);
    // The sender that fed the guest series (svc's own series with the agent token: svc-agent).
    assert.match(
      (await page.getByTestId("guest-sender").textContent()) ?? "",
      /^svc-agent, last seen \d+s ago$/,
    );
    const fs = page.getByTestId("card-filesystem");
    assert.match((await fs.locator(".u-legend").textContent()) ?? "", /\/ used/);
    if (SHOTS) await page.screenshot({ path: join(SHOTS, "vm-expanded.png"), fullPage: true });
    assert.match((await fs.textContent()) ?? "", /Guest agent/);
    // The headline is the latest sample, and says so (issue 43, item 1).
    assert.match(
      (await fs.getByTestId("headline-filesystem").textContent()) ?? "",
      /^\/ 30 % latest sample, /,
    );
    // The action is now "a new token", still explicit.
    await page.getByRole("button", { name: "Issue a new agent token" }).waitFor();
    assert.deepEqual(problems, []);
  });

  it("explains a BASELINE VM outside DC-1 and shows stale telemetry apart from the VM's state", async () => {
    seen.length = 0;
    await page.goto(vmUrl(vmFar));
    const explain = page.getByTestId("explain-filesystem");
    await explain.waitFor();
    const text = (await explain.textContent()) ?? "";
    assert.match(text, /Needs expanded monitoring/);
    assert.match(text, /available in dc-1/);
    assert.equal(await page.getByRole("button", { name: "Install expanded monitoring" }).count(), 0);
    assert.equal(await page.getByTestId("card-filesystem").getByTestId("card-error").count(), 0);
    await page.getByTestId("stale-banner").waitFor();
    assert.equal(await page.getByTestId("freshness").textContent(), "stale");
    assert.match((await page.getByTestId("vm-facts").textContent()) ?? "", /RUNNING/);
    assert.match(
      (await page.getByTestId("stale-banner").textContent()) ?? "",
      /not the VM: its state is RUNNING/,
    );
    assert.equal(await page.getByTestId("partial-banner").count(), 0);
    assert.deepEqual(
      new Set(rpcs()),
      new Set(["ListAlertRules", "ListIncidents", "ListVMMonitoring", "QueryVMMonitoring"]),
    );
    assert.deepEqual(problems, []);
  });

  it("refreshes every 30 s up to 24 h, not at 7 d, and not while paused", async () => {
    const own = await openPage(browser);
    // Playwright's clock: timers run when the test moves time, so no test waits 30 s.
    await own.page.clock.install();
    const steps: number[] = [];
    own.page.on("request", (r: Request) => {
      if (rpcMethod(r.url()) !== "QueryVMMonitoring") return;
      const b = JSON.parse(r.postData() ?? "{}");
      // The VM page's query (several metrics at once).
      if (b.metricIds.includes("disk_read_bytes_per_sec")) steps.push(b.stepSeconds);
    });
    await signIn(own.page, t.baseUrl, p.owner.email, p.owner.password);
    await own.page.goto(vmUrl(vmA));
    await own.page.getByTestId("chart-cpu").locator("canvas").first().waitFor();
    assert.deepEqual(steps, [30]);
    const again = own.page.waitForRequest(
      (r) =>
        rpcMethod(r.url()) === "QueryVMMonitoring" &&
        JSON.parse(r.postData() ?? "{}").stepSeconds === 30 &&
        JSON.parse(r.postData() ?? "{}").metricIds.includes("cpu_utilization_pct"),
    );
    await own.page.clock.runFor(31_000);
    await again;
    assert.deepEqual(steps, [30, 30]);
    // Paused, nothing is read again, the freshness neither; the URL keeps the pause.
    const reads = () => steps.length;
    await own.page.getByRole("button", { name: "Pause auto-refresh" }).click();
    await own.page.waitForURL(/refresh=off/);
    await own.page.getByTestId("refresh-status").getByText("auto-refresh paused").waitFor();
    let fresh = 0;
    own.page.on("request", (r: Request) => {
      if (rpcMethod(r.url()) === "QueryVMMonitoring") fresh++;
    });
    await own.page.clock.runFor(95_000);
    assert.equal(reads(), 2);
    assert.equal(fresh, 0);
    await own.page.getByRole("button", { name: "Resume auto-refresh" }).click();
    await own.page.waitForURL((u) => !u.search.includes("refresh=off"));

    await own.page.getByRole("group", { name: "Time range" }).getByRole("button", { name: "7 d" }).click();
    await own.page.getByTestId("chart-cpu").locator("canvas").first().waitFor();
    await own.page.waitForFunction(
      `document.querySelector('[data-testid="card-cpu"] .vm-chart')?.dataset.step === "1800"`,
    );
    // The freshness read still runs every 30 s; the 7-day charts are not re-read.
    const freshRead = own.page.waitForRequest(
      (r) =>
        rpcMethod(r.url()) === "QueryVMMonitoring" &&
        JSON.parse(r.postData() ?? "{}").metricIds[0] === "telemetry_last_observed",
    );
    await own.page.clock.runFor(61_000);
    await freshRead;
    assert.deepEqual(steps, [30, 30, 1800]);
    await own.page.context().close();
    assert.deepEqual(own.problems, []);
  });

  it("offers a viewer no install action, only the explanation", async () => {
    const vm = await t.admin.vms.createVM({
      parent: p.projectName,
      vmId: "web-v",
      displayName: "web-v",
      location: "dc-1",
      distribution: "ubuntu-24.04",
      vcpus: 2,
      memoryBytes: 4n << 30n,
    });
    const email = "viewer-vmpage@example.com";
    const password = `pw-${randomUUID()}`;
    const user = await t.admin.users.createUser({ email, password, displayName: "Viewer" });
    await t.admin.projects.setMember({ project: p.projectName, user: user.name, role: "viewer" });
    const viewer = await openPage(browser);
    const requests: string[] = [];
    viewer.page.on("request", (r: Request) => requests.push(r.url()));
    await signIn(viewer.page, t.baseUrl, email, password);
    await viewer.page.goto(vmUrl(vm.name));
    const explain = viewer.page.getByTestId("explain-filesystem");
    await explain.waitFor();
    assert.match((await explain.textContent()) ?? "", /A project owner or editor can install it/);
    assert.equal(
      await viewer.page.getByRole("button", { name: /Install expanded monitoring|agent token/ }).count(),
      0,
    );
    assert.ok(!requests.some((u) => rpcMethod(u) === "EnableExpandedMonitoring"));
    await viewer.page.context().close();
    assert.deepEqual(viewer.problems, []);
  });

  it("the VM list sorts by any column, keeps the sort in the URL across a reload, and names each VM once", async () => {
    await page.goto(`${t.baseUrl}/projects/vmpage/vms`);
    const table = page.getByTestId("vm-table");
    await table.locator("tbody tr").first().waitFor();
    const names = () => table.locator("tbody tr td:first-child").allInnerTexts();
    // far-1 has a display name equal to its id: shown once, not twice.
    assert.deepEqual(await names(), ["far-1", "web-a", "web-v"]);
    await table.getByRole("button", { name: "Name" }).click();
    await page.waitForURL(/sort=name&dir=desc/);
    assert.deepEqual(await names(), ["web-v", "web-a", "far-1"]);
    assert.equal(await table.locator("th", { hasText: "Name" }).getAttribute("aria-sort"), "descending");
    // CPU sorts highest first; far-1 (telemetry stopped 10 minutes ago) and web-v (none) have no latest
    // CPU and sort last either way, in the server's order: a missing value is not a 0.
    await table.getByRole("button", { name: "CPU" }).click();
    await page.waitForURL(/sort=cpu&dir=desc/);
    assert.deepEqual(await names(), ["web-a", "web-v", "far-1"]);
    await table.getByRole("button", { name: "CPU" }).click();
    await page.waitForURL(/sort=cpu&dir=asc/);
    assert.deepEqual(await names(), ["web-a", "web-v", "far-1"]);
    await table.getByRole("button", { name: "Location" }).click();
    await table.getByRole("button", { name: "Location" }).click();
    await page.waitForURL(/sort=location&dir=desc/);
    assert.deepEqual(await names(), ["far-1", "web-a", "web-v"], "dc-2 before dc-1");
    await table.getByRole("button", { name: "Name" }).click();
    await page.waitForURL(/sort=name&dir=asc/);
    await table.getByRole("button", { name: "Name" }).click();
    await page.waitForURL(/sort=name&dir=desc/);
    await page.reload();
    await table.locator("tbody tr").first().waitFor();
    assert.deepEqual(await names(), ["web-v", "web-a", "far-1"], "the sort survives a reload");
    assert.equal(await table.locator("th", { hasText: "Name" }).getAttribute("aria-sort"), "descending");
  });

  it("finds a VM past the first page of the inventory", async () => {
    // 50 VMs named before web-a push it to the second page of ListVMMonitoring (50 per page).
    for (let i = 0; i < 50; i++)
      await t.admin.vms.createVM({
        parent: p.projectName,
        vmId: `aa-${String(i).padStart(2, "0")}`,
        location: "dc-1",
        distribution: "debian-12",
        vcpus: 1,
        memoryBytes: 1n << 30n,
      });
    seen.length = 0;
    await page.goto(vmUrl(vmA));
    await page.getByTestId("monitoring-level").waitFor();
    assert.match((await page.getByTestId("vm-facts").textContent()) ?? "", /RUNNING/);
    const pages = seen
      .filter((x) => rpcMethod(x.url) === "ListVMMonitoring")
      .map((x) => JSON.parse(x.body ?? "{}"));
    assert.ok(pages.length >= 2 && pages.some((b) => b.pageToken), "the second page was read");
    assert.deepEqual(problems, []);
  });

  it("an expanded VM whose guest agent never sent says it is silent, and since its token (issue 43, item 6)", async () => {
    const quiet = await t.admin.vms.createVM({
      parent: p.projectName,
      vmId: "a-quiet",
      location: "dc-1",
      distribution: "debian-12",
      vcpus: 1,
      memoryBytes: 1n << 30n,
    });
    const enabledAt = Date.now() / 1000;
    await t.clients(p.owner.session).monitoring.enableExpandedMonitoring({ name: quiet.name });
    // The list (first page, by name): "Expanded", and that the agent is silent.
    await page.goto(`${t.baseUrl}/projects/vmpage/vms`);
    const row = page
      .getByTestId("vm-table")
      .locator("tbody tr", { has: page.getByRole("link", { name: "a-quiet", exact: true }) });
    await row.getByText("Expanded").waitFor();
    assert.equal(await row.getByTestId("agent-silent").textContent(), "guest agent silent: no data yet");
    // The page: silent, and since when (the token's issue, from the audit log), in words.
    await page.goto(vmUrl(quiet.name));
    const sender = page.getByTestId("guest-sender");
    await sender.getByText(/the agent token was issued/).waitFor();
    const text = (await sender.textContent()) ?? "";
    assert.match(text, /^silent no guest-agent data yet; the agent token was issued .+ \((\d+)s ago\)$/);
    const ago = Number(/\((\d+)s ago\)$/.exec(text)?.[1]);
    assert.ok(ago <= Date.now() / 1000 - enabledAt + 2, `${ago} s ago`);
    assert.deepEqual(problems, []);
  });

  it("Connect your tools shows the query base URL the server serves, and the scrape configuration", async () => {
    await page.goto(`${t.baseUrl}/projects/vmpage/connect`);
    const base = (await page.getByTestId("query-base-url").textContent()) ?? "";
    assert.equal(base, `${t.baseUrl}/v1/monitoring/projects/vmpage/prometheus`);
    const key = await t.clients(p.owner.session).keys.createKey({
      parent: p.projectName,
      displayName: "grafana",
      capabilities: ["monitoring.read"],
      requestId: randomUUID(),
    });
    const auth = { authorization: `Bearer ${key.secret}` };
    const q = await fetch(`${base}/api/v1/query?query=up`, { headers: auth });
    assert.equal(q.status, 200);
    assert.equal(((await q.json()) as { status: string }).status, "success");
    // Grafana's "Save & test".
    const probe = await fetch(`${base}/api/v1/query`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/x-www-form-urlencoded" },
      body: "query=1%2B1&time=4",
    });
    assert.deepEqual(await probe.json(), {
      status: "success",
      data: { resultType: "scalar", result: [4, "2"] },
    });

    const discovery = (await page.getByTestId("discovery-url").textContent()) ?? "";
    assert.equal(discovery, `${t.baseUrl}/v1/monitoring/projects/vmpage/scrape-targets`);
    const config = (await page.getByTestId("scrape-config").textContent()) ?? "";
    // The page shows the suggested configuration (60 s, 10 s, honor_timestamps) that docs/prometheus.md
    // shows and promtool accepts (test/scrape-config.test.ts), with this project's discovery URL.
    assert.equal(config, scrapeConfigYaml(discovery));
    const d = await fetch(discovery, { headers: auth });
    assert.equal(d.status, 200);
    const groups = (await d.json()) as { targets: string[]; labels: Record<string, string> }[];
    assert.ok(groups.length >= 1);
    const shown = (await page.getByTestId("discovery-answer").textContent()) ?? "";
    assert.ok(shown.includes(`"targets": ["${groups[0].targets[0]}"]`), shown);
    assert.ok(shown.includes(`"__metrics_path__": "${groups[0].labels.__metrics_path__}"`));
    assert.ok(shown.includes(`"__scheme__": "${groups[0].labels.__scheme__}"`));
    const shard = await fetch(
      `${groups[0].labels.__scheme__}://${groups[0].targets[0]}${groups[0].labels.__metrics_path__}?shard=${groups[0].labels.__param_shard}`,
      { headers: auth },
    );
    assert.equal(shard.status, 200);
    assert.deepEqual(problems, []);
  });
});

/** Waits (Playwright's polling, no fixed sleep) until the text of the element at `selector` matches. */
async function waitText(page: Page, selector: string, want: RegExp): Promise<void> {
  const expr = `new RegExp(${JSON.stringify(want.source)}).test(document.querySelector(${JSON.stringify(selector)})?.textContent ?? "")`;
  await page.waitForFunction(expr, undefined, { timeout: 5000 }).catch(async () => {
    const got = await page.evaluate(`document.querySelector(${JSON.stringify(selector)})?.textContent`);
    assert.fail(`${selector}: ${JSON.stringify(got)} does not match ${want}`);
  });
}
