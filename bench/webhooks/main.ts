/**
 * Webhook delivery benchmark (not a test; issue 16): signed deliveries per second from svc's
 * dispatcher to a loopback HTTPS receiver, and the time from an incident transition to the
 * receiver's 2xx, beside a bare Node HTTPS client posting the same bodies to the same receiver in
 * the same run.
 *
 *   npm run bench:webhooks              5,000 transitions per measured row
 *   npm run bench:webhooks -- --quick   1,000 transitions per row
 *   flags: --no-poll (skip the 1 s poll row), --no-five (skip the 5-destination row), --no-what-if
 *   env:   BENCH_TRANSITIONS, BENCH_DESTINATIONS (16), BENCH_CPU_PROFILE=<file.cpuprofile> (a V8 CPU
 *          profile of the main svc row's drain, with the functions and files of most self time, and the
 *          SQLite statements of that row by SQL), BENCH_PAIRS (3; 0 skips them: see "pairs" below)
 *
 * The app: startTestApp (SQLite, the bench process), notify `{ ca: <receiver's certificate>,
 * allowHosts: ["127.0.0.1"] }`, its clock following the wall clock. The dispatcher is the app's
 * (`app.dispatcher`, the real postJson: node:https, keep-alive agents per CA/allowlist/resolver, the SSRF
 * lookup on every new socket, one deadline).
 *
 * The receiver: a plain node:https server answering 204 as soon as the body is read, recording the
 * `webhook-id` header and Date.now() at the answer. It runs in a **separate process** (spawned
 * `node -e`): the server side of every TLS handshake (one per delivery before svc pooled connections) costs
 * about as much CPU as the client side, and in the bench process it would take event-loop time from
 * the dispatcher and the bare client it is measuring. Its CPU is reported per row. Both processes
 * read the same system clock (Date.now(), 1 ms resolution).
 *
 * The load: incident transitions written as the evaluator writes them, `openIncident` from
 * alerts/transitions.ts (an incidents row and its OPENED incident_events row), one transaction per
 * rule, for rules saved through the RPC with `destinationNames` and applied by the evaluator; no
 * evaluator cycle runs (its cost is bench:alerts'). A measured row is one **burst** of N transitions
 * (an evaluator cycle commits its transitions together), spread evenly over the destinations: D
 * webhook destinations (default 16, so that svc's `concurrency` = 16 can be used: the dispatcher
 * sends one delivery at a time per destination; the per-project limit is 5, so 4 projects × 4), one
 * rule per destination firing on N/D of its project's VMs. Each transition makes one delivery. From
 * the last commit on, everything is svc's: fan-out into deliveries, claim, recheck (destination,
 * incident), secrets, signing, the POST, and the attempt's record.
 *
 * Rows, in this order, each with new transitions or, for the peer, the bodies svc sent in row 1:
 *   1. svc, `app.dispatcher.runOnce(Date.now())` called in a loop until every delivery is sent:
 *      the dispatcher's capacity (what it does when it is always due).
 *   2. bare client, keep-alive off (agent: false, as svc), 16 at a time over a shared queue.
 *   3. bare client, keep-alive on (one https.Agent, keepAlive, maxSockets 16: TLS once per socket).
 *   4. svc as in 1 with 5 destinations in one project (the per-project limit): 5 at a time.
 *   5. svc as the product runs it: `dispatcher.start()`, the 1 s poll (`dispatcherAutoStart`); the
 *      poll interval bounds latency, and each poll runs `runOnce` once.
 *   6. experiment, not svc as shipped (--no-what-if skips it): svc's dispatcher code (createDispatcher,
 *      same db, options, sealer) with a bench-side `post` that keeps connections alive (one
 *      https.Agent, keepAlive; no SSRF lookup: the URL is an IP literal, which postJson checks before
 *      connecting anyway), as in 1: what is left when TLS handshakes are taken out.
 *   and the latency of single transitions on an idle system (loop mode, one at a time).
 *   Pairs: BENCH_PAIRS more bursts of row 1 and row 3 back to back (which goes first alternates), each
 *   with its own load average: on a shared machine the load changes from row to row, and the ratio of
 *   two rows measured seconds apart says more than one of rows measured a minute apart. The median of
 *   the pairs' ratios (with row 1 / row 3's) is printed beside the goal.
 * The bare client's requests carry the same bodies (rendered from the delivery rows of row 1 by the
 * webhook channel, as svc renders them) and headers of the same names and sizes (fixed values: it
 * signs nothing). Its t0 is the moment all N are queued; svc's is the last commit of the burst.
 *
 * Figures: deliveries/s sustained = (n − 1) / (last 2xx − first 2xx) at the receiver; latency = the
 * receiver's 2xx − t0, per delivery (in a burst, mostly queueing: the p99 ≈ the drain time);
 * "first 2xx" = t0 to the first 2xx (svc: the fan-out of the whole burst comes first); CPU per
 * delivery of the bench process (svc or the bare client) and of the receiver; for svc rows also
 * SQLite statements (and their synchronous time) per delivery, counted by wrapping better-sqlite3's
 * Statement methods, and the attempt's own duration (delivery_attempts.duration_ms: recheck, sign,
 * POST). A "machine speed" line as bench:alerts prints it.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { Agent, request } from "node:https";
import { Session } from "node:inspector/promises";
import { loadavg } from "node:os";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import SQLite from "better-sqlite3";
import { instanceKey } from "../../packages/server/src/alerts/read.ts";
import type { RuleSpec } from "../../packages/server/src/alerts/spec.ts";
import { openIncident } from "../../packages/server/src/alerts/transitions.ts";
import { createLogSender } from "../../packages/server/src/notify/channels/email.ts";
import { render } from "../../packages/server/src/notify/channels/index.ts";
import { createDispatcher, type Dispatcher, type Post } from "../../packages/server/src/notify/dispatcher.ts";
import type { NotificationMessage } from "../../packages/server/src/notify/message.ts";
import { defaultNotifyOptions, resolveNotifyOptions } from "../../packages/server/src/notify/options.ts";
import { createSealer } from "../../packages/server/src/notify/seal.ts";
import { testDialects } from "../../packages/server/testing/dialects.ts";
import { startTestApp, type TestApp } from "../../packages/server/testing/harness.ts";
import { makeCertificate } from "../../packages/server/testing/https-peer.ts";
import { calibrationMs, profileSummary } from "../common/measure.ts";

const quick = process.argv.includes("--quick");
const noPoll = process.argv.includes("--no-poll");
const noFive = process.argv.includes("--no-five");
const noWhatIf = process.argv.includes("--no-what-if");
const num = (name: string, dflt: number) => (process.env[name] ? Number(process.env[name]) : dflt);
const N = num("BENCH_TRANSITIONS", quick ? 1000 : 5000);
const DESTS = num("BENCH_DESTINATIONS", 16);
const WARM = quick ? 200 : 500;
const IDLE = 30;
const PAIRS = num("BENCH_PAIRS", 3);
/** svc's default: deliveries attempted at once; the bare client uses the same. */
const CONCURRENCY = defaultNotifyOptions.concurrency;
const PER_PROJECT = defaultNotifyOptions.maxDestinationsPerProject;
const GOAL_RATE = 1000;
const GOAL_RATIO = 0.5;
const out = (s: string) => process.stdout.write(`${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---- the receiver (a separate process) ------------------------------------------------------------

const RECEIVER_JS = `
const https = require("node:https");
let ids = [];
let at = [];
let cpu0 = process.cpuUsage();
const server = https.createServer(
  { key: process.env.BENCH_TLS_KEY, cert: process.env.BENCH_TLS_CERT },
  (req, res) => {
    req.on("data", () => {});
    req.on("end", () => {
      ids.push(String(req.headers["webhook-id"] || ""));
      at.push(Date.now());
      res.writeHead(204);
      res.end();
    });
  },
);
server.listen(0, "127.0.0.1", () => process.send({ type: "listening", port: server.address().port }));
process.on("message", (m) => {
  if (m.type === "count") process.send({ type: "count", n: ids.length });
  else if (m.type === "dump") {
    const c = process.cpuUsage(cpu0);
    cpu0 = process.cpuUsage();
    process.send({ type: "records", ids, at, cpuMs: (c.user + c.system) / 1000 });
    ids = [];
    at = [];
  } else if (m.type === "close") {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  }
});
`;

interface Records {
  ids: string[];
  at: number[];
  cpuMs: number;
}

interface Receiver {
  readonly url: string;
  readonly port: number;
  /** Requests recorded since the last dump. */
  count(): Promise<number>;
  /** The records since the last dump (then cleared) and the receiver's CPU since then. */
  dump(): Promise<Records>;
  close(): Promise<void>;
}

async function startReceiver(tls: { key: string; cert: string }): Promise<Receiver> {
  const child: ChildProcess = spawn(process.execPath, ["-e", RECEIVER_JS], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    env: { ...process.env, BENCH_TLS_KEY: tls.key, BENCH_TLS_CERT: tls.cert, NODE_OPTIONS: "" },
  });
  const next = <T>(type: string) =>
    new Promise<T>((resolve, reject) => {
      const onMessage = (m: { type: string }) => {
        if (m.type !== type) return;
        child.off("message", onMessage);
        child.off("exit", onExit);
        resolve(m as T);
      };
      const onExit = (code: number | null) => reject(new Error(`the receiver exited (${code})`));
      child.on("message", onMessage);
      child.once("exit", onExit);
    });
  const { port } = await next<{ port: number }>("listening");
  return {
    url: `https://127.0.0.1:${port}`,
    port,
    async count() {
      const r = next<{ n: number }>("count");
      child.send({ type: "count" });
      return (await r).n;
    },
    async dump() {
      const r = next<Records>("records");
      child.send({ type: "dump" });
      return r;
    },
    async close() {
      const exited = new Promise((r) => child.once("exit", r));
      child.send({ type: "close" });
      await exited;
    },
  };
}

