import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { createLogger, decodeRemoteWriteBody, type WriteRequest } from "@svc/remotewrite";
import { createAgent } from "./agent.ts";
import { resolveAgentOptions } from "./options.ts";

// The agent's program: the sources through tsx, or (SVC_AGENT_TEST_BIN) the packaged bundle when the
// life-cycle test runs these tests under the guest's Node.js (test/agent-lifecycle.test.ts).
const BIN = process.env.SVC_AGENT_TEST_BIN ?? fileURLToPath(new URL("../bin/svc-agent.js", import.meta.url));
const TOKEN = "tok-secret-0123456789abcdef";
const VM = "projects/p-42/vms/web-1";

interface Received {
  headers: IncomingHttpHeaders;
  req: WriteRequest;
}

/**
 * A loopback remote-write receiver that answers `status()` and keeps what it accepted; a 400 carries
 * svc's `Svc-Ingest-Refused` header when `refusal` is set (a proxy's 400 does not).
 */
class Receiver {
  readonly got: Received[] = [];
  /** Every request's sample timestamps and answer, accepted or not. */
  readonly seen: { timestamps: number[]; status: number }[] = [];
  status: (req: WriteRequest, headers: IncomingHttpHeaders) => number = () => 204;
  refusal: string | undefined;
  #server: Server | undefined;
  port = 0;

  async start(): Promise<void> {
    this.#server = createServer((r, res) => {
      const chunks: Buffer[] = [];
      r.on("data", (c: Buffer) => chunks.push(c));
      r.on("end", () => {
        const req = decodeRemoteWriteBody(Buffer.concat(chunks));
        const st = this.status(req, r.headers);
        const timestamps = [...new Set(req.timeseries.flatMap((ts) => ts.samples.map((x) => x.timestampMs)))];
        this.seen.push({ timestamps, status: st });
        if (st < 300) this.got.push({ headers: r.headers, req });
        const headers = st === 400 && this.refusal ? { "Svc-Ingest-Refused": this.refusal } : {};
        res.writeHead(st, headers).end(st < 300 ? "" : "refused by test");
      });
    });
    await new Promise<void>((ok, fail) => {
      this.#server!.once("error", fail);
      this.#server!.listen(this.port, "127.0.0.1", ok);
    });
    this.port = (this.#server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    const s = this.#server;
    this.#server = undefined;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((ok) => s.close(() => ok()));
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  constructor() {
    receivers.push(this);
  }

  /** Sample timestamps of one metric, in the order they arrived. */
  timestamps(metric: string): number[] {
    const out: number[] = [];
    for (const g of this.got) {
      for (const ts of g.req.timeseries) {
        if (ts.labels.some((l) => l.name === "__name__" && l.value === metric)) {
          for (const s of ts.samples) out.push(s.timestampMs);
        }
      }
    }
    return out;
  }
}

async function until(cond: () => boolean, what: string, limitMs = 20_000): Promise<void> {
  const end = Date.now() + limitMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const procCpu = () => {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  return (f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) / 100;
};
const procVcpus = () => readFileSync("/proc/stat", "utf8").match(/^cpu\d+ /gm)!.length;
const memTotal = () => Number(/MemTotal:\s+(\d+)/.exec(readFileSync("/proc/meminfo", "utf8"))![1]) * 1024;

const dirs: string[] = [];
const children: ChildProcess[] = [];
const receivers: Receiver[] = [];
after(async () => {
  for (const r of receivers) await r.stop();
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), "svc-agent-"));
  dirs.push(d);
  return d;
};

