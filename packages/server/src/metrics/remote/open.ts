import { snappyImplementation } from "@svc/remotewrite";
import type { Logger } from "pino";
import type { Registry } from "../../instrument.ts";
import type { QueryPool } from "../../promql/index.ts";
import type { Storage } from "../../storage/interface.ts";
import { createRemoteMetricsBackend, type RemoteMetricsBackend } from "./backend.ts";
import { createRemoteWriteStorage } from "./forwarder.ts";
import { createRemoteMetrics } from "./instrumentation.ts";
import { type RemoteMetricsOptions, resolveRemoteMetricsOptions } from "./options.ts";

/**
 * Both halves of the remote backend from the app's configuration: the Storage the ingester appends
 * to (remote write) and the MetricsBackend every reader uses. Nothing is contacted until used; the
 * log line names the engine's URLs without headers or credentials, and which snappy is in use.
 */
export function openRemoteMetrics(
  config: Pick<RemoteMetricsOptions, "remoteWriteUrl" | "queryUrl" | "headers"> &
    Partial<RemoteMetricsOptions>,
  deps: {
    queryPool?: QueryPool;
    log?: Logger;
    registry?: Registry;
    chargeCpu?: (projectId: string, seconds: number) => void;
  },
): { metrics: RemoteMetricsBackend; storage: Storage } {
  const options = resolveRemoteMetricsOptions(config);
  deps.log?.info(
    {
      remoteWrite: new URL(options.remoteWriteUrl).origin,
      query: new URL(options.queryUrl).origin,
      // "javascript" when the native snappy binary did not load: ingest then costs more CPU.
      snappy: snappyImplementation(),
    },
    "metrics: remote Prometheus-compatible engine",
  );
  const instruments = deps.registry && createRemoteMetrics(deps.registry);
  return {
    metrics: createRemoteMetricsBackend({
      options,
      queryPool: deps.queryPool,
      log: deps.log,
      instruments,
      chargeCpu: deps.chargeCpu,
    }),
    storage: createRemoteWriteStorage({ ...options, log: deps.log, instruments }),
  };
}