// ---- SQLite statements, counted -------------------------------------------------------------------

const sqlCount = { n: 0, ms: 0 };
/** The same by statement (its SQL, shortened), printed for the profiled row. */
const sqlBySource = new Map<string, { n: number; ms: number }>();
/** Wraps better-sqlite3's Statement methods to count statements and their synchronous time. */
function countStatements(): void {
  const probe = new SQLite(":memory:");
  const proto = Object.getPrototypeOf(probe.prepare("select 1")) as Record<string, unknown>;
  probe.close();
  for (const m of ["run", "get", "all", "iterate"]) {
    const orig = proto[m] as (...a: unknown[]) => unknown;
    proto[m] = function (this: unknown, ...args: unknown[]) {
      const a = performance.now();
      try {
        return orig.apply(this, args);
      } finally {
        const ms = performance.now() - a;
        sqlCount.n++;
        sqlCount.ms += ms;
        const key = String((this as { source?: string }).source ?? "?")
          .replace(/\(\?(, \?)*\)(, \(\?(, \?)*\))*/g, "(…)")
          .slice(0, 90);
        const k = sqlBySource.get(key);
        if (k) {
          k.n++;
          k.ms += ms;
        } else sqlBySource.set(key, { n: 1, ms });
      }
    };
  }
}