describe("svc-agent (real process, real /proc, loopback receiver)", () => {
  it("pushes real readings with labels and token, buffers an outage and delivers the backlog in order", async () => {
    const rx = new Receiver();
    await rx.start();
    const cpuBefore = procCpu();
    const child = spawn(
      process.execPath,
      [
        BIN,
        "--server",
        rx.url,
        "--vm",
        VM,
        "--interval",
        "150ms",
        "--spool-dir",
        tempDir(),
        "--log-level",
        "debug",
      ],
      { env: { ...process.env, SVC_AGENT_TOKEN: TOKEN }, stdio: ["ignore", "ignore", "pipe"] },
    );
    children.push(child);
    let stderr = "";
    child.stderr!.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    const collected = () =>
      stderr
        .split("\n")
        .filter((l) => l.includes('"collected"'))
        .map((l) => JSON.parse(l).timestampMs as number);

    await until(() => rx.got.length >= 2, "first pushes");
    const cpuAfter = procCpu();
    const first = rx.got[0];
    assert.equal(first.headers.authorization, `Bearer ${TOKEN}`);
    assert.equal(first.headers["content-encoding"], "snappy");
    const byName = new Map(
      first.req.timeseries.map((ts) => [ts.labels.find((l) => l.name === "__name__")!.value, ts]),
    );
    for (const ts of first.req.timeseries) {
      const names = ts.labels.map((l) => l.name);
      assert.deepEqual(names, [...names].sort(), "labels sorted");
      assert.equal(ts.labels.find((l) => l.name === "vm")?.value, VM);
      assert.ok(
        !names.includes("source") && !names.includes("project_id"),
        "server-owned labels are not sent",
      );
      assert.equal(ts.samples.length, 1);
    }
    assert.equal(byName.get("svc_vm_memory_total_bytes")?.samples[0].value, memTotal());
    assert.equal(byName.get("svc_vm_guest_vcpus")?.samples[0].value, procVcpus());
    const cpu = byName.get("svc_vm_guest_cpu_seconds_total")!.samples[0].value;
    assert.ok(cpu >= cpuBefore && cpu <= cpuAfter, `${cpuBefore} <= ${cpu} <= ${cpuAfter}`);
    assert.ok(byName.has("svc_vm_filesystem_size_bytes"), "the root filesystem is reported");

    // Outage: the receiver goes away for at least three collections.
    await rx.stop();
    const downAt = collected().length;
    await until(() => collected().length >= downAt + 4, "collections during the outage");
    const sentBefore = rx.got.length;
    // A push already in flight when the receiver stopped may still have landed; only collections
    // that never reached the receiver count as the outage.
    const deliveredBefore = new Set(rx.timestamps("svc_vm_memory_total_bytes"));
    const outage = collected()
      .slice(downAt, downAt + 4)
      .filter((t) => !deliveredBefore.has(t));
    assert.ok(outage.length >= 3, `at least three collections were buffered (${outage.length})`);
    await rx.start();
    await until(
      () => outage.every((t) => rx.timestamps("svc_vm_memory_total_bytes").includes(t)),
      "backlog delivery",
    );
    const arrived = rx.timestamps("svc_vm_memory_total_bytes");
    for (let i = 1; i < arrived.length; i++) assert.ok(arrived[i] > arrived[i - 1], `in order at ${i}`);
    const late = rx.got
      .slice(sentBefore)
      .flatMap((g) => g.req.timeseries)
      .filter((ts) => ts.labels.some((l) => l.value === "svc_vm_memory_total_bytes"))
      .map((ts) => ts.samples[0].timestampMs);
    assert.ok(
      outage.every((t) => late.includes(t)),
      "outage samples arrived after the restart with their original timestamps",
    );

    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
    assert.equal(child.exitCode, 0);
    assert.ok(!stderr.includes(TOKEN), "the token never appears in the log");
    assert.match(stderr, /push failed; spooling/);
    await rx.stop();
  });

  it("refuses a token on the command line", async () => {
    const child = spawn(
      process.execPath,
      [BIN, "--server", "http://127.0.0.1:9", "--vm", VM, "--token", TOKEN],
      {
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
    children.push(child);
    let stderr = "";
    child.stderr!.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    await new Promise((r) => child.once("exit", r));
    assert.equal(child.exitCode, 2);
    assert.match(stderr, /not accepted on the command line/);
    assert.ok(!stderr.includes(TOKEN));
  });
});

describe("createAgent()", () => {
  // A clock that moves a second per reading, so collections taken back to back have distinct times.
  let clock = Date.now();
  const agentFor = (
    rx: Receiver,
    lines: string[],
    token: () => string = () => TOKEN,
    spoolMaxBytes = 1024 * 1024,
  ) =>
    createAgent(
      resolveAgentOptions({
        server: rx.url,
        vm: VM,
        token,
        spoolMaxBytes,
        now: () => (clock += 1000),
        spoolDir: tempDir(),
        retryMinMs: 10,
        retryMaxMs: 20,
        logger: createLogger("debug", (l) => lines.push(l)),
      }),
    );

  it("drops only what svc refused per sample (400 with its header); keeps a proxy's 400, 503 and 429", async () => {
    const rx = new Receiver();
    await rx.start();
    const lines: string[] = [];
    const agent = agentFor(rx, lines);
    try {
      rx.status = () => 400;
      rx.refusal = "samples";
      const refused = agent.collectNow();
      await agent.flush();
      assert.equal(agent.stats().rejectedBatches, 1);
      assert.equal(agent.stats().spoolPending, 0);

      rx.refusal = undefined; // a 400 from something in between: not svc's verdict on the samples
      const answers = [400, 503, 429, 204];
      rx.status = () => answers.shift() ?? 204;
      const kept = agent.collectNow();
      await until(() => rx.got.length === 1, "delivery after a proxy's 400, 503 and 429");
      assert.equal(agent.stats().retries, 3);
      assert.equal(agent.stats().rejectedBatches, 1);
      assert.deepEqual(rx.timestamps("svc_vm_memory_total_bytes"), [kept]);
      assert.ok(!rx.timestamps("svc_vm_memory_total_bytes").includes(refused));
      assert.ok(lines.some((l) => l.includes("server refused samples") && l.includes('"status":400')));
      assert.ok(!lines.join("").includes(TOKEN));
    } finally {
      await agent.stop();
      await rx.stop();
    }
  });

  it("keeps the batch and the merged backlog through a wrong token (401) and a 404, and sends them once fixed", async () => {
    const rx = new Receiver();
    await rx.start();
    const lines: string[] = [];
    let token = "svca_wrong-0123456789abcdef";
    const agent = agentFor(rx, lines, () => token);
    try {
      rx.status = (_req, h) => (h.authorization === `Bearer ${TOKEN}` ? 204 : 401);
      const held = [agent.collectNow()];
      await until(() => rx.seen.length >= 2, "refused pushes");
      held.push(agent.collectNow(), agent.collectNow());
      await until(() => rx.seen.filter((x) => x.timestamps.length === 3).length >= 1, "a merged push");
      assert.equal(agent.stats().spoolPending, 3, "nothing dropped while the token is refused");
      assert.equal(agent.stats().rejectedBatches, 0);
      assert.ok(lines.some((l) => l.includes("server refused the token") && l.includes('"status":401')));

      // A proxy that has lost the route answers 404 for a while: still kept.
      let notFound = 3;
      rx.status = () => (notFound-- > 0 ? 404 : 204);
      token = TOKEN;
      await until(() => agent.stats().spoolPending === 0, "the backlog delivered");
      assert.deepEqual(rx.timestamps("svc_vm_memory_total_bytes"), held);
      assert.equal(agent.stats().rejectedBatches, 0);
      assert.ok(
        lines.some((l) => l.includes("nothing receives at the write URL") && l.includes('"status":404')),
      );
      assert.ok(lines.some((l) => l.includes("server accepts batches again")));
      assert.ok(!lines.join("").includes(TOKEN) && !lines.join("").includes(token));
    } finally {
      await agent.stop();
      await rx.stop();
    }
  });

  it("while refused, the spool stays within its bound: the oldest batches go, logged and counted", async () => {
    const rx = new Receiver();
    await rx.start();
    const lines: string[] = [];
    const agent = agentFor(rx, lines, () => TOKEN, 64 * 1024);
    try {
      rx.status = () => 401;
      while (agent.stats().droppedOverflow === 0) {
        agent.collectNow();
        assert.ok(agent.stats().collected < 10_000, "the spool never filled");
      }
      const st = agent.stats();
      assert.ok(st.spoolBytes <= 64 * 1024, `${st.spoolBytes} bytes on disk`);
      assert.ok(st.spoolPending > 0 && st.rejectedBatches === 0);
      const drop = lines.find((l) => l.includes("spool full; oldest batches dropped"));
      assert.ok(drop, "the drop is logged");
      assert.equal(JSON.parse(drop).droppedOverflow, st.droppedOverflow);
    } finally {
      await agent.stop();
      await rx.stop();
    }
  });

  it("sends a backlog a proxy refuses as too large (413) in smaller requests, losing nothing", async () => {
    const rx = new Receiver();
    await rx.start();
    const lines: string[] = [];
    const agent = agentFor(rx, lines);
    try {
      rx.status = () => 503;
      const held = [agent.collectNow(), agent.collectNow(), agent.collectNow(), agent.collectNow()];
      await until(() => rx.seen.some((x) => x.timestamps.length === 4), "a merged push of the backlog");
      // The proxy takes one collection per request, no more.
      rx.status = (req) =>
        new Set(req.timeseries.map((ts) => ts.samples[0].timestampMs)).size > 1 ? 413 : 204;
      await until(() => agent.stats().spoolPending === 0, "the backlog delivered");
      assert.deepEqual(rx.timestamps("svc_vm_memory_total_bytes"), held);
      assert.equal(agent.stats().rejectedBatches, 0);
      assert.ok(
        rx.seen.some((x) => x.status === 413),
        "the proxy did refuse a merged request",
      );
      assert.ok(lines.some((l) => l.includes("sending the backlog in smaller requests")));

      // One collection the proxy refuses is kept (and retried), not dropped.
      rx.status = () => 413;
      const big = agent.collectNow();
      await until(
        () => rx.seen.filter((x) => x.status === 413 && x.timestamps[0] === big).length >= 2,
        "retries",
      );
      assert.equal(agent.stats().spoolPending, 1);
      rx.status = () => 204;
      await until(() => agent.stats().spoolPending === 0, "delivery once the limit is raised");
      assert.deepEqual(rx.timestamps("svc_vm_memory_total_bytes"), [...held, big]);
    } finally {
      await agent.stop();
      await rx.stop();
    }
  });

  it("drops one collection svc cannot decode (400, body) rather than holding up every newer one", async () => {
    const rx = new Receiver();
    await rx.start();
    const lines: string[] = [];
    const agent = agentFor(rx, lines);
    try {
      rx.refusal = "body";
      const answers = [400];
      rx.status = () => answers.shift() ?? 204;
      agent.collectNow();
      await agent.flush();
      assert.equal(agent.stats().rejectedBatches, 1);
      const next = agent.collectNow();
      await until(() => rx.got.length === 1, "the next collection");
      assert.deepEqual(rx.timestamps("svc_vm_memory_total_bytes"), [next]);
      assert.ok(lines.some((l) => l.includes("server cannot decode this collection; dropped")));
    } finally {
      await agent.stop();
      await rx.stop();
    }
  });
});
