// Load client of bench/vm-query, run as its own process (as a dashboard or wrk would be), so the
// client's response decoding neither shares the server's event loop nor its heap.
// stdin: {"rows":[{"name","n","requests":[{"url","method","headers","body"} | {"group":[...]} | {"seq":[...]}]}]};
// requests are sent one at a time (a group's members at once), cycling through each row's list, after
// the row's warm-up ("warmup" requests, default min(n, 100), stopped after "warmupMaxMs"): the
// server's JIT is still optimizing the row's code paths during the first ~2,000 requests, which is a
// start-up cost, not the steady state the rows measure.
// stdin rows may carry "warmup" and "warmupMaxMs".
// stdout: one line {"starting":i} before row i's warm-up (the server side pauses or resumes the peer),
// {"measuring":i} when its measured requests start and {"measured":i} when they end (so the server
// side can read its CPU time over exactly those requests), then
// {"rows":[{"name","n","latenciesMs":[...],"seconds","bytes"}]}
//
// node:http over keep-alive connections, not fetch: like wrk, the client should cost as little as
// it can, since it shares the machine's cores with the server (fetch took ~1.5 ms more per 96 KiB
// answer here, and its p99 with it). Bodies are still read whole and decompressed, as a dashboard would.
import { Agent, request } from "node:http";
import { performance } from "node:perf_hooks";
import { brotliDecompressSync, gunzipSync } from "node:zlib";

// What Chrome and Firefox send; BENCH_ACCEPT_ENCODING overrides it (BENCH_IDENTITY=1: no compression).
const acceptEncoding = process.env.BENCH_IDENTITY
  ? "identity"
  : (process.env.BENCH_ACCEPT_ENCODING ?? "gzip, deflate, br, zstd");

const agent = new Agent({ keepAlive: true, maxSockets: 16 });
const input = JSON.parse(await new Response(process.stdin).text());

/** One request; resolves with the decoded body's size, rejects on a non-200 answer. */
function one(r, rowName) {
  // Binary (application/proto) bodies arrive base64-encoded.
  const body = r.headers["Content-Type"] === "application/proto" ? Buffer.from(r.body, "base64") : r.body;
  const u = new URL(r.url);
  const headers = {
    "Accept-Encoding": acceptEncoding,
    ...r.headers,
    ...(body === undefined ? {} : { "Content-Length": Buffer.byteLength(body) }),
  };
  return new Promise((resolve, reject) => {
    const req = request(
      { agent, host: u.hostname, port: u.port, path: u.pathname + u.search, method: r.method, headers },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          let got = Buffer.concat(chunks);
          if (res.headers["content-encoding"] === "gzip") got = gunzipSync(got);
          if (res.headers["content-encoding"] === "br") got = brotliDecompressSync(got);
          if (res.statusCode !== 200) reject(new Error(`${rowName}: HTTP ${res.statusCode} ${got}`));
          else resolve(got.byteLength);
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

const out = [];
/** Tells the parent (which serves the requests) where a row's measured phase begins and ends. */
const mark = (event) =>
  new Promise((resolve) => process.stdout.write(`${JSON.stringify(event)}\n`, () => setTimeout(resolve, 20)));
/**
 * One item: a request, a group sent at once (a dashboard's panels: its latency is the slowest
 * one's) or a sequence sent one after another; resolves with the bytes of every answer.
 */
async function item(r, rowName) {
  if (r.group) {
    const sizes = await Promise.all(r.group.map((g) => item(g, rowName)));
    return sizes.reduce((a, b) => a + b, 0);
  }
  if (r.seq) {
    let bytes = 0;
    for (const s of r.seq) bytes += await item(s, rowName);
    return bytes;
  }
  return one(r, rowName);
}

for (const [index, row] of input.rows.entries()) {
  const send = (i) => item(row.requests[i % row.requests.length], row.name);
  await mark({ starting: index });
  const warmup = row.warmup ?? Math.min(100, row.n);
  const warmUntil = performance.now() + (row.warmupMaxMs ?? Number.POSITIVE_INFINITY);
  for (let i = 0; i < warmup && performance.now() < warmUntil; i++) await send(i);
  const latenciesMs = [];
  let bytes = 0;
  await mark({ measuring: index });
  const t0 = performance.now();
  for (let i = 0; i < row.n; i++) {
    const a = performance.now();
    bytes = Math.max(bytes, await send(i));
    latenciesMs.push(performance.now() - a);
  }
  const seconds = (performance.now() - t0) / 1000;
  await mark({ measured: index });
  out.push({ name: row.name, n: row.n, latenciesMs, seconds, bytes });
}
agent.destroy();
if (process.env.BENCH_LATENCIES) {
  const { writeFileSync } = await import("node:fs");
  writeFileSync(process.env.BENCH_LATENCIES, JSON.stringify(out.map((r) => [r.name, r.latenciesMs])));
}
process.stdout.write(JSON.stringify({ rows: out }));
