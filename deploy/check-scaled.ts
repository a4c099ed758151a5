// Checks the scaled layout of docs/deploy.md ("Scaled layout on one machine") from outside:
//   npx tsx deploy/check-scaled.ts [replica origin …]   (default http://127.0.0.1:8081 http://127.0.0.1:8082)
// with SVC_BASE_URL (the load balancer), SVC_ADMIN_TOKEN and SVC_COLLECTOR_TOKEN as the replicas have
// them. It asks every replica and the balancer for /readyz, creates a project and a VM through the
// balancer (and an owner with a read key), writes a collector's CPU samples through it, and reads the
// derived utilization back from each replica: one PostgreSQL, one engine. Exits 1 naming what failed.
import { randomUUID } from "node:crypto";
import { pathToFileURL } from "node:url";
import { Code, ConnectError } from "@connectrpc/connect";
import { pushRemoteWrite } from "@svc/remotewrite";
import { createSvcClients } from "@svc/sdk";

/** What failed, in words for the person running the check. */
export class CheckFailed extends Error {}

export interface ScaledLayout {
  /** The load balancer's origin (SVC_BASE_URL). */
  readonly lb: string;
  /** Each replica's own origin. */
  readonly replicas: readonly string[];
  readonly adminToken: string;
  readonly collectorToken: string;
}

/** Runs the check; resolves when it passed, rejects with CheckFailed naming what did not. */
export async function checkScaled(
  { lb, replicas, adminToken, collectorToken }: ScaledLayout,
  say: (line: string) => void = () => {},
): Promise<void> {
  const project = "scaled-check";
  for (const origin of [lb, ...replicas]) {
    const res = await fetch(`${origin}/readyz`).catch((err: Error) => {
      throw new CheckFailed(`${origin}: ${err.message}`);
    });
    const body = await res.text();
    say(`${origin}/readyz ${res.status} ${body}`);
    if (res.status !== 200) throw new CheckFailed(`${origin} is not ready`);
  }

  const admin = createSvcClients({ baseUrl: lb, token: adminToken, maxRetries: 0 }).admin;
  const exists = (err: unknown) => {
    if (ConnectError.from(err).code !== Code.AlreadyExists) throw err;
  };
  await admin.projects
    .createProject({ projectId: project, displayName: "scaled layout check" })
    .catch(exists);
  await admin.vms
    .createVM({
      parent: `projects/${project}`,
      vmId: "vm-1",
      location: "dc-1",
      distribution: "debian-12",
      vcpus: 2,
      memoryBytes: 4n << 30n,
    })
    .catch(exists);
  const vm = `projects/${project}/locations/dc-1/vms/vm-1`;
  say(`project ${project} and ${vm} exist (created through ${lb})`);

  // The operator token sees no project data: an owner signs in and makes a read key.
  const email = `check-${randomUUID()}@example.com`;
  const password = randomUUID();
  const user = await admin.users.createUser({ email, password, displayName: "scaled check" });
  await admin.projects.setMember({ project: `projects/${project}`, user: user.name, role: "owner" });
  const { sessionToken } = await createSvcClients({ baseUrl: lb, maxRetries: 0 }).sessions.login({
    email,
    password,
  });
  const { secret: readKey } = await createSvcClients({
    baseUrl: lb,
    token: sessionToken,
    maxRetries: 0,
  }).keys.createKey({
    parent: `projects/${project}`,
    displayName: "scaled check",
    capabilities: ["monitoring.read"],
    requestId: randomUUID(),
  });

  // Two CPU samples 30 s apart: 2 vCPUs busy 60 % → svc derives svc_vm_cpu_utilization_pct = 60.
  const now = Date.now();
  const cpu = Math.round(now / 1000);
  for (const [ts, seconds] of [
    [now - 30_000, cpu],
    [now, cpu + 0.6 * 30 * 2],
  ]) {
    const series = (name: string, value: number) => ({
      labels: [
        { name: "__name__", value: name },
        { name: "vm", value: vm },
      ],
      samples: [{ timestampMs: ts, value }],
    });
    const res = await pushRemoteWrite(`${lb}/v1/ingest/prometheus/api/v1/write`, collectorToken, {
      timeseries: [series("svc_vm_cpu_seconds_total", seconds), series("svc_vm_vcpus", 2)],
      metadata: [],
    });
    if (res.status !== 204)
      throw new CheckFailed(`remote write through ${lb} answered ${res.status}: ${res.body}`);
  }
  say(`remote write through ${lb}: 2 batches acknowledged`);

  // Each replica reads it from the engine (VictoriaMetrics serves a sample about 1 s after taking it).
  for (const origin of replicas) {
    const u = new URL(`${origin}/v1/monitoring/projects/${project}/prometheus/api/v1/query`);
    u.searchParams.set("query", `svc_vm_cpu_utilization_pct{vm="${vm}"}`);
    u.searchParams.set("time", String(now / 1000));
    let value: string | undefined;
    for (let i = 0; i < 50 && value === undefined; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 200));
      const res = await fetch(u, { headers: { Authorization: `Bearer ${readKey}` } });
      const body = (await res.json()) as { data?: { result: { value: [number, string] }[] } };
      value = body.data?.result[0]?.value[1];
    }
    say(`${origin}: svc_vm_cpu_utilization_pct = ${value ?? "(none)"}`);
    if (value === undefined || Math.abs(Number(value) - 60) > 1e-6)
      throw new CheckFailed(`${origin} does not read 60`);
  }
  say("ok: both replicas answer from one PostgreSQL and one metrics engine");
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const need = (name: string): string => {
    const v = process.env[name];
    if (v) return v;
    console.error(`FAILED: ${name} is not set (export it as for the replicas)`);
    process.exit(1);
  };
  const layout = {
    lb: process.env.SVC_BASE_URL ?? "http://127.0.0.1:8080",
    replicas:
      process.argv.length > 2 ? process.argv.slice(2) : ["http://127.0.0.1:8081", "http://127.0.0.1:8082"],
    adminToken: need("SVC_ADMIN_TOKEN"),
    collectorToken: need("SVC_COLLECTOR_TOKEN"),
  };
  await checkScaled(layout, (line) => console.log(line)).catch((err: unknown) => {
    console.error(`FAILED: ${err instanceof CheckFailed ? err.message : String(err)}`);
    process.exit(1);
  });
}
