// Load client of bench/vm-query, run as its own process (as a dashboard or wrk would be), so the
// client's response decoding neither shares the server's event loop nor its heap.
// stdin: {"rows":[{"name","n","requests":[{"url","method","headers","body"} | {"group":[...]}]}]};
// requests are sent one at a time (a group's members at once), cycling through each row's list, after
// 10 warm-up requests.
// stdout: {"rows":[{"name","n","latenciesMs":[...],"seconds","bytes"}]}
import { performance } from "node:perf_hooks";

const input = JSON.parse(await new Response(process.stdin).text());
const out = [];
for (const row of input.rows) {
  const one = async (r) => {
    // Binary (application/proto) bodies arrive base64-encoded.
    const body = r.headers["Content-Type"] === "application/proto" ? Buffer.from(r.body, "base64") : r.body;
    const headers = process.env.BENCH_IDENTITY ? { ...r.headers, "Accept-Encoding": "identity" } : r.headers;
    const res = await fetch(r.url, { method: r.method, headers, body });
    const got = await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${row.name}: HTTP ${res.status} ${Buffer.from(got).toString()}`);
    return got.byteLength;
  };
  // A request may be a group sent at once (a dashboard's panels): its latency is the slowest one's.
  const send = async (i) => {
    const r = row.requests[i % row.requests.length];
    if (!r.group) return one(r);
    const sizes = await Promise.all(r.group.map(one));
    return sizes.reduce((a, b) => a + b, 0);
  };
  for (let i = 0; i < Math.min(10, row.n); i++) await send(i);
  const latenciesMs = [];
  let bytes = 0;
  const t0 = performance.now();
  for (let i = 0; i < row.n; i++) {
    const a = performance.now();
    bytes = Math.max(bytes, await send(i));
    latenciesMs.push(performance.now() - a);
  }
  out.push({ name: row.name, n: row.n, latenciesMs, seconds: (performance.now() - t0) / 1000, bytes });
}
if (process.env.BENCH_LATENCIES) {
  const { writeFileSync } = await import("node:fs");
  writeFileSync(process.env.BENCH_LATENCIES, JSON.stringify(out.map((r) => [r.name, r.latenciesMs])));
}
process.stdout.write(JSON.stringify({ rows: out }));
