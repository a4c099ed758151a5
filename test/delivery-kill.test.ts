import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createSvcClients, verifyWebhook } from "@svc/sdk";
import { waitFor } from "../packages/server/testing/assert.ts";
import { makeCertificate } from "../packages/server/testing/https-peer.ts";
import { startServerProcess } from "../packages/server/testing/server-process.ts";

const ADMIN_TOKEN = `svcadmin_${randomUUID()}`;
/**
 * The dispatcher's lease (SVC_NOTIFY_LEASE_SECONDS; notify/options.ts leaseMs, docs/notifications.md): a
 * killed attempt is retried after it. The shortest the options accept (twice the 10 s request timeout),
 * not the 25 s default, so the test waits less.
 */
const LEASE_MS = 20_000;

/** `npm start`'s entry point without the demo, on SQLite in `dataDir`, a free port, trusting `caFile`. */
async function startServer(
  dataDir: string,
  caFile: string,
): Promise<{ child: ChildProcess; baseUrl: string }> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: "0",
    SVC_DATA_DIR: dataDir,
    SVC_DEMO: "false",
    SVC_EVALUATOR: "false",
    SVC_ADMIN_TOKEN: ADMIN_TOKEN,
    SVC_NOTIFY_ALLOW_HOSTS: "127.0.0.1",
    SVC_NOTIFY_LEASE_SECONDS: String(LEASE_MS / 1000),
    SVC_NOTIFY_CA_FILE: caFile,
    SVC_LOG_LEVEL: "warn",
  };
  delete env.SVC_DATABASE_URL;
  delete env.SVC_SMTP_URL;
  const { child, baseUrl } = await startServerProcess({ env });
  return { child, baseUrl };
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((r) => child.once("exit", () => r()));
}

/** A message for a failed assertion (protobuf messages hold bigints). */
const show = (v: unknown) => JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? String(x) : x));