// ---- helpers --------------------------------------------------------------------------------------

function quantile(sorted: readonly number[], f: number): number {
  return sorted.length === 0
    ? Number.NaN
    : sorted[Math.min(sorted.length - 1, Math.floor(f * sorted.length))];
}

function fullGc(): void {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  gc();
  gc();
}

// ---- svc's side: destinations, rules, transitions -------------------------------------------------

interface Lane {
  readonly projectId: string;
  readonly destinationId: string;
  readonly path: string;
  readonly ruleId: string;
  readonly ruleVersion: number;
  readonly spec: RuleSpec;
  readonly vms: readonly string[];
}

/** `dests` webhook destinations over ⌈dests/5⌉ projects, one rule each firing on `vmsPerRule` VMs. */
async function makeLanes(t: TestApp, tag: string, dests: number, vmsPerRule: number): Promise<Lane[]> {
  const projects = Math.ceil(dests / PER_PROJECT);
  const lanes: Lane[] = [];
  for (let p = 0; p < projects; p++) {
    const inProject = Math.floor(dests / projects) + (p < dests % projects ? 1 : 0);
    const projectId = `${tag}-${p}`;
    const vmIds = Array.from({ length: vmsPerRule }, (_, i) => `vm-${String(i).padStart(4, "0")}`);
    const seeded = await t.seedProject(projectId, vmIds);
    const c = t.clients(seeded.owner.session);
    for (let d = 0; d < inProject; d++) {
      const path = `/hooks/${projectId}/${d}`;
      const created = await c.destinations.createDestination({
        projectName: seeded.projectName,
        displayName: `receiver ${d}`,
        kind: "WEBHOOK",
        url: `${receiver.url}${path}`,
        requestId: randomUUID(),
      });
      const destName = created.destination?.name ?? "";
      const ruleId = randomUUID();
      await c.alerts.saveAlertRule({
        projectName: seeded.projectName,
        id: ruleId,
        requestId: randomUUID(),
        expectedVersion: "0",
        spec: {
          displayName: `CPU above 90% (${d})`,
          metricId: "cpu_utilization_pct",
          operator: "GREATER_THAN",
          threshold: 90,
          sustainedSeconds: 300,
          severity: "CRITICAL",
          allVms: true,
          repeatIntervalSeconds: 0,
          destinationNames: [destName],
          vmNames: [],
        },
      });
      lanes.push({
        projectId,
        destinationId: destName.slice(destName.lastIndexOf("/") + 1),
        path,
        ruleId,
        ruleVersion: 0,
        spec: undefined as unknown as RuleSpec,
        vms: seeded.vms,
      });
    }
  }
  await t.app.evaluator.applyPending(Date.now());
  // The applied revision, as the evaluator hands it to openIncident.
  const db = t.app.db.db;
  return Promise.all(
    lanes.map(async (l) => {
      const r = await db
        .selectFrom("alert_rules as r")
        .innerJoin("alert_rule_revisions as v", (j) =>
          j.onRef("v.rule_id", "=", "r.id").onRef("v.version", "=", "r.applied_version"),
        )
        .select(["r.applied_version", "v.spec"])
        .where("r.id", "=", l.ruleId)
        .executeTakeFirstOrThrow();
      return { ...l, ruleVersion: r.applied_version, spec: JSON.parse(r.spec) as RuleSpec };
    }),
  );
}

