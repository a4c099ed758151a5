/**
 * The cost of the limits that hold across replicas (docs/decisions.md, "Limits across replicas"):
 * per take of a token bucket and per acquire + release of a query slot, in process, in PostgreSQL
 * (what svc ships) and in Redis (the alternative weighed), from this Node process to the local
 * servers. Prints wall time per call (p50/p99, one caller) and calls per second with 16 callers,
 * and this process's CPU per call. Not a test: figures for the docs.
 *
 *   npx tsx bench/limits/main.ts [--n 5000]
 *
 * PostgreSQL at SVC_TEST_PG_URL (default postgres://postgres@127.0.0.1:5432/test; a scratch database
 * is created and dropped), Redis at REDIS_URL (default redis://127.0.0.1:6379, database 15, keys
 * under svc-bench:, each expiring by itself).
 */
import { connect, type Socket } from "node:net";
import { loadavg } from "node:os";
import { sql } from "kysely";
import { createSharedProjectLimiter } from "../../packages/server/src/cluster/project-slots.ts";
import { sharedRateLimiters } from "../../packages/server/src/cluster/shared-buckets.ts";
import { openDb } from "../../packages/server/src/db/database.ts";
import { TokenBuckets } from "../../packages/server/src/iam/ci/ratelimit.ts";
import { createProjectLimiter } from "../../packages/server/src/metrics/concurrency.ts";
import { testDialects } from "../../packages/server/testing/dialects.ts";
import { calibrationMs } from "../common/measure.ts";

const nArg = process.argv.indexOf("--n");
const N = nArg > 0 ? Number(process.argv[nArg + 1]) : 5000;
const CALLERS = 16;