interface Received {
  readonly at: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

describe("notification delivery across a kill -9 of the server", () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-kill-"));
  const children: ChildProcess[] = [];
  after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    await Promise.all(children.map(exited));
    rmSync(dir, { recursive: true, force: true });
  });

  it("resumes the in-flight delivery after a restart with the same DeliveryID and a new attempt ID, losing none", async (t) => {
    // An HTTPS receiver on loopback that, until told otherwise, reads each request and never answers.
    const tls = makeCertificate();
    const caFile = join(dir, "ca.pem");
    writeFileSync(caFile, tls.cert);
    const received: Received[] = [];
    const held: ServerResponse[] = [];
    let answer = false;
    let arrived: () => void = () => {};
    const firstArrival = new Promise<void>((r) => {
      arrived = r;
    });
    const receiver = createServer(tls, (req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        received.push({ at: Date.now(), headers: req.headers, body: Buffer.concat(chunks) });
        arrived();
        if (answer) res.writeHead(204).end();
        else held.push(res);
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    t.after(
      () =>
        new Promise<void>((r) => {
          receiver.closeAllConnections();
          receiver.close(() => r());
        }),
    );
    const hookUrl = `https://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

    const dataDir = join(dir, "data");
    const first = await startServer(dataDir, caFile);
    children.push(first.child);
    const admin = createSvcClients({ baseUrl: first.baseUrl, token: ADMIN_TOKEN, maxRetries: 0 }).admin;
    await admin.projects.createProject({ projectId: "kill", displayName: "kill -9" });
    const email = "owner@example.com";
    const password = `pw-${randomUUID()}`;
    const user = await admin.users.createUser({ email, password, displayName: "Owner" });
    await admin.projects.setMember({ project: "projects/kill", user: user.name, role: "owner" });
    const { sessionToken } = await createSvcClients({ baseUrl: first.baseUrl, maxRetries: 0 }).sessions.login(
      {
        email,
        password,
      },
    );
    const owner = createSvcClients({ baseUrl: first.baseUrl, token: sessionToken, maxRetries: 0 });
    const created = await owner.destinations.createDestination({
      projectName: "projects/kill",
      displayName: "receiver",
      kind: "WEBHOOK",
      url: hookUrl,
      requestId: randomUUID(),
    });
    const destination = created.destination?.name ?? "";
    // Two deliveries in the outbox: the dispatcher sends one destination's deliveries one at a time, so
    // one is in flight (claimed, its request at the receiver) and the other waits behind it.
    const beforeSend = Date.now();
    const sends = [
      await owner.destinations.sendTestNotification({ name: destination }),
      await owner.destinations.sendTestNotification({ name: destination }),
    ];
    let noArrival: NodeJS.Timeout | undefined;
    await Promise.race([
      firstArrival,
      new Promise((_, reject) => {
        noArrival = setTimeout(() => reject(new Error("no delivery reached the receiver in 60 s")), 60_000);
      }),
    ]).finally(() => clearTimeout(noArrival));
    first.child.kill("SIGKILL");
    await exited(first.child);
    assert.equal(first.child.signalCode, "SIGKILL");
    assert.equal(received.length, 1, "only one attempt was in flight");
    const inFlight = received[0];
    const inFlightId = String(inFlight.headers["webhook-id"]);
    const killedAttemptId = String(inFlight.headers["svc-attempt-id"]);
    assert.ok(
      sends.some((s) => s.deliveryId === inFlightId),
      "the request in flight is one of the deliveries",
    );
    assert.equal(held.length, 1);

    // Restart on the same data dir; the receiver now answers.
    answer = true;
    const second = await startServer(dataDir, caFile);
    children.push(second.child);
    const reader = createSvcClients({ baseUrl: second.baseUrl, token: sessionToken, maxRetries: 0 });
    const deliveries = await waitFor(
      "both deliveries to leave PENDING after the lease",
      LEASE_MS + 180_000,
      async () => {
        const { deliveries } = await reader.destinations.listDeliveries({ projectName: "projects/kill" });
        return deliveries.length === 2 && deliveries.every((d) => d.state !== "PENDING")
          ? deliveries
          : undefined;
      },
    );

    // Nothing lost, nothing doubled: each delivery was sent once after the restart, signed, and is SENT.
    assert.deepEqual(deliveries.map((d) => d.deliveryId).sort(), sends.map((s) => s.deliveryId).sort());
    const afterRestart = received.slice(1);
    assert.deepEqual(
      afterRestart.map((r) => String(r.headers["webhook-id"])).sort(),
      sends.map((s) => s.deliveryId).sort(),
      "one request per delivery after the restart",
    );
    for (const r of afterRestart) {
      const v = verifyWebhook(r.body, r.headers, created.webhookSecret);
      assert.equal(v.deliveryId, r.headers["webhook-id"]);
    }
    for (const d of deliveries) {
      const got = await reader.destinations.getDelivery({ name: d.name });
      assert.equal(got.state, "SENT", show(got));
      // The killed attempt left no record (it is recorded with its outcome, which never came): the
      // history holds the one attempt that was answered.
      assert.equal(got.attempts.length, 1, show(got.attempts));
      const [attempt] = got.attempts;
      assert.equal(attempt.status, "SENT");
      assert.equal(attempt.responseCode, 204);
      const request = afterRestart.find((r) => r.headers["webhook-id"] === d.deliveryId);
      assert.equal(attempt.attemptId, request?.headers["svc-attempt-id"]);
    }

    // The interrupted delivery: same webhook-id, a new attempt ID, and not before its lease ran out.
    const resumed = afterRestart.find((r) => r.headers["webhook-id"] === inFlightId);
    assert.ok(resumed);
    assert.notEqual(resumed.headers["svc-attempt-id"], killedAttemptId);
    assert.match(String(resumed.headers["svc-attempt-id"]), /^att_/);
    const resumedDelivery = await reader.destinations.getDelivery({
      name: `${destination}/deliveries/${inFlightId}`,
    });
    assert.notEqual(resumedDelivery.attempts[0].attemptId, killedAttemptId);
    assert.ok(
      Number(resumedDelivery.attempts[0].timeUnix) * 1000 >= beforeSend + LEASE_MS - 1000,
      "the in-flight delivery was retried only once its lease had passed",
    );

    second.child.kill("SIGTERM");
    await exited(second.child);
  });
});
