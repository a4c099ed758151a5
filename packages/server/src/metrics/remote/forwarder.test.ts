import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { decodeRemoteWriteBody } from "@svc/remotewrite";
import { isStaleNaNValue, labelsFromRecord, staleNaN } from "../../storage/interface.ts";
import { RemoteWriteRefusedError } from "./errors.ts";
import { createRemoteWriteStorage } from "./forwarder.ts";
import { resolveRemoteMetricsOptions } from "./options.ts";

/** A loopback remote-write receiver that answers each POST with the next scripted status. */
class Receiver {
  readonly bodies: Buffer[] = [];
  readonly headers: IncomingHttpHeaders[] = [];
  script: { status: number; body?: string }[] = [];
  #server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const next = this.script.shift() ?? { status: 204 };
      if (next.status < 300) this.bodies.push(Buffer.concat(chunks));
      this.headers.push(req.headers);
      res.writeHead(next.status, { "content-type": "text/plain" }).end(next.body ?? "");
    });
  });
  url = "";
  async start(): Promise<void> {
    this.#server.listen(0, "127.0.0.1");
    await once(this.#server, "listening");
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/api/v1/write`;
  }
  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((r) => this.#server.close(() => r()));
  }
}

describe("createRemoteWriteStorage()", () => {
  const rx = new Receiver();
  before(() => rx.start());
  after(() => rx.close());
  const labels = labelsFromRecord({ __name__: "svc_vm_vcpus", project_id: "p", vm: "v" });
  const forwarder = (over: Partial<Parameters<typeof resolveRemoteMetricsOptions>[0]> = {}) =>
    createRemoteWriteStorage(
      resolveRemoteMetricsOptions({
        remoteWriteUrl: rx.url,
        queryUrl: "http://127.0.0.1:1",
        headers: { "X-Scope-OrgID": "tenant-1", Authorization: "Bearer s3cret-engine-token" },
        writeBackoffMs: 10,
        writeRetryBudgetMs: 5_000,
        ...over,
      }),
    );

  it("sends remote write 1.0 with the configured headers, samples sorted, staleness markers intact", async () => {
    rx.bodies.length = 0;
    const app = forwarder().appender();
    app.append(labels, 2000, 2);
    app.append(labels, 1000, 1);
    app.append(labels, 3000, staleNaN());
    assert.deepEqual(await app.commit(), { accepted: 3, refused: {} });
    const h = rx.headers.at(-1)!;
    assert.equal(h["content-encoding"], "snappy");
    assert.equal(h["x-prometheus-remote-write-version"], "0.1.0");
    assert.equal(h["x-scope-orgid"], "tenant-1");
    assert.equal(h.authorization, "Bearer s3cret-engine-token");
    const got = decodeRemoteWriteBody(rx.bodies[0]);
    assert.deepEqual(
      got.timeseries[0].samples.map((s) => s.timestampMs),
      [1000, 2000, 3000],
    );
    assert.ok(isStaleNaNValue(got.timeseries[0].samples[2].value));
  });

  it("retries 503, 429 and 500 and resolves once the engine took the batch", async () => {
    rx.bodies.length = 0;
    rx.script = [{ status: 503 }, { status: 429 }, { status: 500 }];
    const app = forwarder().appender();
    app.append(labels, 1000, 1);
    await app.commit();
    assert.equal(rx.bodies.length, 1);
    assert.equal(rx.script.length, 0);
  });

  it("splits a large batch into POSTs of at most maxSamplesPerWrite samples", async () => {
    rx.bodies.length = 0;
    const app = forwarder({ maxSamplesPerWrite: 7 }).appender();
    for (let i = 0; i < 20; i++) app.append(labels, 1000 * (i + 1), i);
    app.append(labelsFromRecord({ __name__: "svc_vm_vcpus", project_id: "p", vm: "w" }), 1000, 9);
    await app.commit();
    const counts = rx.bodies.map((b) =>
      decodeRemoteWriteBody(b).timeseries.reduce((n, ts) => n + ts.samples.length, 0),
    );
    assert.deepEqual(counts, [7, 7, 7]);
  });

  it("gathers a series appended in several runs into one series, by ref or by labels, in time order", async () => {
    rx.bodies.length = 0;
    const other = labelsFromRecord({ __name__: "svc_vm_vcpus", project_id: "p", vm: "w" });
    const app = forwarder().appender();
    const ref = app.appendRef!(-1, labels, 2000, 2);
    assert.ok(ref >= 0);
    assert.equal(app.appendRef!(-1, other, 1000, 7), app.appendRef!(-1, other, 2000, 8));
    assert.equal(app.appendRef!(ref, labels, 1000, 1), ref);
    assert.equal(app.appendRef!(-1, labels, 3000, 3), ref);
    assert.equal(app.appendRef!(ref, labels, Number.NaN, 4), -1);
    assert.deepEqual(await app.commit(), { accepted: 5, refused: {} });
    const got = decodeRemoteWriteBody(rx.bodies[0]).timeseries.map((ts) => [
      ts.labels.find((l) => l.name === "vm")?.value,
      ts.samples.map((x) => [x.timestampMs, x.value]),
    ]);
    assert.deepEqual(got, [
      [
        "v",
        [
          [1000, 1],
          [2000, 2],
          [3000, 3],
        ],
      ],
      [
        "w",
        [
          [1000, 7],
          [2000, 8],
        ],
      ],
    ]);
  });

  it("posts the commits of one turn of the event loop together, each resolved once the engine took it", async () => {
    rx.bodies.length = 0;
    rx.headers.length = 0;
    const storage = forwarder();
    const commits = ["v", "w", "x"].map((vm, i) => {
      const app = storage.appender();
      app.append(labelsFromRecord({ __name__: "svc_vm_vcpus", project_id: "p", vm }), 1000, i);
      return app.commit();
    });
    assert.deepEqual(await Promise.all(commits), [
      { accepted: 1, refused: {} },
      { accepted: 1, refused: {} },
      { accepted: 1, refused: {} },
    ]);
    assert.equal(rx.headers.length, 1);
    const got = decodeRemoteWriteBody(rx.bodies[0]).timeseries.map((ts) => [
      ts.labels.find((l) => l.name === "vm")?.value,
      ts.samples[0].value,
    ]);
    assert.deepEqual(got, [
      ["v", 0],
      ["w", 1],
      ["x", 2],
    ]);
  });

  it("holds a commit made while a round is retrying, and sends it once the round is done", async () => {
    rx.bodies.length = 0;
    rx.headers.length = 0;
    rx.script = [{ status: 503 }];
    const storage = forwarder();
    const commit = (vm: string) => {
      const app = storage.appender();
      app.append(labelsFromRecord({ __name__: "svc_vm_vcpus", project_id: "p", vm }), 1000, 1);
      return app.commit();
    };
    const first = commit("v");
    await new Promise((r) => setTimeout(r, 2)); // the first round is posted and answered 503
    const second = commit("w");
    assert.deepEqual(await Promise.all([first, second]), [
      { accepted: 1, refused: {} },
      { accepted: 1, refused: {} },
    ]);
    const vms = rx.bodies.map((b) => decodeRemoteWriteBody(b).timeseries.map((ts) => ts.labels[2].value));
    assert.deepEqual(vms, [["v"], ["w"]]);
  });

  it("lands an engine's refusal of a merged POST only on the commit it was about", async () => {
    rx.bodies.length = 0;
    rx.headers.length = 0;
    rx.script = [{ status: 400, body: "bad sample" }, { status: 204 }, { status: 400, body: "bad sample" }];
    const storage = forwarder();
    const commits = ["v", "w"].map((vm) => {
      const app = storage.appender();
      app.append(labelsFromRecord({ __name__: "svc_vm_vcpus", project_id: "p", vm }), 1000, 1);
      return app.commit();
    });
    const [v, w] = await Promise.allSettled(commits);
    assert.deepEqual(v, { status: "fulfilled", value: { accepted: 1, refused: {} } });
    assert.equal(w.status, "rejected");
    assert.ok((w as PromiseRejectedResult).reason instanceof RemoteWriteRefusedError);
    assert.equal(rx.headers.length, 3);
    assert.equal(rx.script.length, 0);
  });

  it("does not retry a 400 and names the engine's answer, without the configured headers", async () => {
    rx.script = [{ status: 400, body: "out of order sample" }];
    const app = forwarder().appender();
    app.append(labels, 1000, 1);
    await assert.rejects(app.commit(), (err: Error) => {
      assert.ok(err instanceof RemoteWriteRefusedError);
      assert.equal(err.statusCode, 400);
      assert.match(err.message, /refused the samples: HTTP 400: out of order sample/);
      assert.doesNotMatch(err.message, /s3cret|tenant-1/);
      return true;
    });
    assert.equal(rx.script.length, 0);
  });

  it("answers a 401 from the engine as svc's own failure (502), so the writer keeps its batch", async () => {
    rx.script = [{ status: 401, body: "unauthorized" }];
    const app = forwarder().appender();
    app.append(labels, 1000, 1);
    await assert.rejects(app.commit(), (err: RemoteWriteRefusedError) => err.statusCode === 502);
  });
});