let burstSeq = 0;
/**
 * n transitions over the lanes (round robin), one transaction per rule as the evaluator writes them;
 * returns the time of the last commit and the burst's tag (its open_time, unique per burst).
 */
async function fire(t: TestApp, lanes: readonly Lane[], n: number) {
  const atMs = Date.now() + ++burstSeq; // unique per burst: the burst's incidents are found by it
  const perLane = lanes.map(() => 0);
  for (let i = 0; i < n; i++) perLane[i % lanes.length]++;
  const w = performance.now();
  for (const [k, l] of lanes.entries()) {
    if (perLane[k] === 0) continue;
    await t.app.db.db.transaction().execute(async (tx) => {
      for (let i = 0; i < perLane[k]; i++) {
        const vm = l.vms[i % l.vms.length];
        await openIncident(tx, {
          projectId: l.projectId,
          ruleId: l.ruleId,
          ruleVersion: l.ruleVersion,
          spec: l.spec,
          instanceKey: instanceKey(vm, ""),
          vmName: vm,
          mountpoint: "",
          value: 91 + (i % 9),
          atMs,
        });
      }
    });
  }
  return { atMs, t0: Date.now(), insertMs: performance.now() - w };
}

/** The burst's deliveries (id, destination, message), by its incidents' open_time. */
async function burstDeliveries(t: TestApp, atMs: number) {
  return t.app.db.db
    .selectFrom("deliveries as d")
    .innerJoin("incidents as i", "i.id", "d.incident_id")
    .select(["d.id", "d.destination_id", "d.message", "d.state"])
    .where("i.open_time", "=", atMs)
    .execute();
}

/** Closes a burst's incidents once their deliveries are done (no event: nothing more to send). */
async function closeBurst(t: TestApp, atMs: number) {
  await t.app.db.db
    .updateTable("incidents")
    .set({ state: "RESOLVED", close_time: Date.now() })
    .where("open_time", "=", atMs)
    .execute();
}

// ---- rows -----------------------------------------------------------------------------------------

interface Row {
  readonly label: string;
  readonly n: number;
  readonly delivered: number;
  readonly failed: number;
  /** Receiver's 2xx − t0, ms, sorted. */
  readonly latency: number[];
  /** t0 → first 2xx, ms. */
  readonly firstMs: number;
  /** Deliveries/s from the first 2xx to the last. */
  readonly rate: number;
  readonly cpuMsPer: number;
  readonly rxCpuMsPer: number;
  readonly sqlPer?: number;
  readonly sqlMsPer?: number;
  /** delivery_attempts.duration_ms, sorted. */
  readonly attemptMs?: number[];
  readonly note?: string;
}

function summarize(
  label: string,
  n: number,
  t0: number,
  rec: Records,
  want: ReadonlySet<string>,
  cpuMs: number,
  extra: Partial<Row> = {},
): Row {
  const times: number[] = [];
  for (let i = 0; i < rec.ids.length; i++) if (want.has(rec.ids[i])) times.push(rec.at[i]);
  times.sort((a, b) => a - b);
  const latency = times.map((x) => x - t0);
  const span = times.length > 1 ? times[times.length - 1] - times[0] : Number.NaN;
  return {
    label,
    n,
    delivered: times.length,
    failed: n - times.length,
    latency,
    firstMs: latency[0] ?? Number.NaN,
    rate: ((times.length - 1) * 1000) / span,
    cpuMsPer: cpuMs / Math.max(1, times.length),
    rxCpuMsPer: rec.cpuMs / Math.max(1, times.length),
    ...extra,
  };
}

const cpuNowMs = () => {
  const c = process.cpuUsage();
  return (c.user + c.system) / 1000;
};

