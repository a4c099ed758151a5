/**
 * Test fixture for the Prometheus API tests: the whole app in-process, two projects whose VMs'
 * series are loaded through the real remote-write ingest endpoint, and a `Metrics scraper` key each.
 */
import { randomUUID } from "node:crypto";
import { pushRemoteWrite, type TimeSeries } from "@svc/remotewrite";
import type { Config } from "../src/config.ts";
import { type TestDialect, testDialects } from "./dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "./harness.ts";

export const S = 1000;

export interface PromFixture {
  readonly t: TestApp;
  readonly mine: SeededProject & { key: string; id: string };
  readonly other: SeededProject & { key: string; id: string };
  /** Newest sample time, ms (= the clock's now). */
  readonly endMs: number;
  /** GET (query string) or POST (form body) under a project's query base URL. */
  get(
    projectId: string,
    path: string,
    params?: Record<string, string | string[]>,
    token?: string,
  ): Promise<Reply>;
  post(
    projectId: string,
    path: string,
    params?: Record<string, string | string[]>,
    token?: string,
  ): Promise<Reply>;
  close(): Promise<void>;
}

export interface Reply {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  // biome-ignore lint/suspicious/noExplicitAny: response JSON is checked field by field in tests
  readonly json: any;
}

function form(params: Record<string, string | string[]>): URLSearchParams {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) for (const x of Array.isArray(v) ? v : [v]) u.append(k, x);
  return u;
}

function series(name: string, labels: Record<string, string>, points: [number, number][]): TimeSeries {
  return {
    labels: [
      { name: "__name__", value: name },
      ...Object.entries(labels).map(([n, v]) => ({ name: n, value: v })),
    ],
    samples: points.map(([timestampMs, value]) => ({ timestampMs, value })),
  };
}

/**
 * Loads 30 minutes of 30-second samples ending at `endMs` for each VM: CPU seconds (rate differs per
 * project so a leak is visible in values), vCPUs, memory total/free and a per-device disk counter.
 * `scale` multiplies every value so two projects never have equal numbers.
 */
export async function loadProject(t: TestApp, vms: readonly string[], endMs: number, scale: number) {
  const pts = (f: (k: number) => number): [number, number][] =>
    Array.from({ length: 61 }, (_, k) => [endMs - (60 - k) * 30 * S, f(k)]);
  const ts: TimeSeries[] = [];
  vms.forEach((vm, i) => {
    ts.push(
      series(
        "svc_vm_cpu_seconds_total",
        { vm },
        pts((k) => scale * (i + 1) * 15 * k),
      ),
    );
    ts.push(
      series(
        "svc_vm_vcpus",
        { vm },
        pts(() => 2 * scale),
      ),
    );
    ts.push(
      series(
        "svc_vm_memory_total_bytes",
        { vm },
        pts(() => scale * 4096),
      ),
    );
    ts.push(
      series(
        "svc_vm_memory_free_bytes",
        { vm },
        pts((k) => scale * (1024 + k)),
      ),
    );
    ts.push(
      series(
        "svc_vm_disk_read_bytes_total",
        { vm, device: "vda" },
        pts((k) => scale * k * 100),
      ),
    );
  });
  const res = await pushRemoteWrite(
    `${t.baseUrl}/v1/ingest/prometheus/api/v1/write`,
    t.app.config.collectorToken,
    {
      timeseries: ts,
      metadata: [],
    },
  );
  if (res.status !== 204) throw new Error(`ingest refused the fixture: ${res.status} ${res.body}`);
}

export async function scraperKey(t: TestApp, p: SeededProject): Promise<string> {
  const owner = t.clients(p.owner.session);
  const sa = await owner.serviceAccounts.createServiceAccount({
    parent: p.projectName,
    displayName: "grafana",
    template: "Metrics scraper",
  });
  const created = await owner.keys.createKey({
    parent: sa.name,
    displayName: "grafana",
    capabilities: ["monitoring.read"],
    requestId: randomUUID(),
  });
  if (!created.secret) throw new Error("no secret");
  return created.secret;
}

/**
 * `wallClock`: svc's clock is the real one (for clients that query "now", as a live rule engine);
 * `dialect`: the control plane's (default SQLite).
 */
export async function startPromFixture(
  overrides: Partial<Config> = {},
  opts: { wallClock?: boolean; dialect?: TestDialect } = {},
): Promise<PromFixture> {
  const dialect = opts.dialect ?? (await testDialects())[0].dialect;
  const t = await startTestApp(dialect, overrides, { wallClock: opts.wallClock });
  const endMs = Math.floor(t.clock.now() / (30 * S)) * 30 * S;
  t.clock.ms = endMs;
  const a = await t.seedProject("mine", ["vm-1", "vm-2"]);
  const b = await t.seedProject("other", ["vm-1", "vm-9"]);
  await loadProject(t, a.vms, endMs, 1);
  await loadProject(t, b.vms, endMs, 1000);
  const mine = { ...a, id: "mine", key: await scraperKey(t, a) };
  const other = { ...b, id: "other", key: await scraperKey(t, b) };
  const call = async (
    method: "GET" | "POST",
    projectId: string,
    path: string,
    params = {},
    token?: string,
  ) => {
    const base = `${t.baseUrl}/v1/monitoring/projects/${projectId}/prometheus/${path}`;
    const body = form(params);
    const auth = token ?? (projectId === "other" ? other.key : mine.key);
    const headers: Record<string, string> = auth === "" ? {} : { authorization: `Bearer ${auth}` };
    const res =
      method === "GET"
        ? await fetch(`${base}${body.size > 0 ? `?${body}` : ""}`, { headers })
        : await fetch(base, {
            method: "POST",
            headers: { ...headers, "content-type": "application/x-www-form-urlencoded" },
            body: body.toString(),
          });
    const text = await res.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, text, json };
  };
  return {
    t,
    mine,
    other,
    endMs,
    get: (p, path, params, token) => call("GET", p, path, params, token),
    post: (p, path, params, token) => call("POST", p, path, params, token),
    close: () => t.close(),
  };
}