/** A minimal RESP2 client: commands in, replies out in order (enough for EVALSHA, SET, DEL). */
class Resp {
  #socket: Socket;
  #buf = Buffer.alloc(0);
  #waiting: { resolve: (v: unknown) => void; reject: (e: Error) => void }[] = [];
  private constructor(socket: Socket) {
    this.#socket = socket;
    socket.on("data", (d) => {
      this.#buf = Buffer.concat([this.#buf, d]);
      for (;;) {
        const r = parse(this.#buf, 0);
        if (!r) break;
        this.#buf = this.#buf.subarray(r.end);
        const w = this.#waiting.shift();
        if (r.value instanceof Error) w?.reject(r.value);
        else w?.resolve(r.value);
      }
    });
  }
  static open(url: string): Promise<Resp> {
    const u = new URL(url);
    return new Promise((resolve, reject) => {
      const s = connect(Number(u.port || 6379), u.hostname, () => resolve(new Resp(s)));
      s.setNoDelay(true);
      s.once("error", reject);
    });
  }
  call(...args: (string | number)[]): Promise<unknown> {
    const parts = args.map(String);
    let out = `*${parts.length}\r\n`;
    for (const p of parts) out += `$${Buffer.byteLength(p)}\r\n${p}\r\n`;
    this.#socket.write(out);
    return new Promise((resolve, reject) => this.#waiting.push({ resolve, reject }));
  }
  close(): void {
    this.#socket.end();
  }
}

function parse(b: Buffer, at: number): { value: unknown; end: number } | undefined {
  const eol = b.indexOf("\r\n", at);
  if (eol < 0) return undefined;
  const line = b.toString("utf8", at + 1, eol);
  switch (String.fromCharCode(b[at])) {
    case "+":
      return { value: line, end: eol + 2 };
    case "-":
      return { value: new Error(line), end: eol + 2 };
    case ":":
      return { value: Number(line), end: eol + 2 };
    case "$": {
      const len = Number(line);
      if (len < 0) return { value: null, end: eol + 2 };
      if (b.length < eol + 2 + len + 2) return undefined;
      return { value: b.toString("utf8", eol + 2, eol + 2 + len), end: eol + 2 + len + 2 };
    }
    case "*": {
      const n = Number(line);
      const items: unknown[] = [];
      let end = eol + 2;
      for (let i = 0; i < n; i++) {
        const r = parse(b, end);
        if (!r) return undefined;
        items.push(r.value);
        end = r.end;
      }
      return { value: items, end };
    }
    default:
      throw new Error(`RESP: unexpected ${line}`);
  }
}

/** The same bucket as rate_buckets' upsert, as a Redis script: refill, take or refuse, expire when full. */
const REDIS_TAKE = `
local b = redis.call('HMGET', KEYS[1], 't', 'at')
local burst, rate, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t, at = tonumber(b[1]) or burst, tonumber(b[2]) or now
if now > at then t = math.min(burst, t + (now - at) * rate); at = now end
if t < 1 then return tostring(t) end
t = t - 1
redis.call('HSET', KEYS[1], 't', tostring(t), 'at', at)
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - t) / rate))
return 'ok'`;

/** A query slot in Redis: the first free of cap keys, taken with a lease (Redis cannot tie it to a connection). */
const REDIS_ACQUIRE = `
for n = 0, tonumber(ARGV[1]) - 1 do
  if redis.call('SET', KEYS[1] .. ':' .. n, ARGV[2], 'NX', 'PX', ARGV[3]) then return n end
end
return -1`;

interface Row {
  what: string;
  p50Us: number;
  p99Us: number;
  cpuUsPerCall: number;
  perSecond16: number;
}

async function measure(what: string, call: (i: number) => Promise<unknown>): Promise<Row> {
  for (let i = 0; i < Math.min(500, N); i++) await call(i); // warm-up
  const times = new Float64Array(N);
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    await call(i);
    times[i] = performance.now() - t0;
  }
  const cpu = process.cpuUsage(cpu0);
  times.sort();
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CALLERS }, async () => {
      while (next < N) await call(next++);
    }),
  );
  const wall = performance.now() - t0;
  return {
    what,
    p50Us: times[Math.floor(N * 0.5)] * 1000,
    p99Us: times[Math.floor(N * 0.99)] * 1000,
    cpuUsPerCall: (cpu.user + cpu.system) / N,
    perSecond16: Math.round((N / wall) * 1000),
  };
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  const spec = { burst: 1e9, perMinute: 60_000 }; // never refuses: the cost of a granted take
  const keys = Array.from({ length: 1000 }, (_, i) => `203.0.113.${i % 250}/${i}`);

  const mem = new TokenBuckets(spec.burst, spec.perMinute, Date.now);
  rows.push(await measure("take, in process (TokenBuckets)", (i) => mem.take(keys[i % keys.length], "x")));
  const local = createProjectLimiter({ maxConcurrent: 4 });
  rows.push(await measure("query slot, in process", (i) => local.run(`p${i % 50}`, async () => {})));

  const pgDialect = (await testDialects())[1];
  if (pgDialect.skip) throw new Error(pgDialect.skip);
  const created = await pgDialect.dialect.create();
  const db = await openDb({ databaseUrl: created.databaseUrl });
  try {
    rows.push(await measure("round trip, PostgreSQL (select 1, pool)", () => sql`select 1`.execute(db.db)));
    const shared = sharedRateLimiters(db.db, Date.now)("bench", spec);
    rows.push(
      await measure("take, PostgreSQL (rate_buckets upsert), 1,000 keys", (i) =>
        shared.take(keys[i % keys.length], "x"),
      ),
    );
    rows.push(await measure("take, PostgreSQL, one hot key", () => shared.take("hot", "x")));
    // What the unlogged table saves: the same takes with WAL and its flush at each commit.
    await sql`alter table rate_buckets set logged`.execute(db.db);
    rows.push(
      await measure("take, PostgreSQL, had the table been logged (WAL flush per take)", (i) =>
        shared.take(keys[i % keys.length], "x"),
      ),
    );
    await sql`alter table rate_buckets set unlogged`.execute(db.db);
    const slots = createSharedProjectLimiter(created.databaseUrl ?? "", { maxConcurrent: 4, maxQueued: 64 });
    rows.push(
      await measure("query slot, PostgreSQL (advisory lock + unlock), 50 projects", (i) =>
        slots.run(`p${i % 50}`, async () => {}),
      ),
    );
    await slots.close();
  } finally {
    await db.close();
    await created.drop();
  }

  const redis = await Resp.open(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
  try {
    await redis.call("SELECT", 15);
    rows.push(await measure("round trip, Redis (PING)", () => redis.call("PING")));
    const take = String(await redis.call("SCRIPT", "LOAD", REDIS_TAKE));
    const rate = spec.perMinute / 60_000;
    rows.push(
      await measure("take, Redis (EVALSHA bucket script), 1,000 keys", (i) =>
        redis.call("EVALSHA", take, 1, `svc-bench:b:${keys[i % keys.length]}`, spec.burst, rate, Date.now()),
      ),
    );
    const acquire = String(await redis.call("SCRIPT", "LOAD", REDIS_ACQUIRE));
    rows.push(
      await measure("query slot, Redis (SET NX PX lease + DEL), 50 projects", async (i) => {
        const k = `svc-bench:s:p${i % 50}`;
        const n = Number(await redis.call("EVALSHA", acquire, 1, k, 4, `h${i}`, 30_000));
        if (n >= 0) await redis.call("DEL", `${k}:${n}`);
      }),
    );
  } finally {
    redis.close();
  }

  console.log(
    `limits bench: n=${N} per row, ${CALLERS} callers for calls/s; load ${loadavg()[0].toFixed(1)}, calibration ${calibrationMs().toFixed(0)} ms`,
  );
  console.log("| call | p50 µs | p99 µs | client CPU µs/call | calls/s, 16 callers |");
  console.log("| --- | ---: | ---: | ---: | ---: |");
  for (const r of rows)
    console.log(
      `| ${r.what} | ${r.p50Us.toFixed(0)} | ${r.p99Us.toFixed(0)} | ${r.cpuUsPerCall.toFixed(1)} | ${r.perSecond16} |`,
    );
}

await main();