/** A burst through svc: the dispatcher driven by runOnce in a loop, or by its own 1 s poll. */
async function svcRow(
  t: TestApp,
  label: string,
  lanes: readonly Lane[],
  n: number,
  mode: "loop" | "poll",
  profileTo?: string,
  dispatcher: Dispatcher = t.app.dispatcher,
): Promise<{ row: Row; atMs: number }> {
  await receiver.dump(); // resets the receiver's records and CPU
  fullGc();
  const b = await fire(t, lanes, n);
  const cpu0 = cpuNowMs();
  const sql0 = { ...sqlCount };
  let runs = 0;
  let failedAttempts = 0;
  const inspector = profileTo ? new Session() : undefined;
  if (inspector) {
    inspector.connect();
    await inspector.post("Profiler.enable");
    await inspector.post("Profiler.setSamplingInterval", { interval: 200 });
    await inspector.post("Profiler.start");
    sqlBySource.clear();
  }
  const deadline = Date.now() + 300_000;
  if (mode === "loop") {
    for (let sent = 0; sent < n && Date.now() < deadline; ) {
      const r = await dispatcher.runOnce(Date.now());
      runs++;
      sent += r.sent + r.skipped;
      failedAttempts += r.failed;
      // Failed attempts are due again 5 s later.
      if (r.attempted === 0) await sleep(20);
    }
  } else {
    t.app.dispatcher.start();
    while ((await receiver.count()) < n && Date.now() < deadline) await sleep(100);
    await t.app.dispatcher.stop();
  }
  const cpuMs = cpuNowMs() - cpu0;
  const sqlN = sqlCount.n - sql0.n;
  const sqlMs = sqlCount.ms - sql0.ms;
  if (inspector && profileTo) {
    const { profile } = await inspector.post("Profiler.stop");
    writeFileSync(profileTo, JSON.stringify(profile));
    out(`CPU profile of "${label}" written to ${profileTo}`);
    for (const l of profileSummary(profile as never)) out(l);
    inspector.disconnect();
    out("SQLite statements of this row, by SQL (count, synchronous ms):");
    for (const [sql, c] of [...sqlBySource].sort((x, y) => y[1].ms - x[1].ms).slice(0, 15))
      out(`  ${String(c.n).padStart(6)} ${c.ms.toFixed(1).padStart(8)} ms  ${sql}`);
  }
  const rec = await receiver.dump();
  const dl = await burstDeliveries(t, b.atMs);
  const attempts = await t.app.db.db
    .selectFrom("delivery_attempts")
    .select("duration_ms")
    .where(
      "delivery_id",
      "in",
      t.app.db.db
        .selectFrom("deliveries as d")
        .innerJoin("incidents as i", "i.id", "d.incident_id")
        .select("d.id")
        .where("i.open_time", "=", b.atMs),
    )
    .execute();
  const notSent = dl.filter((d) => d.state !== "SENT").length;
  const row = summarize(label, n, b.t0, rec, new Set(dl.map((d) => d.id)), cpuMs, {
    sqlPer: sqlN / n,
    sqlMsPer: sqlMs / n,
    attemptMs: attempts.map((a) => a.duration_ms).sort((x, y) => x - y),
    note:
      `${n} transitions inserted in ${b.insertMs.toFixed(0)} ms (${lanes.length} rules, one transaction each); ` +
      `${dl.length} deliveries, ${notSent} not SENT, ${failedAttempts} failed attempts` +
      (mode === "loop" ? `; ${runs} runOnce calls` : ""),
  });
  if (dl.length !== n) throw new Error(`${label}: ${dl.length} deliveries for ${n} transitions`);
  await closeBurst(t, b.atMs);
  return { row, atMs: b.atMs };
}

/** The experiment's post: node:https with one keep-alive agent (TLS once per destination socket). */
function pooledPost(ca: string): Post {
  const agent = new Agent({ keepAlive: true });
  return (url, body, headers) =>
    new Promise((resolve) => {
      const u = new URL(url);
      const started = performance.now();
      const req = request(
        {
          method: "POST",
          host: u.hostname,
          port: Number(u.port || 443),
          path: `${u.pathname}${u.search}`,
          agent,
          ca,
          headers: {
            "content-type": "application/json",
            "user-agent": "svc-notify/1",
            ...headers,
            "content-length": String(Buffer.byteLength(body)),
          },
        },
        (res) => {
          res.resume();
          res.on("end", () =>
            resolve({
              kind: "response",
              status: res.statusCode ?? 0,
              durationMs: performance.now() - started,
            }),
          );
        },
      );
      req.on("error", (e) =>
        resolve({
          kind: "error",
          error: e.message,
          reason: e.message,
          durationMs: performance.now() - started,
        }),
      );
      req.end(body);
    });
}

