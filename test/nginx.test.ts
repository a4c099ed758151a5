import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { pushRemoteWrite } from "@svc/remotewrite";
import { freePort } from "../packages/server/src/net/free-port.ts";
import { waitFor } from "../packages/server/testing/assert.ts";
import { type ServerProcess, startServerProcess } from "../packages/server/testing/server-process.ts";

/** nginx (Debian package nginx-light, or nginx): required in CI, skipped with a message elsewhere. */
const nginxSkip = (() => {
  try {
    execFileSync("nginx", ["-v"], { stdio: "ignore" });
    return undefined;
  } catch {
    if (process.env.CI === "true")
      throw new Error("CI=true but nginx (Debian package nginx-light) is missing");
    return "nginx is not installed (apt-get install nginx-light)";
  }
})();

const REQUESTS_PER_ROUND = 20;

/**
 * deploy/nginx.conf as shipped (only its ports changed) in front of two svc replicas restarted in quick
 * succession, each started again as soon as the other is down: clients see no error (issue 48).
 */
describe("deploy/nginx.conf rides out quick successive restarts", {
  skip: nginxSkip,
  timeout: 300_000,
}, () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-nginx-"));
  const collectorToken = `svcc_${randomBytes(18).toString("base64url")}`;
  const adminToken = `svcadmin_${randomBytes(18).toString("base64url")}`;
  let ports: number[] = [];
  let lb = 0;
  let nginx: ChildProcess | undefined;
  const replicas: (ServerProcess | undefined)[] = [];

  const startReplica = async (i: number) => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const k of Object.keys(env)) if (k.startsWith("SVC_")) delete env[k];
    replicas[i] = await startServerProcess({
      env: {
        ...env,
        HOST: "127.0.0.1",
        PORT: String(ports[i]),
        SVC_DATA_DIR: join(dir, `replica-${i}`),
        SVC_DEMO: "false",
        SVC_COLLECTOR_TOKEN: collectorToken,
        SVC_ADMIN_TOKEN: adminToken,
        SVC_LOG_LEVEL: "warn",
      },
    });
  };
  const stopReplica = async (i: number) => {
    replicas[i]?.child.kill("SIGTERM");
    await replicas[i]?.exited;
  };

  before(async () => {
    ports = await Promise.all([freePort("127.0.0.1"), freePort("127.0.0.1")]);
    lb = await freePort("127.0.0.1");
    const conf = readFileSync(join(import.meta.dirname, "..", "deploy", "nginx.conf"), "utf8")
      .replaceAll("127.0.0.1:8080", `127.0.0.1:${lb}`)
      .replaceAll("127.0.0.1:8081", `127.0.0.1:${ports[0]}`)
      .replaceAll("127.0.0.1:8082", `127.0.0.1:${ports[1]}`);
    writeFileSync(join(dir, "nginx.conf"), conf);
    mkdirSync(join(dir, "tmp"), { recursive: true });
    await Promise.all([startReplica(0), startReplica(1)]);
    nginx = spawn(
      "nginx",
      ["-p", dir, "-e", join(dir, "error.log"), "-c", join(dir, "nginx.conf"), "-g", "daemon off;"],
      { stdio: "ignore" },
    );
    await waitFor("nginx to answer", 30_000, async () =>
      (await fetch(`http://127.0.0.1:${lb}/readyz`).catch(() => undefined))?.status === 200
        ? true
        : undefined,
    );
  });
  after(async () => {
    nginx?.kill("SIGTERM");
    for (const r of replicas) r?.child.kill("SIGTERM");
    await Promise.all(replicas.map((r) => r?.exited));
    rmSync(dir, { recursive: true, force: true });
  });

  it("GETs, remote writes and RPCs (POSTs) through it see no error while each replica restarts right after the other", async () => {
    const failures: string[] = [];
    let answered = 0;
    let running = true;
    const client = async () => {
      while (running) {
        const [get, write, rpc] = await Promise.all([
          fetch(`http://127.0.0.1:${lb}/readyz`).then(
            (r) => `${r.status}`,
            (e: unknown) => String(e),
          ),
          pushRemoteWrite(`http://127.0.0.1:${lb}/v1/ingest/prometheus/api/v1/write`, collectorToken, {
            timeseries: [],
            metadata: [],
          }).then(
            (r) => `${r.status}`,
            (e: unknown) => String(e),
          ),
          // An RPC (Connect: a POST; nginx passes it to the next replica even once sent, non_idempotent).
          fetch(`http://127.0.0.1:${lb}/svc.admin.v1.ProjectService/ListProjects`, {
            method: "POST",
            headers: {
              "Content-Type": "application/json",
              "Connect-Protocol-Version": "1",
              Authorization: `Bearer ${adminToken}`,
            },
            body: "{}",
          }).then(
            async (r) => `${r.status}${r.ok ? "" : ` ${await r.text()}`}`,
            (e: unknown) => String(e),
          ),
        ]);
        for (const [what, got] of [
          ["GET /readyz", get],
          ["remote write", write],
          ["RPC", rpc],
        ])
          if (!/^2\d\d$/.test(got)) failures.push(`${what}: ${got}`);
        answered += 3;
      }
    };
    const clients = Array.from({ length: 4 }, client);
    for (let round = 0; round < 2; round++)
      for (const i of [0, 1]) {
        const before = answered;
        await stopReplica(i);
        await startReplica(i);
        // The next restart follows at once; requests went on meanwhile.
        await waitFor("requests through the restarted replica's turn", 30_000, async () =>
          answered >= before + REQUESTS_PER_ROUND ? true : undefined,
        );
      }
    running = false;
    await Promise.all(clients);
    const byKind = ["GET /readyz", "remote write", "RPC"].map(
      (k) => `${k} ${failures.filter((f) => f.startsWith(`${k}:`)).length}`,
    );
    process.stderr.write(
      `nginx: ${answered} requests through 4 restarts, ${failures.length} failed (${byKind.join(", ")})\n`,
    );
    // What nginx says of the requests it could not pass on (its error log's "[error]" lines, less the
    // refused connections it passed to the next replica).
    const nginxErrors = failures.length
      ? readFileSync(join(dir, "error.log"), "utf8")
          .split("\n")
          .filter((l) => l.includes("[error]") && !l.includes("(111: Connection refused)"))
          .slice(0, 10)
      : [];
    assert.deepEqual(
      [...new Set(failures)].slice(0, 10),
      [],
      `${failures.length} of ${answered} requests failed; nginx: ${nginxErrors.join("\n")}`,
    );
  });
});
