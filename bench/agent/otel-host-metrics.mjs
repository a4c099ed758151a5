// bench:agent's OpenTelemetry sender: @opentelemetry/host-metrics in an SDK MeterProvider, exported
// every interval by @opentelemetry/exporter-metrics-otlp-proto (protobuf, gzip, cumulative: the SDK's
// default), the token read from a file as docs/agent.md says. Plain JavaScript, run by node directly,
// so no loader's cost is measured with it.
// Usage: node otel-host-metrics.mjs <metrics URL> <token file> <interval ms>
import { readFileSync } from "node:fs";
import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-proto";
import { HostMetrics } from "@opentelemetry/host-metrics";
import { MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";

const [url, tokenFile, intervalMs] = process.argv.slice(2);
const exporter = new OTLPMetricExporter({
  url,
  headers: { Authorization: `Bearer ${readFileSync(tokenFile, "utf8").trim()}` },
  compression: "gzip",
});
const provider = new MeterProvider({
  readers: [new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: Number(intervalMs) })],
});
new HostMetrics({ meterProvider: provider, name: "svc-bench" }).start();
// The reader's timer is unref'd (an application keeps the process alive); here nothing else would.
const keepAlive = setInterval(() => {}, 1 << 30);
process.on("SIGTERM", () => {
  clearInterval(keepAlive);
  provider.shutdown().finally(() => process.exit(0));
});