/** Fixed header values of the sizes svc sends (the bare client signs nothing). */
function bareHeaders(id: string): Record<string, string> {
  return {
    "content-type": "application/json",
    "user-agent": "svc-notify/1",
    "webhook-id": id,
    "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
    "webhook-signature": `v1,${"A".repeat(43)}=`,
    "svc-attempt-id": `att_${randomUUID()}`,
    "svc-signature-v2": `v2,${"B".repeat(43)}=`,
  };
}

/** The peer: node:https posting the bodies, CONCURRENCY at a time over one queue. */
async function bareRow(
  label: string,
  bodies: readonly { path: string; body: string }[],
  keepAlive: boolean,
  ca: string,
): Promise<Row> {
  await receiver.dump();
  fullGc();
  const tag = `bare-${randomUUID().slice(0, 8)}`;
  const reqs = bodies.map((b, i) => ({ ...b, headers: bareHeaders(`${tag}-${i}`) }));
  const agent = keepAlive ? new Agent({ keepAlive: true, maxSockets: CONCURRENCY }) : false;
  let errors = 0;
  let next = 0;
  const one = (i: number) =>
    new Promise<void>((resolve) => {
      const r = reqs[i];
      const req = request(
        {
          method: "POST",
          host: "127.0.0.1",
          port: receiver.port,
          path: r.path,
          agent,
          ca,
          headers: { ...r.headers, "content-length": String(Buffer.byteLength(r.body)) },
        },
        (res) => {
          res.resume();
          res.on("end", () => {
            if ((res.statusCode ?? 0) >= 300) errors++;
            resolve();
          });
        },
      );
      req.on("error", () => {
        errors++;
        resolve();
      });
      req.end(r.body);
    });
  const cpu0 = cpuNowMs();
  const t0 = Date.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < reqs.length) await one(next++);
    }),
  );
  const cpuMs = cpuNowMs() - cpu0;
  if (agent) agent.destroy();
  const rec = await receiver.dump();
  return summarize(label, reqs.length, t0, rec, new Set(reqs.map((r) => r.headers["webhook-id"])), cpuMs, {
    note: `${errors} errors`,
  });
}

/** Single transitions on an idle system (loop mode), commit → 2xx each. */
async function idleLatency(t: TestApp, lanes: readonly Lane[], count: number): Promise<number[]> {
  const lat: number[] = [];
  await receiver.dump();
  for (let k = 0; k < count; k++) {
    await sleep(20);
    const b = await fire(t, [lanes[k % lanes.length]], 1);
    for (let sent = 0; sent < 1; ) sent += (await t.app.dispatcher.runOnce(Date.now())).sent;
    const rec = await receiver.dump();
    const [d] = await burstDeliveries(t, b.atMs);
    const i = rec.ids.indexOf(d?.id ?? "");
    if (i >= 0) lat.push(rec.at[i] - b.t0);
    await closeBurst(t, b.atMs);
  }
  return lat.sort((a, b) => a - b);
}

// ---------------------------------------------------------------------------------------------------

