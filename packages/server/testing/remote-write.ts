import { pushRemoteWrite, type TimeSeries } from "@svc/remotewrite";

/**
 * Test and bench helpers: builds remote-write series for svc's catalog and pushes them through the
 * real ingest endpoint (so derived series are computed exactly as in production).
 */
export function rwSeries(
  name: string,
  labels: Record<string, string>,
  samples: readonly (readonly [number, number])[],
): TimeSeries {
  return {
    labels: [
      { name: "__name__", value: name },
      ...Object.entries(labels).map(([n, v]) => ({ name: n, value: v })),
    ],
    samples: samples.map(([timestampMs, value]) => ({ timestampMs, value })),
  };
}

/** Pushes to `${baseUrl}/v1/ingest/prometheus/api/v1/write`; throws unless every sample was kept. */
export async function pushAll(baseUrl: string, token: string, timeseries: TimeSeries[]): Promise<void> {
  const res = await pushRemoteWrite(`${baseUrl}/v1/ingest/prometheus/api/v1/write`, token, {
    timeseries,
    metadata: [],
  });
  if (res.status !== 204) throw new Error(`remote write answered ${res.status}: ${res.body}`);
}
