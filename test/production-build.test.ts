import assert from "node:assert/strict";
import { type ChildProcess, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { Module } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Script } from "node:vm";
import { pushRemoteWrite } from "@svc/remotewrite";
import { createSvcClients } from "@svc/sdk";
import { startServerProcess } from "../packages/server/testing/server-process.ts";

const root = join(import.meta.dirname, "..");
const ADMIN = "prod-build-operator-token-0123456789";
const COLLECTOR = "prod-build-collector-token-0123456789";

/** `npm run build:server` then `npm run start:prod`: the bundle runs on plain node, without tsx. */
describe("the production build", () => {
  let child: ChildProcess | undefined;
  let dataDir: string;
  let baseUrl = "";
  let output: () => string = () => "";
  let exit: Promise<number | null>;
  before(async () => {
    // Built only when stale (under the build lock): test/start.test.ts may be running a server from this
    // same dist in parallel, and a forced rebuild would swap the folder under it.
    const build = spawnSync(
      process.execPath,
      ["--input-type=module", "-e", 'await (await import("./scripts/build-server.mjs")).buildServer()'],
      { cwd: root, encoding: "utf8" },
    );
    assert.equal(build.status, 0, build.stderr);
    dataDir = mkdtempSync(join(tmpdir(), "svc-prod-"));
    // No --import tsx, no loader: what start:prod runs.
    const server = await startServerProcess({
      args: [join(root, "packages", "server", "dist", "main.js")],
      env: {
        PATH: process.env.PATH,
        PORT: "0",
        SVC_DATA_DIR: dataDir,
        SVC_DEMO: "false",
        SVC_ADMIN_TOKEN: ADMIN,
        SVC_LOG_FORMAT: "json",
        SVC_QUERY_WORKERS: "1",
        SVC_COLLECTOR_TOKEN: COLLECTOR,
        // Every remote-write body through the bundled decode worker (ingest-worker.cjs).
        SVC_INGEST_DECODE_WORKERS: "1",
        SVC_INGEST_INLINE_BYTES: "0",
      },
    });
    child = server.child;
    baseUrl = server.baseUrl;
    output = server.output;
    exit = server.exited;
  });
  after(() => {
    child?.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("has no TypeScript loader in the bundle, and a code cache V8 accepts", () => {
    const dist = join(root, "packages", "server", "dist");
    const server = readFileSync(join(dist, "server.cjs"), "utf8");
    assert.ok(!/require\("tsx|tsx\/esm/.test(server), "server.cjs loads no tsx");
    assert.ok(server.includes("query-worker-entry.cjs"), "the query pool starts the bundled worker's entry");
    assert.ok(server.includes("ingest-worker.cjs"), "the decode pool starts the bundled worker");
    assert.ok(!/require\("tsx|tsx\/esm/.test(readFileSync(join(dist, "ingest-worker.cjs"), "utf8")));
    assert.ok(readFileSync(join(dist, "main.js"), "utf8").includes(".v8-cache"), "main.js loads the cache");
    const script = new Script(Module.wrap(server), {
      filename: join(dist, "server.cjs"),
      cachedData: readFileSync(join(dist, "server.cjs.v8-cache")),
    });
    assert.equal(script.cachedDataRejected, false, "the cache was written by this Node for this file");
    // The worker's own cache, written by the build's start from a worker thread: accepted here too.
    const worker = new Script(Module.wrap(readFileSync(join(dist, "query-worker.cjs"), "utf8")), {
      filename: join(dist, "query-worker.cjs"),
      cachedData: readFileSync(join(dist, "query-worker.cjs.v8-cache")),
    });
    assert.equal(worker.cachedDataRejected, false, "the worker's cache fits its file");
  });

  it("serves RPCs, readiness and a PromQL query (SVC_QUERY_WORKERS=1: in the bundled worker)", async () => {
    const ready = await fetch(`${baseUrl}/readyz`);
    assert.equal(ready.status, 200, await ready.text());
    const admin = createSvcClients({ baseUrl, token: ADMIN, maxRetries: 0 }).admin;
    await admin.projects.createProject({ projectId: "prod", displayName: "prod" });
    const user = await admin.users.createUser({
      email: "o@example.com",
      password: "pw-prod-build",
      displayName: "O",
    });
    await admin.projects.setMember({ project: "projects/prod", user: user.name, role: "owner" });
    const { sessionToken } = await createSvcClients({ baseUrl, maxRetries: 0 }).sessions.login({
      email: "o@example.com",
      password: "pw-prod-build",
    });
    const owner = createSvcClients({ baseUrl, token: sessionToken, maxRetries: 0 });
    const sa = await owner.serviceAccounts.createServiceAccount({
      parent: "projects/prod",
      displayName: "reader",
      template: "Metrics scraper",
    });
    const { secret } = await owner.keys.createKey({
      parent: sa.name,
      displayName: "k",
      capabilities: ["monitoring.read"],
      requestId: crypto.randomUUID(),
    });
    const q = await fetch(
      `${baseUrl}/v1/monitoring/projects/prod/prometheus/api/v1/query?query=${encodeURIComponent("vector(1) + 1")}`,
      { headers: { authorization: `Bearer ${secret}` } },
    );
    const body = (await q.json()) as { status: string; data: { result: { value: [number, string] }[] } };
    assert.equal(q.status, 200, JSON.stringify(body));
    assert.equal(body.data.result[0].value[1], "2");
  });

  it("decodes remote write in the bundled decode worker: a body's refusals are named as inline", async () => {
    const res = await pushRemoteWrite(`${baseUrl}/v1/ingest/prometheus/api/v1/write`, COLLECTOR, {
      timeseries: [
        {
          labels: [
            { name: "__name__", value: "svc_vm_vcpus" },
            { name: "vm", value: "projects/prod/locations/dc-1/vms/none" },
          ],
          samples: [{ value: 2, timestampMs: Date.now() }],
        },
      ],
      metadata: [],
    });
    assert.equal(res.status, 400, res.body);
    assert.match(res.body, /unknown_vm: 1 series, 1 samples/);
  });

  it("names its build on /metrics: the package's version and the commit it was built from", async () => {
    const text = await (
      await fetch(`${baseUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })
    ).text();
    const { version } = JSON.parse(readFileSync(join(root, "packages/server/package.json"), "utf8")) as {
      version: string;
    };
    // The build wrote in the revision it was made from; a stale bundle of an older commit still names one.
    const m = /^svc_build_info\{version="([^"]+)",revision="([^"]+)",node="([^"]+)"\} 1$/m.exec(text);
    assert.ok(m, "svc_build_info missing");
    assert.equal(m[1], version);
    assert.match(m[2], /^([0-9a-f]{40}|unknown)$/);
    const head = spawnSync("git", ["rev-parse", "HEAD"], { cwd: root, encoding: "utf8" });
    if (head.status === 0) assert.notEqual(m[2], "unknown", "built in a checkout: the revision is known");
    assert.equal(m[3], process.version);
  });

  it("stops cleanly on SIGTERM", async () => {
    child?.kill("SIGTERM");
    assert.equal(await exit, 0, output());
  });
});