const tls = makeCertificate();
const receiver = await startReceiver(tls);
countStatements();
const [sqlite] = await testDialects();
const t = await startTestApp(sqlite.dialect, {
  notify: { dispatcherAutoStart: false, ca: tls.cert, options: { allowHosts: ["127.0.0.1"] } },
});
// The app's clock follows the wall clock: deliveries are due, leased and expire in real time.
Object.defineProperty(t.clock, "ms", { get: () => Date.now(), set: () => {}, configurable: true });
try {
  out(
    `bench:webhooks: ${N.toLocaleString("en")} transitions per row, svc concurrency ${CONCURRENCY}, ` +
      `receiver ${receiver.url} (separate process, 204)`,
  );
  calibrationMs();
  const calibration0 = calibrationMs();
  const load0 = loadavg()[0];
  let w = performance.now();
  const lanes = await makeLanes(t, "wh", DESTS, Math.ceil(N / DESTS));
  const five = noFive ? [] : await makeLanes(t, "five", PER_PROJECT, Math.ceil(N / PER_PROJECT));
  out(
    `set up ${lanes.length} destinations in ${Math.ceil(DESTS / PER_PROJECT)} projects` +
      (noFive ? "" : ` and ${five.length} in one`) +
      ` (rules applied, VMs seeded) in ${((performance.now() - w) / 1000).toFixed(1)} s`,
  );

  // Warm-up: svc's path and the bare client's, unmeasured.
  w = performance.now();
  const warm = await svcRow(t, "warm-up", lanes, WARM, "loop");
  const warmBodies = (await burstDeliveries(t, warm.atMs)).map((d) => ({
    path: lanes.find((l) => l.destinationId === d.destination_id)?.path ?? "/",
    body: render("WEBHOOK", JSON.parse(d.message) as NotificationMessage).body,
  }));
  await bareRow("warm-up", warmBodies, false, tls.cert);
  await bareRow("warm-up", warmBodies, true, tls.cert);
  out(`warm-up (${WARM} deliveries each way) in ${((performance.now() - w) / 1000).toFixed(1)} s`);

  const rows: Row[] = [];
  const main = await svcRow(
    t,
    `svc, runOnce loop, ${lanes.length} destinations`,
    lanes,
    N,
    "loop",
    process.env.BENCH_CPU_PROFILE,
  );
  rows.push(main.row);
  out(`  ${main.row.label}: ${main.row.note}`);
  const bodiesOf = async (atMs: number) =>
    (await burstDeliveries(t, atMs)).map((d) => ({
      path: lanes.find((l) => l.destinationId === d.destination_id)?.path ?? "/",
      body: render("WEBHOOK", JSON.parse(d.message) as NotificationMessage).body,
    }));
  const bodies = await bodiesOf(main.atMs);
  const meanBody = bodies.reduce((a, b) => a + Buffer.byteLength(b.body), 0) / bodies.length;
  const bareOff = await bareRow(
    `bare node:https, keep-alive off, ${CONCURRENCY} at a time`,
    bodies,
    false,
    tls.cert,
  );
  rows.push(bareOff);
  const bareOn = await bareRow(
    `bare node:https, keep-alive on, ${CONCURRENCY} at a time`,
    bodies,
    true,
    tls.cert,
  );
  rows.push(bareOn);
  for (const r of [bareOff, bareOn]) out(`  ${r.label}: ${r.note}`);
  if (!noFive) {
    const r = (
      await svcRow(t, `svc, runOnce loop, ${five.length} destinations (one project)`, five, N, "loop")
    ).row;
    rows.push(r);
    out(`  ${r.label}: ${r.note}`);
  }
  if (!noPoll) {
    const r = (
      await svcRow(
        t,
        `svc as run: dispatcherAutoStart, ${defaultNotifyOptions.pollIntervalMs} ms poll`,
        lanes,
        N,
        "poll",
      )
    ).row;
    rows.push(r);
    out(`  ${r.label}: ${r.note}`);
  }
  if (!noWhatIf) {
    const cfg = t.app.config;
    const pooled = createDispatcher({
      db: t.app.db.db,
      options: resolveNotifyOptions(cfg.notify.options),
      sealer: createSealer(cfg.secretKey),
      mailer: createLogSender(t.app.log),
      post: pooledPost(tls.cert),
      baseUrl: `http://${cfg.host}:${cfg.port}`,
      now: Date.now,
      log: t.app.log,
    });
    await svcRow(t, "warm-up", lanes, WARM, "loop", undefined, pooled);
    const r = (
      await svcRow(
        t,
        "experiment: svc's dispatcher, keep-alive post (not shipped)",
        lanes,
        N,
        "loop",
        undefined,
        pooled,
      )
    ).row;
    rows.push(r);
    out(`  ${r.label}: ${r.note}`);
  }
  // Pairs: row 1 and row 3 again, back to back, the order alternating.
  const pairs: { load: number; svc: Row; bare: Row }[] = [];
  for (let i = 0; i < PAIRS; i++) {
    const load = loadavg()[0];
    const bareLabel = `pair ${i + 1}: bare, keep-alive on`;
    const svcLabel = `pair ${i + 1}: svc, runOnce loop`;
    let bare: Row | undefined;
    if (i % 2 === 1) bare = await bareRow(bareLabel, bodies, true, tls.cert);
    const s = await svcRow(t, svcLabel, lanes, N, "loop");
    bare ??= await bareRow(bareLabel, await bodiesOf(s.atMs), true, tls.cert);
    pairs.push({ load, svc: s.row, bare });
  }
  const idle = await idleLatency(t, lanes, IDLE);
  const calibration1 = calibrationMs();

  // --- the table ----------------------------------------------------------------------------------
  const f0 = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : "—");
  const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : "—");
  const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "—");
  out("");
  out(
    `machine speed: a fixed CPU workload took ${calibration0.toFixed(1)} ms before the load and ` +
      `${calibration1.toFixed(1)} ms after (lower is faster; compare runs by it); load average ` +
      `${load0.toFixed(1)} before, ${loadavg()[0].toFixed(1)} after (2 = both cores busy; this run's own two ` +
      "processes make up to ~2)",
  );
  out(
    `burst of ${N.toLocaleString("en")} transitions (svc) or bodies (bare), ${Math.round(meanBody)} B JSON bodies, ` +
      "latency = receiver's 2xx − t0 (svc: last commit of the burst; bare: all queued)",
  );
  out(
    "| row | delivered | deliveries/s (first→last 2xx) | first 2xx ms | p50 ms | p99 ms | max ms | CPU ms/delivery (bench process) | receiver CPU ms/delivery | SQLite statements (ms) /delivery | attempt p50 / p99 ms |",
  );
  out("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const r of rows) {
    const l = r.latency;
    out(
      `| ${r.label} | ${r.delivered} | ${f0(r.rate)} | ${f0(r.firstMs)} | ${f0(quantile(l, 0.5))} | ${f0(quantile(l, 0.99))} | ` +
        `${f0(l.at(-1) ?? Number.NaN)} | ${f2(r.cpuMsPer)} | ${f2(r.rxCpuMsPer)} | ` +
        `${r.sqlPer === undefined ? "—" : `${f1(r.sqlPer)} (${f2(r.sqlMsPer ?? Number.NaN)})`} | ` +
        `${r.attemptMs ? `${f0(quantile(r.attemptMs, 0.5))} / ${f0(quantile(r.attemptMs, 0.99))}` : "—"} |`,
    );
  }
  out(
    `idle: ${idle.length} single transitions, commit → 2xx (runOnce at once): p50 ${f1(quantile(idle, 0.5))} ms, ` +
      `max ${f1(idle.at(-1) ?? Number.NaN)} ms`,
  );
  const svc = main.row;
  const ratioOff = svc.rate / bareOff.rate;
  const ratioOn = svc.rate / bareOn.rate;
  out("");
  out(
    `svc / bare (deliveries/s): ${f2(ratioOff)}× the keep-alive-off client, ${f2(ratioOn)}× the keep-alive-on one; ` +
      `p99 latency ${f2(quantile(svc.latency, 0.99) / quantile(bareOff.latency, 0.99))}× / ` +
      `${f2(quantile(svc.latency, 0.99) / quantile(bareOn.latency, 0.99))}×`,
  );
  if (pairs.length > 0) {
    out("");
    out("pairs (svc row 1 and bare keep-alive on, back to back):");
    out(
      "| pair | load average | svc deliveries/s | bare keep-alive on deliveries/s | ratio | CPU ms/delivery svc / bare |",
    );
    out("| --- | --- | --- | --- | --- | --- |");
    for (const [i, p] of pairs.entries())
      out(
        `| ${i + 1}${i % 2 === 1 ? " (bare first)" : ""} | ${p.load.toFixed(1)} | ${f0(p.svc.rate)} | ${f0(p.bare.rate)} | ` +
          `${f2(p.svc.rate / p.bare.rate)}× | ${f2(p.svc.cpuMsPer)} / ${f2(p.bare.cpuMsPer)} |`,
      );
  }
  const ratios = [ratioOn, ...pairs.map((p) => p.svc.rate / p.bare.rate)].sort((a, b) => a - b);
  const medianOn = ratios[Math.floor(ratios.length / 2)];
  const svcRates = [svc.rate, ...pairs.map((p) => p.svc.rate)].sort((a, b) => a - b);
  const medianRate = svcRates[Math.floor(svcRates.length / 2)];
  if (pairs.length > 0)
    out(
      `median of ${ratios.length} (row 1 / row 3 and the pairs): svc ${f0(medianRate)} deliveries/s, ` +
        `${f2(medianOn)}× the keep-alive-on client (range ${f2(ratios[0])}–${f2(ratios.at(-1) ?? Number.NaN)}×)`,
    );
  out(
    `goal: ≥ ${GOAL_RATE.toLocaleString("en")} deliveries/s sustained: ${svc.rate >= GOAL_RATE ? "met" : "NOT met"} ` +
      `(${f0(svc.rate)}/s, runOnce loop, ${lanes.length} destinations)` +
      rows
        .slice(3)
        .map((r) => `; ${r.rate >= GOAL_RATE ? "met" : "NOT met"} by "${r.label}" (${f0(r.rate)}/s)`)
        .join(""),
  );
  out(
    `goal: ≥ ${GOAL_RATIO}× the bare client: ${ratioOff >= GOAL_RATIO ? "met" : "NOT met"} against keep-alive off ` +
      `(${f2(ratioOff)}×), ${ratioOn >= GOAL_RATIO ? "met" : "NOT met"} against keep-alive on (${f2(ratioOn)}×)` +
      (pairs.length > 0
        ? `; median of ${ratios.length}: ${medianOn >= GOAL_RATIO ? "met" : "NOT met"} (${f2(medianOn)}×)`
        : ""),
  );
} finally {
  await t.close();
  await receiver.close();
}
