/**
 * The remote metrics backend: svc in front of a Prometheus-compatible engine (Prometheus,
 * VictoriaMetrics single or cluster, Mimir, Thanos). See docs/deploy.md "Remote metrics backend".
 */
export { type ApiSeries, createPromApiClient, type PromApiClient } from "./api-client.ts";
export { createRemoteMetricsBackend, type RemoteMetricsBackend } from "./backend.ts";
export { MetricsEngineUnavailableError, RemoteWriteRefusedError } from "./errors.ts";
export { createRemoteWriteStorage } from "./forwarder.ts";
export {
  defaultRemoteMetricsOptions,
  parseHeaderList,
  type RemoteMetricsOptions,
  resolveRemoteMetricsOptions,
} from "./options.ts";
